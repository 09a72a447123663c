package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Fault isolation (design §1.8): a resource that fails — its CRD deleted or not created
// yet, its RBAC revoked — degrades that resource alone. The others stream on without a
// gap; the failed one is named in /readyz, the metrics, the log and `kube-cdc status`,
// is retried with a capped backoff, and resumes without a restart once it heals. Helpers
// here are prefixed "iso".

// isoGroup is a CRD group of the test's own (the namespace name is unique per run).
func isoGroup(ns string) string { return ns + ".iso.kube-cdc.io" }

// isoCRD is a namespaced CRD "gizmos" of group.
func isoCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
}

var isoCRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// isoDeleteCRD deletes the CRD and waits until it and its objects are gone.
func isoDeleteCRD(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := kube.Dynamic().Resource(isoCRDs).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		_, err := kube.Dynamic().Resource(isoCRDs).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("CRD %s still there: %v", name, err)
	})
}

// isoGizmo creates gizmo name in ns and returns its uid.
func isoGizmo(t *testing.T, group, ns, name string) string {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"n": name},
	}}
	got, err := kube.Dynamic().Resource(gvr).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(got.GetUID())
}

// isoConfigYAML streams the ConfigMaps of ns and one more resource into dsn, with
// /readyz on addr, through kubeconfig.
func isoConfigYAML(kubeconfig, dsn, ns, other, addr string) string {
	return twoResourcesConfigYAML(kubeconfig, dsn, ns, other, ns, addr)
}

// twoResourcesConfigYAML streams the ConfigMaps of ns and resource other of otherNS into
// dsn through kubeconfig, with the metrics on addr, logging at debug.
func twoResourcesConfigYAML(kubeconfig, dsn, ns, other, otherNS, addr string) string {
	return fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
  - name: %s
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: %q
log:
  level: debug
`, kubeconfig, ns, other, otherNS, dsn, addr)
}

// isoReadyz waits until /readyz answers code with a body matching want, and returns the
// body. It fails at once if kube-cdc exits.
func isoReadyz(t *testing.T, d *daemon, addr string, code int, want string) string {
	t.Helper()
	re := regexp.MustCompile(want)
	var body string
	eventually(t, 90*time.Second, func() error {
		isoRunning(t, d)
		got, b, err := opsGet("http://" + addr + "/readyz")
		body = b
		if err == nil && (got != code || !re.MatchString(b)) {
			err = fmt.Errorf("/readyz: %d %q, want %d matching %q", got, strings.TrimSpace(b), code, want)
		}
		return err
	})
	return body
}

// isoRunning fails the test if kube-cdc exited: a resource's failure must not end it.
func isoRunning(t *testing.T, d *daemon) {
	t.Helper()
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited (%v):\n%s", d.err, d.log())
	default:
	}
}

// isoLive waits until the live rows of resource in ns are exactly want (names).
func isoLive(t *testing.T, d *daemon, dsn, resource, ns string, want ...string) {
	t.Helper()
	eventually(t, 90*time.Second, func() error {
		isoRunning(t, d)
		rows, err := liveRows(dsn, resource)
		if err != nil {
			return err
		}
		var got []string
		for k := range rows {
			if name, ok := strings.CutPrefix(k, ns+"/"); ok {
				got = append(got, name)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("live %s: %v, want %v", resource, got, want)
		}
		for _, w := range want {
			if _, ok := rows[ns+"/"+w]; !ok {
				return fmt.Errorf("live %s: %v, want %v", resource, got, want)
			}
		}
		return nil
	})
}

// isoLogLines are the lines of d's log with message msg for resource.
func isoLogLines(d *daemon, msg, resource string) []string {
	var out []string
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, `msg="`+msg) && strings.Contains(line, "resource="+resource+" ") {
			out = append(out, line)
		}
	}
	return out
}

