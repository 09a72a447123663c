package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A receiver of the webhook backend, as kube-cdc's is: it trusts only the client
// certificate AuditTLS made for the apiserver.
type auditSink struct {
	mu     sync.Mutex
	events []map[string]any
}

func (s *auditSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var list struct {
		Items []map[string]any `json:"items"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &list); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, list.Items...)
	s.mu.Unlock()
}

func (s *auditSink) find(pred func(map[string]any) bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if pred(e) {
			return e
		}
	}
	return nil
}

func TestKubeSendsAuditEventsOfTokenUsersToTheWebhookWithItsClientCertificate(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	tlsFiles, err := NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(tlsFiles.CertPEM, tlsFiles.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(tlsFiles.CAPEM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &auditSink{}
	srv := &http.Server{Handler: sink, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	k := NewKube(t, KubeOptions{Audit: &AuditOptions{
		Policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n" +
			"- level: RequestResponse\n  resources: [{group: \"\", resources: [configmaps]}]\n  verbs: [create, update, patch, delete]\n" +
			"- level: None\n",
		Webhook: &AuditWebhook{
			URL:   fmt.Sprintf("https://%s/audit", ln.Addr()),
			CAPEM: tlsFiles.CAPEM, ClientCertPEM: tlsFiles.ClientCertPEM, ClientKeyPEM: tlsFiles.ClientKeyPEM,
		},
	}})
	cfg, err := k.TokenUser(ctx, TokenUsers[1])
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "audited", "v"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		e := sink.find(func(e map[string]any) bool {
			ref, _ := e["objectRef"].(map[string]any)
			return e["verb"] == "create" && ref["name"] == "audited" && e["stage"] == "ResponseComplete"
		})
		if e != nil {
			user, _ := e["user"].(map[string]any)
			resp, _ := e["responseObject"].(map[string]any)
			meta, _ := resp["metadata"].(map[string]any)
			if user["username"] != TokenUsers[1] || meta["resourceVersion"] != cm.ResourceVersion {
				t.Fatalf("the event says user %v, response RV %v; want %s and %s", user["username"], meta["resourceVersion"], TokenUsers[1], cm.ResourceVersion)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no audit event of the create arrived: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
