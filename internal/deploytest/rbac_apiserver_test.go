package deploytest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The chart against a real apiserver (one for both subtests: starting one costs more
// than the checks).
func TestChartOnAnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	k := testenv.NewKube(t, testenv.KubeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{release, "team-a", "team-b"} {
		if _, err := k.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("RBAC lets kube-cdc list and watch exactly what is configured", func(t *testing.T) {
		chartRBACOnAnAPIServer(ctx, t, k)
	})
	t.Run("an upgrade keeps the digest key the install made", func(t *testing.T) {
		chartDigestKeyOnAnAPIServer(ctx, t, k)
	})
}

// release is the namespace the tests install the chart into.
const release = "observability"

// The chart's RBAC objects, applied to a real apiserver, let kube-cdc's ServiceAccount
// list and watch exactly what the values configure: asked as that ServiceAccount (its own
// token, real LIST and WATCH requests, as kube-cdc makes them), Secrets configured for
// team-a are readable in team-a only, and a bare "deployments" is readable in apps.
func chartRBACOnAnAPIServer(ctx context.Context, t *testing.T, k *testenv.Kube) {
	r, err := renderValues(t, resources(
		"namespaces",
		"deployments",
		inNamespaces("secrets", "team-a"),
		inNamespaces("cm", "team-a", "team-b"),
	))
	if err != nil {
		t.Fatal(err)
	}
	applyRBAC(ctx, t, k.Dynamic(), r, release)

	tr, err := k.Clientset().CoreV1().ServiceAccounts(release).CreateToken(ctx, "cdc-kube-cdc",
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(k.Config)
	cfg.BearerToken = tr.Status.Token
	asKubeCDC, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	core := func(res string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: res}
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	type access struct {
		gvr       schema.GroupVersionResource
		namespace string // "" for all namespaces
	}
	allowed := []access{
		{core("namespaces"), ""},
		{deployments, ""},
		{deployments, "team-b"},
		{core("secrets"), "team-a"},
		{core("configmaps"), "team-a"},
		{core("configmaps"), "team-b"},
	}
	denied := []access{
		{core("secrets"), ""},       // the old chart's ClusterRole granted this
		{core("secrets"), "team-b"}, // and this
		{core("secrets"), release},
		{core("configmaps"), ""},
		{core("configmaps"), release},
		{core("deployments"), ""}, // what the old chart granted for "deployments" (not served)
		{core("pods"), ""},        // not configured
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "team-a"},
	}
	try := func(a access) error {
		ri := asKubeCDC.Resource(a.gvr).Namespace(a.namespace)
		if _, err := ri.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		w.Stop()
		return nil
	}
	name := func(a access) string {
		where := "all namespaces"
		if a.namespace != "" {
			where = "namespace " + a.namespace
		}
		return a.gvr.GroupResource().String() + " in " + where
	}

	// The RBAC authorizer learns of new bindings from informers: wait until they count.
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range allowed {
		var err error
		for ; ; time.Sleep(100 * time.Millisecond) {
			if err = try(a); err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("%s: %v", name(a), err)
		}
	}
	for _, a := range denied {
		if err := try(a); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", name(a), err)
		}
	}
	// kube-cdc never reads one object by name, so it may not.
	if _, err := asKubeCDC.Resource(core("secrets")).Namespace("team-a").Get(ctx, "any", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get secrets in team-a: %v, want Forbidden", err)
	}

	// The resnapshot signals ConfigMap: kube-cdc reads it as internal/signal does (a LIST
	// and a WATCH selecting its name, then GET and UPDATE), and no other ConfigMap.
	const signals = "cdc-kube-cdc-signals"
	if _, err := k.Clientset().CoreV1().ConfigMaps(release).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: signals}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Clientset().CoreV1().ConfigMaps(release).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := asKubeCDC.Resource(core("configmaps")).Namespace(release)
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + signals}
	if _, err := cms.List(ctx, byName); err != nil {
		t.Errorf("list the signals ConfigMap by name: %v", err)
	}
	if w, err := cms.Watch(ctx, byName); err != nil {
		t.Errorf("watch the signals ConfigMap by name: %v", err)
	} else {
		w.Stop()
	}
	if u, err := cms.Get(ctx, signals, metav1.GetOptions{}); err != nil {
		t.Errorf("get the signals ConfigMap: %v", err)
	} else if _, err := cms.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update the signals ConfigMap: %v", err)
	}
	if _, err := cms.Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another ConfigMap of %s: %v, want Forbidden", release, err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"}); !apierrors.IsForbidden(err) {
		t.Errorf("list another ConfigMap of %s by name: %v, want Forbidden", release, err)
	}
}

// applyRBAC creates the rendered ServiceAccount and every RBAC object, as `helm install`
// into namespace release would.
func applyRBAC(ctx context.Context, t *testing.T, dyn dynamic.Interface, r rendered, release string) {
	t.Helper()
	rbac := func(res string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: res}
	}
	gvrs := map[string]schema.GroupVersionResource{
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"ClusterRole":        rbac("clusterroles"),
		"ClusterRoleBinding": rbac("clusterrolebindings"),
		"Role":               rbac("roles"),
		"RoleBinding":        rbac("rolebindings"),
	}
	var applied []string
	for _, key := range keys(r.objects) {
		u := r.objects[key]
		gvr, ok := gvrs[u.GetKind()]
		if !ok {
			continue
		}
		ri := dyn.Resource(gvr)
		var err error
		if kind := u.GetKind(); kind == "ClusterRole" || kind == "ClusterRoleBinding" {
			_, err = ri.Create(ctx, u, metav1.CreateOptions{})
		} else {
			ns := u.GetNamespace()
			if ns == "" {
				ns = release
			}
			_, err = ri.Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s: %v", key, err)
		}
		applied = append(applied, key)
	}
	sort.Strings(applied)
	t.Logf("applied %v", applied)
}

// The digest key the chart makes at install is the key of every later upgrade: the
// upgrade's render reads the Secret back through lookup, as helm does, and keeps its
// value (a new key would change every Secret's digest at its next change). A render
// without a cluster makes another key, so it is lookup that keeps it, not chance.
func chartDigestKeyOnAnAPIServer(ctx context.Context, t *testing.T, k *testenv.Kube) {
	const name = "cdc-kube-cdc-digest-key"
	vals := valuesOf(t, secretsInTeamA)
	keyOf := func(r rendered) string {
		t.Helper()
		return string(into[corev1.Secret](t, r, "Secret", name).Data["digest-key"])
	}
	install, err := renderOn(t, vals, k.Config, false)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(install)
	secrets := k.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(release)
	if _, err := secrets.Create(ctx, install.objects["Secret/"+name], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		upgrade, err := renderOn(t, vals, k.Config, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := keyOf(upgrade); got != key {
			t.Fatalf("upgrade %d rendered key %q, want the installed %q", i+1, got, key)
		}
		if ref := secretRefOf(t, upgrade); ref.Name != name {
			t.Errorf("upgrade %d: the pod reads the key from %s", i+1, ref.Name)
		}
	}

	offline, err := renderOn(t, vals, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if keyOf(offline) == key {
		t.Error("a render that could not look the Secret up made the same key")
	}
}
