package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

const auditExamples = "../../deploy/audit"

// deploy/audit, for clusters without the chart, works as its README says: the README's
// openssl commands make a certificate that a Go client accepts for the kubeconfig's
// server (by its SAN), and a client webhook.kubeconfig with only its server and directory changed, delivers a batch
// that kube-cdc's receiver, configured as the README says, stores. The kubeconfig is
// loaded as the apiserver's webhook backend loads it (client-go's clientcmd, explicit
// path), without the backend itself, whose dependencies (OpenTelemetry, konnectivity)
// kube-cdc has no other use for.
func TestTheAuditExamplesCertificateAndWebhookKubeconfigDeliverTheApiserversBatches(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is not installed: the README's commands need it (apt-get install openssl)")
	}
	readme := readExample(t, "README.md")
	script := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readme)
	if script == nil || !strings.Contains(script[1], "ADDR=10.96.0.50") {
		t.Fatal("README.md has no sh block setting ADDR=10.96.0.50")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-e", "-c", strings.Replace(script[1], "ADDR=10.96.0.50", "ADDR=127.0.0.1", 1))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, out)
	}

	// kube-cdc, configured as the README's YAML says (the files from dir).
	yaml := regexp.MustCompile("(?s)```yaml\n(audit:.*?)```").FindStringSubmatch(readme)
	if yaml == nil {
		t.Fatal("README.md has no yaml block starting with audit:")
	}
	cfgFile := filepath.Join(dir, "kube-cdc.yaml")
	if err := os.WriteFile(cfgFile, []byte(strings.ReplaceAll(yaml[1], "/etc/kube-cdc/audit/", dir+"/")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: cfgFile, Environ: []string{}})
	if err != nil {
		t.Fatalf("the README's kube-cdc config: %v", err)
	}
	w := cfg.Audit.Webhook
	token, err := audit.TokenFromFile(w.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	stored := make(chan []audit.Event, 1)
	rcv := &audit.Receiver{Addr: "127.0.0.1:0", CertFile: w.TLSCertFile, KeyFile: w.TLSKeyFile, Token: token,
		MaxBodyBytes: w.MaxBodyBytes, MaxInFlight: w.MaxInFlight,
		Store: storeFunc(func(_ context.Context, e []audit.Event) error { stored <- e; return nil })}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := rcv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rcv.Serve(ctx, ln) }()

	// The apiserver's side: webhook.kubeconfig with the receiver's address and dir for
	// /etc/kubernetes/kube-cdc-audit.
	kc := readExample(t, "webhook.kubeconfig")
	for _, s := range []string{"https://10.96.0.50:8443/audit", "/etc/kubernetes/kube-cdc-audit/ca.crt", "/etc/kubernetes/kube-cdc-audit/token"} {
		if !strings.Contains(kc, s) {
			t.Fatalf("webhook.kubeconfig lacks %s", s)
		}
	}
	kc = strings.ReplaceAll(kc, "https://10.96.0.50:8443/audit", "https://"+ln.Addr().String()+"/audit")
	kc = strings.ReplaceAll(kc, "/etc/kubernetes/kube-cdc-audit/", dir+"/")
	kcFile := filepath.Join(dir, "webhook.kubeconfig")
	if err := os.WriteFile(kcFile, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	// As k8s.io/apiserver pkg/util/webhook.LoadKubeconfig reads it.
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kcFile}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatalf("webhook.kubeconfig: %v", err)
	}
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	body, err := json.Marshal(auditv1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "audit.k8s.io/v1"},
		Items: []auditv1.Event{{Level: auditv1.LevelMetadata, AuditID: "example-1", Stage: auditv1.StageResponseComplete,
			RequestURI: "/api/v1/namespaces/a/configmaps", Verb: "create", User: authnv1.UserInfo{Username: "dev-a@example.com"},
			ObjectRef:      &auditv1.ObjectReference{Resource: "configmaps", Namespace: "a", Name: "c"},
			ResponseStatus: &metav1.Status{Code: 201}, RequestReceivedTimestamp: now, StageTimestamp: now}}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.Host, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST with webhook.kubeconfig: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the receiver answered %s to webhook.kubeconfig's client", resp.Status)
	}
	select {
	case e := <-stored:
		if len(e) != 1 || e[0].AuditID != "example-1" || e[0].Username != "dev-a@example.com" {
			t.Errorf("stored %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("nothing stored")
	}
}

// policy.yaml, given to a kube-apiserver (with its log backend): the writes of the
// resources kube-cdc streams, and of the CRD group example.com stands for, are recorded at
// RequestResponse with their response object (what the exact join needs); a read, and a
// write of a resource not listed, are not recorded at all.
func TestTheAuditExamplePolicyRecordsTheStreamedResourcesWritesWithTheirObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "audit.log")
	k := testenv.NewKube(t, testenv.KubeOptions{Audit: &testenv.AuditOptions{Policy: readExample(t, "policy.yaml"), LogPath: logPath}})
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}}
	if err := k.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	cs := k.Clientset()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	meta := metav1.ObjectMeta{Name: "example", Namespace: "default"}
	must(cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{}))
	must(cs.CoreV1().ConfigMaps("default").Get(ctx, "example", metav1.GetOptions{}))
	must(cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}, metav1.CreateOptions{}))
	must(cs.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: meta}, metav1.CreateOptions{}))
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "example", "namespace": "default"}}}
	must(k.Dynamic().Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).
		Namespace("default").Create(ctx, widget, metav1.CreateOptions{}))

	// The log backend writes each event before its response (blocking mode): once the
	// last ConfigMap's event is in the file, every earlier one that will be is.
	must(cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "last"}}, metav1.CreateOptions{}))
	type key struct{ verb, group, resource string }
	var events map[key]auditv1.Event
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	for last := false; !last; {
		events = map[key]auditv1.Event{}
		b, err := os.ReadFile(logPath)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e auditv1.Event
			if line == "" || json.Unmarshal([]byte(line), &e) != nil || e.ObjectRef == nil {
				continue
			}
			last = last || e.ObjectRef.Name == "last"
			if e.ObjectRef.Name == "example" {
				events[key{e.Verb, e.ObjectRef.APIGroup, e.ObjectRef.Resource}] = e
			}
		}
		if last {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("the last ConfigMap's create was never logged; logged %v", events)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, want := range []key{{"create", "", "configmaps"}, {"create", "apps", "deployments"}, {"create", "example.com", "widgets"}} {
		e, ok := events[want]
		switch {
		case !ok:
			t.Errorf("%+v: no event", want)
		case e.Level != auditv1.LevelRequestResponse || e.ResponseObject == nil || !strings.Contains(string(e.ResponseObject.Raw), `"resourceVersion"`):
			t.Errorf("%+v: level %s, response object %d bytes; want RequestResponse with the object", want, e.Level, len(e.ResponseObject.Raw))
		}
	}
	for _, unwanted := range []key{{"get", "", "configmaps"}, {"create", "rbac.authorization.k8s.io", "roles"}} {
		if _, ok := events[unwanted]; ok {
			t.Errorf("%+v was logged, want no event", unwanted)
		}
	}
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(auditExamples, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The chart owns the receiver's address and files but leaves its limits to config: set
// under config.audit.webhook, they reach the rendered config beside the chart's keys.
func TestChartPassesTheAuditReceiversLimitsFromConfig(t *testing.T) {
	r, err := renderValues(t, map[string]any{
		"audit": map[string]any{"enabled": true},
		"config": map[string]any{
			"sinks": []any{map[string]any{"name": "warehouse", "type": "postgres", "postgres": map[string]any{"dsn": "postgres://x@db/cmdb"}}},
			"audit": map[string]any{"webhook": map[string]any{"maxBodyBytes": 10485760, "maxInFlight": 8}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := loadRenderedConfig(t, r, []string{}).Audit.Webhook
	if w.MaxBodyBytes != 10<<20 || w.MaxInFlight != 8 || w.Listen != ":8443" || w.TokenFile != "/etc/kube-cdc/audit/token" {
		t.Errorf("rendered audit.webhook %+v, want maxBodyBytes 10485760, maxInFlight 8 beside the chart's listen and files", w)
	}
}
