package deploytest

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-cdc/kube-cdc/internal/audit"
)

type storeFunc func(context.Context, []audit.Event) error

func (f storeFunc) Store(ctx context.Context, e []audit.Event) error { return f(ctx, e) }

// The chart's audit receiver: its Service, its Secret (certificate, CA, token) and the
// kubeconfig for the apiserver fit together: a client made from that kubeconfig, dialling
// a receiver started with the Secret's files under the Service's name, is accepted.
func TestChartAuditReceiverHasAServiceACertificateAndAWebhookKubeconfigThatWork(t *testing.T) {
	vals := map[string]any{
		"audit":  map[string]any{"enabled": true},
		"config": map[string]any{"sinks": []any{map[string]any{"name": "warehouse", "type": "postgres", "postgres": map[string]any{"dsn": "postgres://x@db/cmdb"}}}},
	}
	r, err := renderValues(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	svc := into[corev1.Service](t, r, "Service", "cdc-kube-cdc-audit")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "audit" {
		t.Errorf("audit Service ports %+v", svc.Spec.Ports)
	}
	d := into[appsv1.Deployment](t, r, "Deployment", "cdc-kube-cdc")
	c := d.Spec.Template.Spec.Containers[0]
	var port, mount bool
	for _, p := range c.Ports {
		port = port || (p.Name == "audit" && p.ContainerPort == 8443)
	}
	for _, m := range c.VolumeMounts {
		mount = mount || (m.Name == "audit" && m.MountPath == "/etc/kube-cdc/audit")
	}
	if !port || !mount {
		t.Errorf("the container lacks the audit port (%v) or the Secret's mount (%v): %+v %+v", port, mount, c.Ports, c.VolumeMounts)
	}
	cfg := loadRenderedConfig(t, r, []string{})
	if w := cfg.Audit.Webhook; w.Listen != ":8443" || w.TLSCertFile != "/etc/kube-cdc/audit/tls.crt" || w.TokenFile != "/etc/kube-cdc/audit/token" {
		t.Errorf("config audit.webhook %+v", w)
	}
	if _, err := cfg.AuditSink(); err != nil {
		t.Error(err)
	}

	sec := into[corev1.Secret](t, r, "Secret", "cdc-kube-cdc-audit")
	dir := t.TempDir()
	for _, k := range []string{"tls.crt", "tls.key", "token"} {
		if err := os.WriteFile(filepath.Join(dir, k), sec.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	token, err := audit.TokenFromFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	stored := make(chan int, 1)
	rcv := &audit.Receiver{Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), Token: token,
		Store: storeFunc(func(_ context.Context, e []audit.Event) error { stored <- len(e); return nil })}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := rcv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rcv.Serve(ctx, ln) }()

	kc, err := clientcmd.Load(sec.Data["webhook.kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	const server = "https://cdc-kube-cdc-audit.observability.svc:8443/audit"
	if rc.Host != server {
		t.Errorf("the kubeconfig's server is %q, want %q", rc.Host, server)
	}
	// Dial the local receiver, checking its certificate under the Service's name.
	rc.TLSClientConfig.ServerName = "cdc-kube-cdc-audit.observability.svc"
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Metadata","auditID":"a","stage":"ResponseComplete",` +
		`"verb":"create","requestURI":"/api/v1/namespaces/a/configmaps","user":{"username":"u"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},` +
		`"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-01-01T00:00:00.000000Z","stageTimestamp":"2026-01-01T00:00:00.000001Z"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ln.Addr().String()+"/audit", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the receiver answered %d to the kubeconfig's client", resp.StatusCode)
	}
	if n := <-stored; n != 1 {
		t.Errorf("%d events stored", n)
	}
	// A client without the token is refused: the certificate alone authenticates nobody.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := anon.Post("https://"+ln.Addr().String()+"/audit", "application/json", strings.NewReader(body)); err != nil || resp.StatusCode != 401 {
		t.Errorf("a client without the token: %v %v", resp, err)
	}

	// Without a postgres sink the receiver could store nothing: the render fails.
	if _, err := renderValues(t, map[string]any{"audit": map[string]any{"enabled": true}}); err == nil || !strings.Contains(err.Error(), "postgres sink") {
		t.Errorf("audit without a postgres sink rendered: %v", err)
	}
	// Off by default.
	if def := render(t, ""); def.has("Service", "cdc-kube-cdc-audit") || def.has("Secret", "cdc-kube-cdc-audit") {
		t.Error("the audit receiver is rendered by default")
	}
}

// With audit.enabled, NOTES.txt tells what to pass the apiserver and where its kubeconfig
// is; without, it says nothing of audit.
func TestChartNotesTellWhatToPassTheApiserverWhenTheAuditReceiverIsOn(t *testing.T) {
	sinks := []any{map[string]any{"name": "warehouse", "type": "postgres", "postgres": map[string]any{"dsn": "postgres://x@db/cmdb"}}}
	r, err := renderValues(t, map[string]any{"audit": map[string]any{"enabled": true}, "config": map[string]any{"sinks": sinks}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Service\nobservability/cdc-kube-cdc-audit (port 8443)",
		"--audit-policy-file=", "--audit-webhook-config-file=", "--audit-webhook-mode=batch",
		"--audit-webhook-batch-max-wait=", "--audit-webhook-initial-backoff=",
		"server https://cdc-kube-cdc-audit.observability.svc:8443/audit",
		`kubectl -n observability get secret cdc-kube-cdc-audit -o jsonpath='{.data.webhook\.kubeconfig}' | base64 -d`,
		"/kube-cdc check -c /etc/kube-cdc/config.yaml",
	} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, r.notes)
		}
	}
	// The Secret's key named in NOTES is the one the chart renders.
	if sec := into[corev1.Secret](t, r, "Secret", "cdc-kube-cdc-audit"); len(sec.Data["webhook.kubeconfig"]) == 0 {
		t.Error("the audit Secret has no webhook.kubeconfig")
	}
	// An existing Secret of the user's: its name, and the URL given.
	r, err = renderValues(t, map[string]any{"audit": map[string]any{"enabled": true, "existingSecret": "mine", "url": "https://10.0.0.9:30443/audit"},
		"config": map[string]any{"sinks": sinks}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server https://10.0.0.9:30443/audit", "Secret observability/mine"} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES with existingSecret lack %q:\n%s", want, r.notes)
		}
	}
	if def := render(t, ""); strings.Contains(def.notes, "audit") {
		t.Errorf("NOTES mention audit with audit.enabled off:\n%s", def.notes)
	}
}
