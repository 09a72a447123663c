package e2e

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/jackc/pgx/v5"
)

// createConfigMaps creates ConfigMaps cm-from … cm-(to-1) in ns with data.
func createConfigMaps(t *testing.T, ns string, from, to int, data map[string]string) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := kubeFor(t).Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, "cm-"+strconv.Itoa(i), data), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "e2e"}}, Data: data}
}

var widgets = schema.GroupVersionResource{Group: "e2e.kube-cdc.io", Version: "v1", Resource: "widgets"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.e2e.kube-cdc.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "e2e.kube-cdc.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// liveRows returns objects' live rows of a resource as key → "uid@rv".
func liveRows(dsn, resource string) (map[string]string, error) {
	return queryLive(dsn, `resource = $1`, resource)
}

// liveRowsOf is liveRows of one group's resource.
func liveRowsOf(dsn, group, resource string) (map[string]string, error) {
	return queryLive(dsn, `api_group = $1 AND resource = $2`, group, resource)
}

// queryLive reads the live rows that where selects as key → "uid@rv", keyed as the
// sinks key them: namespace/name, or the name alone of a cluster-scoped object.
func queryLive(dsn, where string, args ...any) (map[string]string, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT namespace, name, uid, resource_version FROM kube_cdc.objects
		WHERE `+where+` AND deleted_at IS NULL`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var ns, name, uid string
		var rv int64
		if err := rows.Scan(&ns, &name, &uid, &rv); err != nil {
			return nil, err
		}
		key := name
		if ns != "" {
			key = ns + "/" + name
		}
		out[key] = fmt.Sprintf("%s@%d", uid, rv)
	}
	return out, rows.Err()
}

// converges waits until the live rows of resource equal want.
func converges(t *testing.T, dsn, resource string, want func() map[string]string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		got, err := liveRows(dsn, resource)
		if err != nil {
			return err
		}
		return sameMap(got, want())
	})
}

// listedConfigMaps is a fresh LIST of the namespaces' ConfigMaps as key → "uid@rv".
func listedConfigMaps(t *testing.T, namespaces ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range namespaces {
		l, err := kubeFor(t).Clientset().CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Items {
			out[ns+"/"+c.Name] = string(c.UID) + "@" + c.ResourceVersion
		}
	}
	return out
}

func sameMap(a, b map[string]string) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d rows, want %d", len(a), len(b))
	}
	for k, v := range b {
		if a[k] != v {
			return fmt.Errorf("%s = %q, want %q", k, a[k], v)
		}
	}
	return nil
}

func TestInitialSyncWritesEveryObjectOnceAcrossNamespacesAndCRDs(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	nsA, nsB := namespace(t, "a"), namespace(t, "b")
	for i := range 30 {
		for _, ns := range []string{nsA, nsB} {
			if _, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "cm-"+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ensureWidgetCRD(t)
	for i := range 5 {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.kube-cdc.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w-" + strconv.Itoa(i), "namespace": nsA},
			"spec":     map[string]any{"size": i},
		}}
		if _, err := kube.Dynamic().Resource(widgets).Namespace(nsA).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, fmt.Sprintf(`  - name: configmaps
    namespaces: [%s, %s]
  - name: widgets.e2e.kube-cdc.io
    namespaces: [%s]`, nsA, nsB, nsA), "")
	d := start(t, "run", "-c", cfg)

	want := listedConfigMaps(t, nsA, nsB)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	eventually(t, 30*time.Second, func() error {
		got, err := liveRows(dsn, "widgets")
		if err == nil && len(got) != 5 {
			err = fmt.Errorf("%d widgets, want 5", len(got))
		}
		return err
	})
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE resource = 'configmaps' AND snapshot`); n != len(want) {
		t.Errorf("%d snapshot rows in changes, want one per object (%d)", n, len(want))
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE resource = 'widgets' AND object->'spec'->>'size' IS NOT NULL AND api_group = 'e2e.kube-cdc.io'`); n != 5 {
		t.Errorf("%d widget rows carry their spec, want 5", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE object->'metadata' ? 'managedFields'`); n != 0 {
		t.Errorf("%d rows kept managedFields", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE changed_by = '' OR changed_by IS NULL`); n != 0 {
		t.Errorf("%d rows without changed_by", n)
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