// isoWriteConfigMaps creates ConfigMaps named prefix-0 … prefix-(n-1), each once, and
// records them in h.
func isoWriteConfigMaps(t *testing.T, h *history, ns, prefix string, n int) {
	t.Helper()
	rec := h.configMaps(ns)
	for i := range n {
		if _, err := rec.create(context.Background(), prefix+"-"+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestACRDDeletedAndRecreatedWhileRunningDegradesOnlyItsResourceWhichThenStreamsItsNewObjects(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "crd")
	group := isoGroup(ns)
	gizmos := "gizmos." + group
	ctx := context.Background()
	if err := kube.CreateCRD(ctx, isoCRD(group)); err != nil {
		t.Fatal(err)
	}
	oldUID := isoGizmo(t, group, ns, "old")
	h := &history{kube: kube}
	isoWriteConfigMaps(t, h, ns, "before", 3)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	d := start(t, "run", "-c", writeConfig(t, isoConfigYAML(kube.Kubeconfig, dsn, ns, gizmos, addr)))
	isoLive(t, d, dsn, "configmaps", ns, "before-0", "before-1", "before-2")
	isoLive(t, d, dsn, "gizmos", ns, "old")
	isoReadyz(t, d, addr, 200, "ok")

	began := time.Now()
	isoDeleteCRD(t, gizmos)
	body := isoReadyz(t, d, addr, 503, regexp.QuoteMeta("resource "+gizmos+" (scope ")+`\w+\) degraded \(not served\)`)
	t.Logf("degraded %v after the delete began: %s", time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))
	if v, err := metric(addr, "kube_cdc_resource_degraded", map[string]string{"resource": gizmos, "reason": "not served"}); err != nil || v != 1 {
		t.Errorf("kube_cdc_resource_degraded{resource=%q,reason=\"not served\"} = %v, %v; want 1", gizmos, v, err)
	}
	if n := len(isoLogLines(d, "resource degraded", gizmos)); n != 1 {
		t.Errorf("%d warn lines saying %s is degraded, want 1", n, gizmos)
	}

	// ConfigMaps stream on, each change as it happens, while gizmos are not served.
	isoWriteConfigMaps(t, h, ns, "during", 10)
	isoLive(t, d, dsn, "configmaps", ns, "before-0", "before-1", "before-2",
		"during-0", "during-1", "during-2", "during-3", "during-4", "during-5", "during-6", "during-7", "during-8", "during-9")
	if code, b, err := opsGet("http://" + addr + "/readyz"); err != nil || code != 503 || !strings.Contains(b, gizmos) {
		t.Fatalf("/readyz after the ConfigMaps landed: %d %q %v; want gizmos still degraded (the CRD is not back)", code, b, err)
	}

	// The CRD comes back (the CRD watch nudges the retry): its new objects land, the old
	// one (deleted with the CRD) is tombstoned, and kube-cdc is ready again.
	if err := kube.CreateCRD(ctx, isoCRD(group)); err != nil {
		t.Fatal(err)
	}
	isoGizmo(t, group, ns, "new")
	isoLive(t, d, dsn, "gizmos", ns, "new")
	isoReadyz(t, d, addr, 200, "ok")
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE resource = 'gizmos' AND name = 'old' AND uid = $1 AND deleted_at IS NOT NULL`, oldUID); n != 1 {
		t.Errorf("the gizmo deleted with its CRD is not tombstoned")
	}
	if v, err := metric(addr, "kube_cdc_degraded_resources", nil); err != nil || v != 0 {
		t.Errorf("kube_cdc_degraded_resources = %v, %v after recovery, want 0", v, err)
	}
	if n := len(isoLogLines(d, "resource recovered", gizmos)); n != 1 {
		t.Errorf("%d info lines saying %s recovered, want 1", n, gizmos)
	}
	// No gap: every ConfigMap write is in changes at its RV (none was made across a
	// relist: ConfigMaps were never relisted after the first sync).
	checkDelivered(t, dsn, ns, h.all())
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestAResourceWhoseCRDIsAbsentAtStartWaitsForItWhileTheOthersSyncAndIsStreamedOnceItIsCreated(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "wait")
	group := isoGroup(ns)
	gizmos := "gizmos." + group
	h := &history{kube: kube}
	isoWriteConfigMaps(t, h, ns, "cm", 3)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, isoConfigYAML(kube.Kubeconfig, dsn, ns, gizmos, addr))

	// check keeps failing a name the apiserver does not serve.
	code, out := runCLI(t, "check", "-c", cfg)
	if code == 0 || !regexp.MustCompile(`resource `+regexp.QuoteMeta(gizmos)+`\s+FAIL\s+not served`).MatchString(out) {
		t.Errorf("check: exit %d, want a FAIL row naming %s not served:\n%s", code, gizmos, out)
	}

	d := start(t, "run", "-c", cfg)
	isoLive(t, d, dsn, "configmaps", ns, "cm-0", "cm-1", "cm-2")
	isoReadyz(t, d, addr, 503, regexp.QuoteMeta("resource "+gizmos+" (scope ")+`\w+\) degraded \(not served\)`)
	// It is tried again (a debug line each time) but said once.
	eventually(t, 30*time.Second, func() error {
		if n := len(isoLogLines(d, "resource still degraded", gizmos)); n < 2 {
			return fmt.Errorf("%d retries logged", n)
		}
		return nil
	})
	if n := len(isoLogLines(d, "resource degraded", gizmos)); n != 1 {
		t.Errorf("%d warn lines saying %s is degraded, want 1 however often it is retried", n, gizmos)
	}
	code, out = runCLI(t, "status", "-c", cfg)
	if code != 0 || !regexp.MustCompile(`DEGRADED: resource `+regexp.QuoteMeta(gizmos)+` \(scope namespace=`+regexp.QuoteMeta(ns)+`\): not served for \d+s: .*does not serve it`).MatchString(out) {
		t.Errorf("status: exit %d, want a DEGRADED line naming %s, not served:\n%s", code, gizmos, out)
	}

	isoWriteConfigMaps(t, h, ns, "more", 2)
	if err := kube.CreateCRD(context.Background(), isoCRD(group)); err != nil {
		t.Fatal(err)
	}
	isoGizmo(t, group, ns, "first")
	isoLive(t, d, dsn, "gizmos", ns, "first")
	isoLive(t, d, dsn, "configmaps", ns, "cm-0", "cm-1", "cm-2", "more-0", "more-1")
	isoReadyz(t, d, addr, 200, "ok")
	code, out = runCLI(t, "status", "-c", cfg)
	if code != 0 || strings.Contains(out, "DEGRADED") || !strings.Contains(out, "resources: none degraded") {
		t.Errorf("status after the CRD was created: exit %d:\n%s", code, out)
	}
	checkDelivered(t, dsn, ns, h.all(), d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// isoAllowed waits until user may (or may not) watch resource in ns.
func isoAllowed(t *testing.T, user, ns, resource string, allowed bool) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		r, err := kubeFor(t).Clientset().AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:kube-cdc-testenv:" + user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Resource: resource},
		}}, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed != allowed {
			err = fmt.Errorf("watch %s allowed: %v, want %v", resource, r.Status.Allowed, allowed)
		}
		return err
	})
}

func TestARevokedResourceIsDegradedAloneAndRecoversWhenItsRBACIsGrantedAgain(t *testing.T) {
	t.Parallel() // a control plane of its own: it restarts the apiserver
	kube := privatePlane(t)
	ctx := context.Background()
	ns := namespace(t, "rbac")
	user := "e2e-iso-" + ns[len(ns)-4:]
	rule := func(resource string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"list", "watch"}}
	}
	both := []rbacv1.PolicyRule{rule("configmaps"), rule("podtemplates")}
	_, kc, err := kube.RestrictedUser(ctx, user, both)
	if err != nil {
		t.Fatal(err)
	}
	templates := kube.Clientset().CoreV1().PodTemplates(ns)
	template := func(name string) {
		t.Helper()
		pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}
		if _, err := templates.Create(ctx, pt, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	template("pt-0")
	h := &history{kube: kube}
	isoWriteConfigMaps(t, h, ns, "before", 2)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	d := start(t, "run", "-c", writeConfig(t, isoConfigYAML(kc, dsn, ns, "podtemplates", addr)))
	isoLive(t, d, dsn, "configmaps", ns, "before-0", "before-1")
	isoLive(t, d, dsn, "podtemplates", ns, "pt-0")
	isoReadyz(t, d, addr, 200, "ok")

	// Revoke podtemplates. The apiserver asks RBAC when a watch opens, not while it runs:
	// a restart ends the open watches (in production the revocation shows when the watch
	// is re-opened, within its 5–10 minute timeout).
	if _, _, err := kube.RestrictedUser(ctx, user, both[:1]); err != nil {
		t.Fatal(err)
	}
	isoAllowed(t, user, ns, "podtemplates", false)
	if err := kube.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	isoReadyz(t, d, addr, 503, `resource podtemplates \(scope \w+\) degraded \(forbidden\): .*forbidden`)
	if v, err := metric(addr, "kube_cdc_resource_degraded", map[string]string{"resource": "podtemplates", "reason": "forbidden"}); err != nil || v != 1 {
		t.Errorf(`kube_cdc_resource_degraded{resource="podtemplates",reason="forbidden"} = %v, %v; want 1`, v, err)
	}

	// ConfigMaps stream on while podtemplates may not be read.
	isoWriteConfigMaps(t, h, ns, "during", 5)
	template("pt-1")
	isoLive(t, d, dsn, "configmaps", ns, "before-0", "before-1", "during-0", "during-1", "during-2", "during-3", "during-4")
	// (Right after the restart the apiserver's authorizer may refuse configmaps too, for a
	// moment: degraded and recovered in a second, as any resource would be.)
	if code, b, err := opsGet("http://" + addr + "/readyz"); err != nil || code != 503 || !strings.Contains(b, "podtemplates") || strings.Contains(b, "configmaps") {
		t.Fatalf("/readyz after the ConfigMaps landed: %d %q %v; want podtemplates still degraded, and configmaps not", code, b, err)
	}
	if rows, err := liveRows(dsn, "podtemplates"); err != nil || len(rows) != 1 {
		t.Fatalf("podtemplates rows while revoked: %v, %v; want pt-0 only", rows, err)
	}

	// Granted again: it resumes (a relist: the restart expired its history) and pt-1 lands.
	if _, _, err := kube.RestrictedUser(ctx, user, both); err != nil {
		t.Fatal(err)
	}
	isoLive(t, d, dsn, "podtemplates", ns, "pt-0", "pt-1")
	isoReadyz(t, d, addr, 200, "ok")
	if n := len(isoLogLines(d, "resource recovered", "podtemplates")); n != 1 {
		t.Errorf("%d info lines saying podtemplates recovered, want 1", n)
	}
	checkDelivered(t, dsn, ns, h.all(), d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
