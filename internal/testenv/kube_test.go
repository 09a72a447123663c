package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// sharedKubeOptions: podtemplates bypass the watch cache, so the tests can show etcd
// compaction with and without a watch cache in front of it. Nothing else uses podtemplates.
var sharedKubeOptions = KubeOptions{WatchCacheSizes: []string{"podtemplates#0"}}

var shared struct {
	once sync.Once
	kube *Kube
	err  error
}

// sharedKube is one Kube for all tests in this file, started on first use and stopped
// after all tests (see main_test.go). Tests that restart it leave it running and ready.
func sharedKube(t *testing.T) *Kube {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		shared.kube, shared.err = StartKube(ctx, sharedKubeOptions)
		if shared.err == nil {
			t.Logf("etcd + kube-apiserver ready in %s", time.Since(start).Round(time.Millisecond))
			afterAllTests(shared.kube.Stop)
		}
	})
	if shared.err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", shared.err)
	}
	k := shared.kube
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\n%s", Tail(k.LogPath(), 40), Tail(k.EtcdLogPath(), 20))
		}
	})
	return k
}

// testNamespace creates a namespace for one test. It is not deleted: without a namespace
// controller it would stay Terminating anyway, and the Kube goes away after the tests.
func testNamespace(t *testing.T, ctx context.Context, k *Kube) string {
	t.Helper()
	ns, err := k.Clientset().CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kt-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func rvOf(t *testing.T, obj runtime.Object) uint64 {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("metadata of %T: %v", obj, err)
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %T is not an integer: %v", m.GetResourceVersion(), obj, err)
	}
	return rv
}

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string]string{"v": value},
	}
}

// firstEvent opens a watch and returns its first event, or the error the server answered
// with, whether as the HTTP status or as an ERROR event.
func firstEvent(ctx context.Context, open func(context.Context) (watch.Interface, error)) (watch.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	w, err := open(ctx)
	if err != nil {
		return watch.Event{}, err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return watch.Event{}, fmt.Errorf("watch closed without an event")
		}
		if ev.Type == watch.Error {
			return ev, apierrors.FromObject(ev.Object)
		}
		return ev, nil
	case <-ctx.Done():
		return watch.Event{}, fmt.Errorf("no event: %w", ctx.Err())
	}
}

