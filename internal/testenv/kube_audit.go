package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TokenUsers are three people the apiserver knows by static tokens (every Kube has them),
// for tests that need to tell who made a change: TokenUser returns a client for each.
// Their uids are "token-user-1" to "token-user-3", their group TokenUsersGroup.
var TokenUsers = []string{"dev-a@example.com", "dev-b@example.com", "dev-c@example.com"}

// TokenUsersGroup is the group of every TokenUsers entry.
const TokenUsersGroup = "testenv:token-users"

// TokenUser returns a client config authenticating as user, one of TokenUsers, by its
// static token. The first call binds TokenUsersGroup to the cluster-admin ClusterRole, so
// the users may do anything, impersonation included (Impersonate-User: set
// rest.Config.Impersonate on a copy).
func (k *Kube) TokenUser(ctx context.Context, user string) (*rest.Config, error) {
	tok, ok := k.creds.userTokens[user]
	if !ok {
		return nil, fmt.Errorf("%q is not one of testenv.TokenUsers", user)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: TokenUsersGroup},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: TokenUsersGroup}},
	}
	_, err := k.clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("bind %s to cluster-admin: %w", TokenUsersGroup, err)
	}
	cfg := k.creds.restConfig(k.Config.Host, tok)
	asUser, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The RBAC authorizer learns of the binding from an informer: wait until it has.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"},
		}}
		r, err := asUser.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed {
			return cfg, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s not bound to cluster-admin (last error %v): %w", user, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// AuditOptions start kube-apiserver with an audit policy and, optionally, the webhook
// backend in batch mode (KubeOptions.Audit).
type AuditOptions struct {
	// Policy is an audit.k8s.io/v1 Policy document (YAML), written to a file and passed as
	// --audit-policy-file.
	Policy string
	// Webhook sends the events to a receiver; nil: no webhook backend.
	Webhook *AuditWebhook
	// LogPath is --audit-log-path (format json, one event per line); "": no log backend.
	LogPath string
}

// AuditWebhook is where and how the apiserver's webhook backend sends audit events.
type AuditWebhook struct {
	// URL of the receiver, e.g. "https://127.0.0.1:PORT/audit". The receiver need not be
	// listening when the apiserver starts: batches are retried (InitialBackoff) and then
	// dropped.
	URL string
	// CAPEM verifies the receiver's serving certificate.
	CAPEM []byte
	// ClientCertPEM and ClientKeyPEM authenticate the apiserver to the receiver; or Token,
	// sent as a bearer token. Both may be set; neither sends no credentials.
	ClientCertPEM, ClientKeyPEM []byte
	Token                       string
	// BatchMaxWait is --audit-webhook-batch-max-wait. Default 100ms, so tests see events
	// quickly (the apiserver's default is 30s).
	BatchMaxWait time.Duration
	// InitialBackoff is --audit-webhook-initial-backoff, the wait before the first retry of
	// a failed batch. Default 500ms (the apiserver's default is 10s), or what RetryFor
	// asks for.
	InitialBackoff time.Duration
	// RetryFor, when InitialBackoff is not set, sets it so that the apiserver keeps
	// re-sending a failed batch for at least this long after its first attempt
	// (AuditWebhookInitialBackoffFor): a receiver down for less than that, and back,
	// receives every batch sent while it was down.
	RetryFor time.Duration
}

// The apiserver's webhook backend makes 5 attempts at a batch, each in a goroutine of its
// own, waiting b, 1.5b, 2.25b and 3.375b between them (b: --audit-webhook-initial-backoff,
// each wait plus up to 20% of jitter; k8s.io/apiserver/pkg/util/webhook,
// DefaultRetryBackoffWithInitialDelay), then drops the batch: its last attempt comes
// 8.125b to 9.75b after its first.
const auditRetrySpan = 1 + 1.5 + 2.25 + 3.375

// AuditWebhookRetryCover is how long, at least, the apiserver keeps re-sending a failed
// batch after its first attempt, with --audit-webhook-initial-backoff=initialBackoff.
func AuditWebhookRetryCover(initialBackoff time.Duration) time.Duration {
	return time.Duration(float64(initialBackoff) * auditRetrySpan)
}

// AuditWebhookInitialBackoffFor is the --audit-webhook-initial-backoff that makes the
// apiserver re-send a failed batch for at least cover (AuditWebhookRetryCover).
func AuditWebhookInitialBackoffFor(cover time.Duration) time.Duration {
	return time.Duration(float64(cover)/auditRetrySpan).Round(time.Millisecond) + time.Millisecond
}

// auditArgs writes the policy and the webhook kubeconfig into dir and returns the flags.
func auditArgs(dir string, a *AuditOptions) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(a.Policy), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--audit-policy-file=" + policy}
	if a.LogPath != "" {
		args = append(args, "--audit-log-path="+a.LogPath, "--audit-log-format=json")
	}
	w := a.Webhook
	if w == nil {
		return args, nil
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["receiver"] = &clientcmdapi.Cluster{Server: w.URL, CertificateAuthorityData: w.CAPEM}
	kc.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: w.ClientCertPEM, ClientKeyData: w.ClientKeyPEM, Token: w.Token,
	}
	kc.Contexts["receiver"] = &clientcmdapi.Context{Cluster: "receiver", AuthInfo: "apiserver"}
	kc.CurrentContext = "receiver"
	path := filepath.Join(dir, "audit-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	wait := w.BatchMaxWait
	if wait <= 0 {
		wait = 100 * time.Millisecond
	}
	backoff := w.InitialBackoff
	switch {
	case backoff > 0:
	case w.RetryFor > 0:
		backoff = AuditWebhookInitialBackoffFor(w.RetryFor)
	default:
		backoff = 500 * time.Millisecond
	}
	return append(args,
		"--audit-webhook-config-file="+path,
		"--audit-webhook-mode=batch",
		"--audit-webhook-batch-max-wait="+wait.String(),
		"--audit-webhook-initial-backoff="+backoff.String(),
		// Tests write in bursts; the default throttle (10 batches/s) would only delay them.
		"--audit-webhook-batch-throttle-enable=false",
	), nil
}

// AuditTLS is a CA with a serving certificate for 127.0.0.1/localhost (an audit
// receiver's) and a client certificate (the apiserver's, CN "kube-apiserver-audit"), as
// PEM and as files in a directory.
type AuditTLS struct {
	CAPEM, CertPEM, KeyPEM, ClientCertPEM, ClientKeyPEM []byte
	// Files holding the PEMs above.
	CAFile, CertFile, KeyFile, ClientCertFile, ClientKeyFile string
}

// NewAuditTLS writes a fresh AuditTLS into dir.
func NewAuditTLS(dir string) (*AuditTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-cdc testenv audit CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create the audit CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("create the %s certificate: %w", cn, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	t := &AuditTLS{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	if t.CertPEM, t.KeyPEM, err = leaf(2, "kube-cdc-audit-receiver", x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if t.ClientCertPEM, t.ClientKeyPEM, err = leaf(3, "kube-apiserver-audit", x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path *string
		name string
		data []byte
	}{
		{&t.CAFile, "audit-ca.crt", t.CAPEM}, {&t.CertFile, "audit-receiver.crt", t.CertPEM},
		{&t.KeyFile, "audit-receiver.key", t.KeyPEM}, {&t.ClientCertFile, "audit-client.crt", t.ClientCertPEM},
		{&t.ClientKeyFile, "audit-client.key", t.ClientKeyPEM},
	} {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// CreateConfigMapAs creates the ConfigMap namespace/name holding data as user, one of
// TokenUsers: the audit tests' way to make the apiserver audit a write by a known user
// without importing client-go themselves (the layout test keeps client-go to the source
// and the harness).
func (k *Kube) CreateConfigMapAs(ctx context.Context, user, namespace, name string, data map[string]string) error {
	cfg, err := k.TokenUser(ctx, user)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	_, err = cs.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}
