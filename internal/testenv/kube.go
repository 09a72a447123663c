package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeOptions configure the kube-apiserver of a Kube. The zero value is a plain apiserver.
type KubeOptions struct {
	// EtcdCompactionInterval is passed as --etcd-compaction-interval: how often the
	// apiserver compacts etcd history. 0 leaves the apiserver default (5m).
	EtcdCompactionInterval time.Duration
	// WatchCacheSizes is passed as --watch-cache-sizes, e.g. "podtemplates#0" serves
	// podtemplates' watches straight from etcd (no watch cache). Empty: apiserver default.
	WatchCacheSizes []string
	// FeatureGates is passed as --feature-gates, e.g. "WatchList=false". Empty: defaults.
	FeatureGates string
	// ExtraArgs are appended to the kube-apiserver command line, after all the others.
	ExtraArgs []string
}

// Kube is an etcd and a kube-apiserver (no controller-manager, no scheduler, no nodes) on
// loopback ports, with everything in Dir. Without controllers, pods are never scheduled,
// namespaces stay Terminating once deleted, and no "default" ServiceAccount appears (the
// ServiceAccount admission plugin is disabled so pods can still be created).
type Kube struct {
	// Config authenticates as "admin" in group system:masters (a static token).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same credentials as Config.
	Kubeconfig string
	// Dir holds etcd's data, the certificates, tokens, kubeconfigs and both logs. Stop
	// removes it.
	Dir string
	// EtcdURL is etcd's client URL (plain HTTP), for tests that look at etcd directly.
	EtcdURL string

	opts    KubeOptions
	creds   *kubeCredentials
	etcdBin string
	apiBin  string
	apiPort int
	etcdArg []string
	http    *http.Client // admin, for /readyz

	clientset kubernetes.Interface
	dynamic   dynamic.Interface
	apiext    apiextensionsclient.Interface

	mu        sync.Mutex
	etcd      *kubeProc
	apiserver *kubeProc
	stopped   bool
}

const (
	apiserverReadyTimeout = 2 * time.Minute
	etcdReadyTimeout      = 30 * time.Second
	// restrictedNamespace holds the ServiceAccounts behind RestrictedUser.
	restrictedNamespace = "kube-cdc-testenv"
)

// NewKube starts a Kube for one test (or test helper) and stops it when the test ends. It
// fails the test when the servers do not come up, and prints the tail of both logs when the
// test has failed.
func NewKube(t testing.TB, opts KubeOptions) *Kube {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartKube(ctx, opts)
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\n%s", Tail(k.LogPath(), 40), Tail(k.EtcdLogPath(), 20))
		}
		k.Stop()
	})
	return k
}

// StartKube starts etcd and kube-apiserver and returns once the apiserver's /readyz is ok.
// The caller must call Stop. Meant for TestMain; tests use NewKube.
func StartKube(ctx context.Context, opts KubeOptions) (_ *Kube, err error) {
	bin, err := TestbinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kube-cdc-kube-")
	if err != nil {
		return nil, err
	}
	k := &Kube{
		Dir:     dir,
		opts:    opts,
		etcdBin: filepath.Join(bin, "etcd"),
		apiBin:  filepath.Join(bin, "kube-apiserver"),
	}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	if k.creds, err = writeKubeCredentials(dir); err != nil {
		return nil, fmt.Errorf("write credentials: %w", err)
	}

	// A free port may be taken by someone else before the server binds it: retry with new
	// ports when that happens.
	for attempt := 1; ; attempt++ {
		err = k.startEtcdOnFreePorts(ctx)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err = k.startAPIServerOnFreePort(ctx)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}

	if k.clientset, err = kubernetes.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	if k.dynamic, err = dynamic.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	if k.apiext, err = apiextensionsclient.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	k.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(k.Kubeconfig, "admin", k.Config); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Kube) startEtcdOnFreePorts(ctx context.Context) error {
	client, err := FreePort()
	if err != nil {
		return err
	}
	peer, err := FreePort()
	if err != nil {
		return err
	}
	k.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	k.etcdArg = []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(k.Dir, "etcd"),
		"--listen-client-urls=" + k.EtcdURL,
		"--advertise-client-urls=" + k.EtcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		// Test data need not survive a power cut; fsync would only slow every write.
		"--unsafe-no-fsync",
	}
	return k.StartEtcd(ctx)
}

