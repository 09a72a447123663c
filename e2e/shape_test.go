package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// shapeKinds is what each streamed resource's objects must say they are.
var shapeKinds = map[string][2]string{
	"configmaps":  {"v1", "ConfigMap"},
	"deployments": {"apps/v1", "Deployment"},
}

// One shape (docs/contract.md, Change log): every object kube-cdc writes carries
// apiVersion and kind, whether a LIST produced it (the apiserver leaves both out of a
// list's items) or a watch event (which has them), for the core group and a named one, in
// PostgreSQL's objects and changes and in Kafka's envelopes.
func TestEveryObjectWrittenCarriesApiVersionAndKindFromTheListAndFromTheWatch(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "sh")
	createConfigMaps(t, ns, 0, 2, map[string]string{"v": "0"})
	deployments := kube.Clientset().AppsV1().Deployments(ns)
	if _, err := deployments.Create(ctx, shapeDeployment(ns, "d-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	k := testenv.NewKafka(t)
	d := start(t, "run", "-c", writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
  - name: deployments.apps
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      createTopics: true
    checkpoint: {type: file, path: %q}
metrics:
  address: ""
`, kube.Kubeconfig, ns, ns, dsn, k.Addr(), filepath.Join(t.TempDir(), "state.db"))))

	// The snapshot: every row so far was written from the LIST.
	conn := connect(t, dsn)
	eventually(t, 60*time.Second, func() error {
		for resource, want := range map[string]int{"configmaps": len(listedConfigMaps(t, ns)), "deployments": 1} {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.objects WHERE resource = $1 AND namespace = $2`, resource, ns).Scan(&n); err != nil {
				return err
			}
			if n != want {
				return fmt.Errorf("%d %s rows, want %d", n, resource, want)
			}
		}
		return nil
	})
	seen := shapeRows(t, conn, ns)
	t.Logf("after the snapshot, checked %v", seen)
	for resource := range shapeKinds {
		for _, key := range []string{"objects " + resource, "changes " + resource + " snapshot"} {
			if seen[key] == 0 {
				t.Errorf("no %s rows after the snapshot (%v)", key, seen)
			}
		}
	}

	// Then the watch: a create, an update and a delete of each resource.
	cms := configMaps(t, ns)
	cms.create("cm-2", "0")
	cms.update("cm-0", "1")
	cms.delete("cm-1")
	if _, err := deployments.Create(ctx, shapeDeployment(ns, "d-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d0, err := deployments.Get(ctx, "d-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d0.Labels = map[string]string{"touched": "1"}
	if _, err := deployments.Update(ctx, d0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := deployments.Delete(ctx, "d-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		for resource := range shapeKinds {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(DISTINCT op) FROM kube_cdc.changes WHERE resource = $1 AND namespace = $2 AND NOT snapshot`, resource, ns).Scan(&n); err != nil {
				return err
			}
			if n != 3 {
				return fmt.Errorf("%s: %d of create, update, delete from the watch", resource, n)
			}
		}
		return nil
	})
	seen = shapeRows(t, conn, ns)
	t.Logf("after the watch, checked %v", seen)
	for resource := range shapeKinds {
		if seen["changes "+resource+" watch"] == 0 {
			t.Errorf("no changes of %s from the watch (%v)", resource, seen)
		}
	}

	// Kafka: the after of every record (the before of a delete).
	for resource, topic := range map[string]string{"configmaps": "kube.e2e.core.configmaps", "deployments": "kube.e2e.apps.deployments"} {
		want := shapeKinds[resource]
		var recs []record
		eventually(t, 60*time.Second, func() error {
			var err error
			if recs, err = readRecords(k, topic); err != nil {
				return err
			}
			ops := map[string]bool{}
			for _, r := range recs {
				ops[r.op] = true
			}
			if !ops["r"] || !ops["c"] || !ops["u"] || !ops["d"] {
				return fmt.Errorf("%s: ops %v, want r, c, u and d", topic, ops)
			}
			return nil
		})
		t.Logf("%s: checking %d records", topic, len(recs))
		for _, r := range recs {
			if r.tombstone() {
				continue
			}
			state := r.env.After
			if r.op == "d" {
				state = r.env.Before
			}
			var obj struct{ APIVersion, Kind string }
			if err := json.Unmarshal(state, &obj); err != nil {
				t.Errorf("%s %v: %v: %s", topic, r, err, state)
				continue
			}
			if obj.APIVersion != want[0] || obj.Kind != want[1] {
				t.Errorf("%s %v: apiVersion %q kind %q, want %s %s", topic, r, obj.APIVersion, obj.Kind, want[0], want[1])
			}
		}
	}
	stopOK(t, d)
}

// shapeRows checks every row of objects and changes in namespace ns: its object has the
// apiVersion and kind of its resource (and an objects row's columns agree). It returns how
// many rows it checked, by "objects RESOURCE" and "changes RESOURCE snapshot|watch".
func shapeRows(t *testing.T, conn *pgx.Conn, ns string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, q := range []string{
		`SELECT 'objects', resource, api_version, kind, object->>'apiVersion', object->>'kind', name, NULL FROM kube_cdc.objects WHERE namespace = $1`,
		`SELECT 'changes', resource, '', '', object->>'apiVersion', object->>'kind', name || ' ' || op, snapshot FROM kube_cdc.changes WHERE namespace = $1`,
	} {
		rows, err := conn.Query(context.Background(), q, ns)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var table, resource, colVersion, colKind, what string
			var version, kind *string
			var snapshot *bool
			if err := rows.Scan(&table, &resource, &colVersion, &colKind, &version, &kind, &what, &snapshot); err != nil {
				t.Fatal(err)
			}
			want := shapeKinds[resource]
			if version == nil || kind == nil || *version != want[0] || *kind != want[1] {
				t.Errorf("%s row of %s %s: object apiVersion %s kind %s, want %s %s", table, resource, what, deref(version), deref(kind), want[0], want[1])
			}
			key := table + " " + resource
			switch {
			case table == "objects":
				if colVersion != "v1" || colKind != want[1] {
					t.Errorf("objects row of %s %s: columns api_version %q kind %q", resource, what, colVersion, colKind)
				}
			case *snapshot:
				key += " snapshot"
			default:
				key += " watch"
			}
			seen[key]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return seen
}

func shapeDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