func isTooOld(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

func TestKubeWatchDeliversChangesInOrderAndBookmarks(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, time.Minute)
	ns := testNamespace(t, ctx, k)
	cms := k.Clientset().CoreV1().ConfigMaps(ns)

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver sends a bookmark 2 s before a watch's timeout (and otherwise about once
	// a minute), so a short timeout brings one quickly.
	timeout := int64(5)
	w, err := cms.Watch(ctx, metav1.ListOptions{
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := cms.Create(ctx, configMap(ns, "a", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Data["v"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []string
	var lastRV uint64
	bookmarks := 0
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
		}
		rv := rvOf(t, ev.Object)
		if rv < lastRV {
			t.Errorf("%s at RV %d after RV %d", ev.Type, rv, lastRV)
		}
		lastRV = rv
		if ev.Type == watch.Bookmark {
			bookmarks++
			if _, ok := ev.Object.(*corev1.ConfigMap); !ok {
				t.Errorf("bookmark carries a %T, want an empty *ConfigMap", ev.Object)
			}
		} else {
			cm := ev.Object.(*corev1.ConfigMap)
			got = append(got, fmt.Sprintf("%s %s v=%s", ev.Type, cm.Name, cm.Data["v"]))
		}
		if bookmarks > 0 && len(got) >= 3 {
			break
		}
	}
	want := []string{"ADDED a v=1", "MODIFIED a v=2", "DELETED a v=2"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("events = %q, want %q", got, want)
	}
	if bookmarks == 0 {
		t.Errorf("no BOOKMARK before the watch timed out")
	}
	if rvOf(t, created) >= rvOf(t, updated) {
		t.Errorf("create RV %s not below update RV %s", created.ResourceVersion, updated.ResourceVersion)
	}
}

func TestKubeCompactionAloneIsHiddenByTheWatchCacheButExpireHistoryIsNot(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, 2*time.Minute)
	ns := testNamespace(t, ctx, k)
	cms := k.Clientset().CoreV1().ConfigMaps(ns)
	pts := k.Clientset().CoreV1().PodTemplates(ns) // not cached: sharedKubeOptions

	cm, err := cms.Create(ctx, configMap(ns, "a", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmCreatedRV := cm.ResourceVersion
	cm.Data["v"] = "2"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pt := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		}},
	}
	if pt, err = pts.Create(ctx, pt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ptCreatedRV := pt.ResourceVersion
	pt.Labels = map[string]string{"v": "2"}
	if pt, err = pts.Update(ctx, pt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	watchCMs := func(rv string) func(context.Context) (watch.Interface, error) {
		return func(ctx context.Context) (watch.Interface, error) {
			return cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		}
	}
	watchPTs := func(rv string) func(context.Context) (watch.Interface, error) {
		return func(ctx context.Context) (watch.Interface, error) {
			return pts.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		}
	}

	rev, err := k.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d; configmap RVs %s..%s, podtemplate RVs %s..%s",
		rev, cmCreatedRV, cm.ResourceVersion, ptCreatedRV, pt.ResourceVersion)

	// The watch cache still has the configmap's update, compaction or not.
	ev, err := firstEvent(ctx, watchCMs(cmCreatedRV))
	if err != nil {
		t.Fatalf("configmaps (watch cache): watch from RV %s after compaction alone: %v", cmCreatedRV, err)
	}
	if got := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("configmaps (watch cache): first event after compaction alone = %s RV %s, want MODIFIED RV %s", ev.Type, got.ResourceVersion, cm.ResourceVersion)
	}
	// Without a watch cache, etcd's compaction shows at once.
	if _, err := firstEvent(ctx, watchPTs(ptCreatedRV)); !isTooOld(err) {
		t.Errorf("podtemplates (no watch cache): watch from RV %s after compaction = %v, want 410 Gone", ptCreatedRV, err)
	}

	start := time.Now()
	if err := k.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("ExpireHistory took %s", time.Since(start).Round(time.Millisecond))

	for _, rv := range []string{cmCreatedRV, cm.ResourceVersion} {
		if _, err := firstEvent(ctx, watchCMs(rv)); !isTooOld(err) {
			t.Errorf("configmaps: watch from RV %s after ExpireHistory = %v, want 410 Gone", rv, err)
		} else {
			t.Logf("configmaps: watch from RV %s: %v", rv, err)
		}
	}
	if _, err := firstEvent(ctx, watchPTs(pt.ResourceVersion)); !isTooOld(err) {
		t.Errorf("podtemplates: watch from RV %s after ExpireHistory = %v, want 410 Gone", pt.ResourceVersion, err)
	}

	// A fresh LIST works, and so does a watch from its RV.
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("LIST after ExpireHistory: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Items[0].Data["v"] != "2" {
		t.Fatalf("LIST after ExpireHistory = %+v, want configmap a with v=2", list.Items)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm = &list.Items[0]
	cm.Data["v"] = "3"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || !ok || got.Data["v"] != "3" {
			t.Errorf("watch from the fresh LIST's RV: got %s %v, want MODIFIED v=3", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event from a watch at the fresh LIST's RV")
	}
}

func TestKubeRestartAPIServerKeepsDataAndLosesTheWatchCacheHistory(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, 2*time.Minute)
	ns := testNamespace(t, ctx, k)
	cms := k.Clientset().CoreV1().ConfigMaps(ns)

	before, err := cms.Create(ctx, configMap(ns, "kept", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another write, so the restarted watch cache starts past the RV we hold.
	if _, err := cms.Create(ctx, configMap(ns, "later", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "later" {
		t.Fatalf("first event before the restart = %s %v, want ADDED later", ev.Type, ev.Object)
	}

	start := time.Now()
	if err := k.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("RestartAPIServer took %s", time.Since(start).Round(time.Millisecond))

	// The open watch ended with the old process.
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Errorf("watch across the restart delivered %s %v, want it closed", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("watch across the restart still open")
	}

	after, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("after restart: uid %s RV %s, want uid %s RV %s", after.UID, after.ResourceVersion, before.UID, before.ResourceVersion)
	}
	// What a reconnecting client sees: the new watch cache starts at etcd's current
	// revision, so an older RV is too old, though etcd was not compacted.
	if _, err := firstEvent(ctx, func(ctx context.Context) (watch.Interface, error) {
		return cms.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	}); !isTooOld(err) {
		t.Errorf("watch from pre-restart RV %s = %v, want 410 Gone", before.ResourceVersion, err)
	}
	// The same credentials still work for writes.
	if _, err := cms.Create(ctx, configMap(ns, "new", "1"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create after restart: %v", err)
	}
}

func TestKubeStopStartEtcdKeepsData(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, 2*time.Minute)
	ns := testNamespace(t, ctx, k)
	cms := k.Clientset().CoreV1().ConfigMaps(ns)

	before, err := cms.Create(ctx, configMap(ns, "kept", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopStart := time.Now()
	if err := k.StopEtcd(); err != nil {
		t.Fatal(err)
	}
	t.Logf("StopEtcd took %s", time.Since(stopStart).Round(time.Millisecond))
	downCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = cms.Create(downCtx, configMap(ns, "while-down", "1"), metav1.CreateOptions{})
	cancel()
	if err == nil {
		t.Errorf("create succeeded while etcd was stopped")
	}
	start := time.Now()
	if err := k.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("StartEtcd (until the apiserver is ready again) took %s", time.Since(start).Round(time.Millisecond))

	after, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after etcd restart: %v", err)
	}
	if after.UID != before.UID || after.Data["v"] != "1" {
		t.Errorf("after etcd restart: uid %s data %v, want uid %s v=1", after.UID, after.Data, before.UID)
	}
	if _, err := cms.Create(ctx, configMap(ns, "after", "1"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create after etcd restart: %v", err)
	}
}

func TestKubeRestrictedUserHasExactlyItsRules(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, time.Minute)
	ns := testNamespace(t, ctx, k)
	if _, err := k.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "a", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg, kubeconfig, err := k.RestrictedUser(ctx, "cm-reader", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	for name, c := range map[string]*rest.Config{"rest.Config": cfg, "kubeconfig": fromFile} {
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("%s: list configmaps = %v items, %v; want 1 item", name, len(list.Items), err)
		}
		if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list secrets = %v, want 403 Forbidden", name, err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "b", "1"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: create configmap = %v, want 403 Forbidden (only get, list, watch)", name, err)
		}
	}
}

func TestKubeCreateCRDIsServedToTheDynamicClient(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, time.Minute)
	ns := testNamespace(t, ctx, k)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: ptrTo(true)},
					},
				}},
			}},
		},
	}
	start := time.Now()
	if err := k.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Logf("CreateCRD took %s", time.Since(start).Round(time.Millisecond))

	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w1", "namespace": ns},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if _, err := k.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a widget right after CreateCRD: %v", err)
	}
	got, err := k.Dynamic().Resource(gvr).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Errorf("widget spec.size = %d, want 3", size)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestKubeRequestCountCountsLists(t *testing.T) {
	k := sharedKube(t)
	ctx := testContext(t, time.Minute)
	ns := testNamespace(t, ctx, k)
	cms := k.Clientset().CoreV1().ConfigMaps(ns)

	before, err := k.RequestCount(ctx, "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get missing configmap = %v, want 404", err)
	}
	afterGet, err := k.RequestCount(ctx, "list", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if afterGet != before {
		t.Errorf("LIST count went from %v to %v after a GET", before, afterGet)
	}
	for range 2 {
		if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := k.RequestCount(ctx, "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 2 {
		t.Errorf("LIST count went from %v to %v after two LISTs, want +2", before, after)
	}
	gets, err := k.RequestCount(ctx, "GET", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if gets < 1 {
		t.Errorf("GET count = %v, want at least 1", gets)
	}
}

// A Kube of its own: EtcdCompactionInterval makes the apiserver compact etcd itself, which
// a resource served without a watch cache shows within a few intervals.
func TestNewKubeAppliesTheEtcdCompactionInterval(t *testing.T) {
	start := time.Now()
	k := NewKube(t, KubeOptions{
		EtcdCompactionInterval: time.Second,
		WatchCacheSizes:        []string{"podtemplates#0"},
	})
	t.Logf("NewKube took %s", time.Since(start).Round(time.Millisecond))
	ctx := testContext(t, time.Minute)
	ns := testNamespace(t, ctx, k)
	pts := k.Clientset().CoreV1().PodTemplates(ns)
	pt, err := pts.Create(ctx, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver compacts at the revision it saw one interval earlier, and only what is
	// older than the latest write is compacted: keep writing.
	createdRV := pt.ResourceVersion
	for i := 0; ; i++ {
		pt.Labels = map[string]string{"i": strconv.Itoa(i)}
		if pt, err = pts.Update(ctx, pt, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev, err := firstEvent(ctx, func(ctx context.Context) (watch.Interface, error) {
			return pts.Watch(ctx, metav1.ListOptions{ResourceVersion: createdRV})
		})
		if isTooOld(err) {
			t.Logf("watch from RV %s got 410 after %d updates: %v", createdRV, i+1, err)
			return
		}
		if err != nil {
			t.Fatalf("watch from RV %s: %v", createdRV, err)
		}
		if ev.Type != watch.Modified {
			t.Fatalf("watch from RV %s: first event %s, want MODIFIED (history) or 410", createdRV, ev.Type)
		}
		if ctx.Err() != nil {
			t.Fatal("etcd was never compacted")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestSumCounterParsesTheTextFormat(t *testing.T) {
	text := `# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="410",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",group="",resource="secrets",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total_other{resource="configmaps",verb="LIST"} 100
apiserver_request_total{dry_run="a \"quoted\", value",resource="configmaps",verb="LIST"} 2.5
`
	got, err := sumCounter(text, "apiserver_request_total", func(l map[string]string) bool {
		return l["verb"] == "LIST" && l["resource"] == "configmaps"
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != 6.5 {
		t.Errorf("sum = %v, want 6.5", got)
	}
}

func TestStartKubeWithoutBinariesSaysHowToGetThem(t *testing.T) {
	t.Setenv("KUBE_CDC_TESTBIN", t.TempDir())
	_, err := StartKube(context.Background(), KubeOptions{})
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Errorf("StartKube without binaries = %v, want an error saying to run make testbin", err)
	}
}

func TestKubeRestoreEtcdGoesBackInTimeAndWipeEtcdRebuildsTheCluster(t *testing.T) {
	k := NewKube(t, KubeOptions{})
	ctx := testContext(t, 3*time.Minute)
	cms := k.Clientset().CoreV1().ConfigMaps("default")
	kept, err := cms.Create(ctx, configMap("default", "kept", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backup, err := k.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// More writes are lost than the apiserver makes of its own after the restore (leases,
	// endpoints), so the first create after it reuses an RV issued before.
	lost, err := cms.Create(ctx, configMap("default", "lost", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		lost.Data = map[string]string{"v": strconv.Itoa(i)}
		if lost, err = cms.Update(ctx, lost, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.UID != kept.UID || got.ResourceVersion != kept.ResourceVersion {
		t.Errorf("kept after the restore: %v, %v; want uid %s RV %s", got, err, kept.UID, kept.ResourceVersion)
	}
	if _, err := cms.Get(ctx, "lost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lost after the restore: %v, want NotFound", err)
	}
	again, err := cms.Create(ctx, configMap("default", "again", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	if rv(again.ResourceVersion) > rv(lost.ResourceVersion) {
		t.Errorf("the first create after the restore got RV %s, above %s issued before it: the restore did not go back in time",
			again.ResourceVersion, lost.ResourceVersion)
	}

	system := func() string {
		ns, err := k.Clientset().CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(ns.UID)
	}
	before := system()
	if err := k.WipeEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kept after the wipe: %v, want NotFound", err)
	}
	if after := system(); after == before {
		t.Errorf("kube-system's uid is %s before and after the wipe, want a new one", after)
	}
}