func (k *Kube) startAPIServerOnFreePort(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	k.apiPort = port
	k.Config = k.creds.restConfig(fmt.Sprintf("https://127.0.0.1:%d", port), k.creds.adminToken)
	if k.http, err = rest.HTTPClientFor(k.Config); err != nil {
		return err
	}
	return k.startAPIServer(ctx)
}

func (k *Kube) apiserverArgs() []string {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(k.apiPort),
		"--tls-cert-file=" + k.creds.certFile,
		"--tls-private-key-file=" + k.creds.keyFile,
		"--cert-dir=" + filepath.Join(k.Dir, "apiserver-certs"),
		"--etcd-servers=" + k.EtcdURL,
		"--token-auth-file=" + k.creds.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + k.creds.saKeyFile,
		"--service-account-signing-key-file=" + k.creds.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Nothing creates "default" ServiceAccounts here, which that plugin requires of pods.
		"--disable-admission-plugins=ServiceAccount",
		// One client, no tenants: fairness queuing would only add goroutines and delay.
		"--enable-priority-and-fairness=false",
		// On SIGTERM, end open watches and stop within seconds instead of waiting up to the
		// 60 s request timeout for them; clients see a clean end of stream and re-watch.
		"--shutdown-watch-termination-grace-period=2s",
		"--shutdown-send-retry-after=true",
	}
	if k.opts.EtcdCompactionInterval > 0 {
		args = append(args, "--etcd-compaction-interval="+k.opts.EtcdCompactionInterval.String())
	}
	if len(k.opts.WatchCacheSizes) > 0 {
		args = append(args, "--watch-cache-sizes="+strings.Join(k.opts.WatchCacheSizes, ","))
	}
	if k.opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+k.opts.FeatureGates)
	}
	return append(args, k.opts.ExtraArgs...)
}

func (k *Kube) startAPIServer(ctx context.Context) error {
	p, err := startKubeProc("kube-apiserver", k.LogPath(), k.apiBin, k.apiserverArgs()...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.apiserver = p
	k.mu.Unlock()
	return k.waitAPIServerReady(ctx)
}

// waitAPIServerReady polls /readyz (which includes RBAC bootstrap and, since 1.36, watch
// cache initialization) until it answers 200.
func (k *Kube) waitAPIServerReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiserverReadyTimeout)
	defer cancel()
	k.mu.Lock()
	p := k.apiserver
	k.mu.Unlock()
	var last string
	for {
		if err := p.exitErr(); err != nil {
			return err
		}
		last = k.probe(ctx, k.Config.Host+"/readyz")
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (last /readyz: %s): %w\n%s", last, ctx.Err(), Tail(k.LogPath(), 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probe GETs url with the admin client and returns "" on 200, else what went wrong.
func (k *Kube) probe(ctx context.Context, url string) string {
	return probeURL(ctx, k.http, url)
}

func probeURL(ctx context.Context, c *http.Client, url string) string {
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return ""
}

// Stop kills kube-apiserver and etcd (SIGTERM, then SIGKILL) and removes Dir. It is safe to
// call more than once.
func (k *Kube) Stop() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.stopped = true
	api, etcd := k.apiserver, k.etcd
	k.mu.Unlock()
	// Quick grace periods: nothing here needs a clean shutdown.
	_ = api.stop(5 * time.Second)
	_ = etcd.stop(5 * time.Second)
	if k.http != nil {
		k.http.CloseIdleConnections()
	}
	_ = os.RemoveAll(k.Dir)
}

// Clientset is a typed client authenticated as the admin.
func (k *Kube) Clientset() kubernetes.Interface { return k.clientset }

// Dynamic is a dynamic client authenticated as the admin.
func (k *Kube) Dynamic() dynamic.Interface { return k.dynamic }

// LogPath is the kube-apiserver's log file (all its runs, one after the other).
func (k *Kube) LogPath() string { return filepath.Join(k.Dir, "kube-apiserver.log") }

// EtcdLogPath is etcd's log file (all its runs, one after the other).
func (k *Kube) EtcdLogPath() string { return filepath.Join(k.Dir, "etcd.log") }

// RestartAPIServer stops kube-apiserver and starts it again on the same port with the same
// etcd, certificates and tokens, and returns once /readyz is ok. Open watches end; clients
// reconnect. The restarted apiserver's watch caches start from etcd's current revision, so
// a watch from an RV older than that gets 410 Gone for any cached resource (as after a real
// apiserver restart), and its metrics start from zero.
func (k *Kube) RestartAPIServer(ctx context.Context) error {
	k.mu.Lock()
	p := k.apiserver
	k.mu.Unlock()
	if err := p.stop(30 * time.Second); err != nil {
		return err
	}
	k.http.CloseIdleConnections()
	return k.startAPIServer(ctx)
}

// StopEtcd stops etcd; the apiserver keeps running and fails requests until StartEtcd.
// etcd waits 7 s on SIGTERM for open watch streams (the apiserver's) to end, so after 2 s
// it is killed instead: a crash, which etcd's write-ahead log is made for.
func (k *Kube) StopEtcd() error {
	k.mu.Lock()
	p := k.etcd
	k.mu.Unlock()
	return p.stop(2 * time.Second)
}

// StartEtcd starts etcd again with the same data dir and ports (after StopEtcd; StartKube
// uses it for the first start too). It returns once etcd is healthy and, when the apiserver
// runs, once the apiserver's /readyz is ok again.
func (k *Kube) StartEtcd(ctx context.Context) error {
	p, err := startKubeProc("etcd", k.EtcdLogPath(), k.etcdBin, k.etcdArg...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.etcd = p
	api := k.apiserver
	k.mu.Unlock()

	waitCtx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	plain := &http.Client{}
	var last string
	for {
		if err := p.exitErr(); err != nil {
			return err
		}
		if last = probeURL(waitCtx, plain, k.EtcdURL+"/health"); last == "" {
			break
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("etcd not healthy (last /health: %s): %w\n%s", last, waitCtx.Err(), Tail(k.EtcdLogPath(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if api == nil {
		return nil
	}
	return k.waitAPIServerReady(ctx)
}

// ExpireHistory makes every resource version issued before the call too old to watch
// from: afterwards a watch from any such RV gets 410 Gone ("too old resource version"),
// while a fresh LIST (and a watch from its RV) works.
//
// Compacting etcd alone is not enough: the apiserver serves watches of cached resources
// from its watch cache, which keeps its own window of recent events regardless of etcd
// compaction. So ExpireHistory
//  1. writes a scratch key outside /registry twice, so that etcd's revision is at least two
//     past any RV a client could hold (a watch from RV r starts at revision r+1, and etcd
//     still serves a watch that starts exactly at the compacted revision);
//  2. compacts etcd at that revision (physically), for resources watched straight from
//     etcd (watch cache disabled with WatchCacheSizes "resource#0");
//  3. restarts the apiserver, whose fresh watch caches start from the current revision.
func (k *Kube) ExpireHistory(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{k.EtcdURL},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	var rev int64
	for i := range 2 {
		resp, err := cli.Put(ctx, "/kube-cdc-testenv/expire-history", strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("bump etcd revision: %w", err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return k.RestartAPIServer(ctx)
}

// CompactEtcd compacts etcd's history up to its current revision, and nothing else: the
// apiserver's watch caches keep serving the events they hold. ExpireHistory is what tests
// of 410 handling want; this exists to show the difference.
func (k *Kube) CompactEtcd(ctx context.Context) (revision int64, err error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{k.EtcdURL},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	resp, err := cli.Put(ctx, "/kube-cdc-testenv/compact", "")
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// RestrictedUser returns a client config and a kubeconfig path for a user that may do
// exactly what rules allow (plus what every authenticated user may: discovery, self
// reviews). The user is the ServiceAccount name in namespace "kube-cdc-testenv"
// (system:serviceaccount:kube-cdc-testenv:<name>), authenticated by a token from the
// TokenRequest API, bound to a ClusterRole "kube-cdc-testenv:<name>" with these rules. A
// ServiceAccount rather than a static token, so any number of users can be added without
// restarting the apiserver; tokens stay valid across RestartAPIServer. Calling it again
// with the same name replaces the rules.
func (k *Kube) RestrictedUser(ctx context.Context, name string, rules []rbacv1.PolicyRule) (*rest.Config, string, error) {
	cs := k.clientset
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restrictedNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: restrictedNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(restrictedNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	roleName := restrictedNamespace + ":" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := cs.RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		old.Rules = rules
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return nil, "", err
		}
	} else if err != nil {
		return nil, "", err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: restrictedNamespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	expiry := int64((24 * time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(restrictedNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("request a token for ServiceAccount %s: %w", name, err)
	}
	cfg := k.creds.restConfig(k.Config.Host, tr.Status.Token)
	user := "system:serviceaccount:" + restrictedNamespace + ":" + name
	if err := k.waitRulesEffective(ctx, cfg, user, rules); err != nil {
		return nil, "", err
	}
	path := filepath.Join(k.Dir, "restricted-"+name+".kubeconfig")
	if err := writeKubeconfig(path, name, cfg); err != nil {
		return nil, "", err
	}
	return cfg, path, nil
}

// waitRulesEffective waits until the new token authenticates and the RBAC authorizer (fed
// by informers) has seen the binding, so the caller's first request is judged by the rules.
func (k *Kube) waitRulesEffective(ctx context.Context, cfg *rest.Config, user string, rules []rbacv1.PolicyRule) error {
	asUser, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := k.checkRulesEffective(ctx, asUser, user, rules)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("RBAC for %s not effective: %w", user, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (k *Kube) checkRulesEffective(ctx context.Context, asUser kubernetes.Interface, user string, rules []rbacv1.PolicyRule) error {
	review, err := asUser.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	if got := review.Status.UserInfo.Username; got != user {
		return fmt.Errorf("token authenticates as %q, want %q", got, user)
	}
	for _, r := range rules {
		spec := authorizationv1.SubjectAccessReviewSpec{User: user}
		if len(r.Verbs) == 0 {
			continue
		}
		switch {
		case len(r.NonResourceURLs) > 0:
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
		case len(r.Resources) > 0 && len(r.APIGroups) > 0:
			attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
			if res, sub, ok := strings.Cut(attrs.Resource, "/"); ok {
				attrs.Resource, attrs.Subresource = res, sub
			}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			spec.ResourceAttributes = attrs
		default:
			continue
		}
		sar, err := k.clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not yet allowed: %+v", r)
		}
	}
	return nil
}

// CreateCRD creates crd and returns once it is Established and every served version is in
// discovery and answers a LIST, so a client that starts now can resolve and use it.
func (k *Kube) CreateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := k.apiext.ApiextensionsV1().CustomResourceDefinitions()
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pending := func() string {
		got, err := crds.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		established := false
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			return "not Established"
		}
		plural := got.Spec.Names.Plural
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := got.Spec.Group + "/" + v.Name
			list, err := k.clientset.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return fmt.Sprintf("discovery of %s: %v", gv, err)
			}
			found := false
			for _, r := range list.APIResources {
				found = found || r.Name == plural
			}
			if !found {
				return fmt.Sprintf("%s not yet in discovery of %s", plural, gv)
			}
			gvr := schema.GroupVersionResource{Group: got.Spec.Group, Version: v.Name, Resource: plural}
			if _, err := k.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return fmt.Sprintf("list %s: %v", gvr, err)
			}
		}
		return ""
	}
	for {
		last := pending()
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not served: %s: %w", created.Name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RequestCount sums the apiserver_request_total counters with this verb (as the apiserver
// spells it: LIST, WATCH, GET, CREATE, ...; compared case-insensitively) and resource
// (plural, e.g. "configmaps") since the apiserver (re)started. Take it before and after
// the code under test and compare, e.g. to prove that no LIST was issued. A request is
// counted when it ends: an open WATCH is not counted yet, and a streaming list
// (sendInitialEvents) counts as a WATCH, not a LIST. Counts restart from zero with the
// apiserver.
func (k *Kube) RequestCount(ctx context.Context, verb, resource string) (float64, error) {
	body, err := k.clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("get /metrics: %w", err)
	}
	return sumCounter(string(body), "apiserver_request_total", func(labels map[string]string) bool {
		return strings.EqualFold(labels["verb"], verb) && labels["resource"] == resource
	})
}

// sumCounter sums the samples of metric in a Prometheus text exposition whose labels
// match.
func sumCounter(text, metric string, match func(map[string]string) bool) (float64, error) {
	var sum float64
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, rest, err := parseLabels(rest)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("parse %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		if match(labels) {
			sum += v
		}
	}
	return sum, nil
}

// parseLabels reads `name="value",...}` and returns the labels and what follows the '}'.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return labels, rest, nil
		}
		name, rest, ok := strings.Cut(s, "=\"")
		if !ok {
			return nil, "", errors.New("malformed label")
		}
		var value strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(rest[i])
				}
				continue
			}
			value.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, "", errors.New("unterminated label value")
		}
		labels[name] = value.String()
		s = rest[i+1:]
	}
}
