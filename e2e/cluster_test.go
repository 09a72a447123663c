package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The realistic shape: controllers, a scheduler and KWOK's simulated nodes, so that what
// kube-cdc streams is what its users' clusters produce — pods created by ReplicaSets,
// scheduled, turning Running, deleted by rollouts and by the garbage collector, nodes
// heartbeating — rather than ConfigMaps a test writes.

// clusterShape is the workload's size. make test runs the small one; set
// KUBE_CDC_E2E_SHAPE=full for the 100 nodes and 50 Deployments × 20 replicas.
type clusterShape struct {
	nodes, deployments, replicas, deleted int
}

func shapeFromEnv(t *testing.T) clusterShape {
	switch v := os.Getenv("KUBE_CDC_E2E_SHAPE"); v {
	case "", "small":
		return clusterShape{nodes: 10, deployments: 10, replicas: 6, deleted: 2}
	case "full":
		return clusterShape{nodes: 100, deployments: 50, replicas: 20, deleted: 10}
	default:
		t.Fatalf("KUBE_CDC_E2E_SHAPE=%q: want small or full", v)
		return clusterShape{}
	}
}

// shapeResources are the default resources (no resources key) as the dynamic client and
// the sinks name them: GVR, the objects table's api_group, and the Kafka topic.
var shapeResources = []struct {
	gvr   schema.GroupVersionResource
	topic string
}{
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "core.namespaces"},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "core.nodes"},
	{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "core.pods"},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "core.services"},
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "core.configmaps"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "apps.deployments"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "apps.statefulsets"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, "apps.daemonsets"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "apps.replicasets"},
	{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "batch.jobs"},
	{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, "batch.cronjobs"},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, "networking.k8s.io.ingresses"},
}

// podVersions records every pod version a watch of the test's own delivers: the ground
// truth of what happened while kube-cdc streamed by watch.
type podVersions struct {
	mu   sync.Mutex
	seen []string // "uid@rv"
	errs []string // what the watch delivered that was no pod
}

func (p *podVersions) follow(ctx context.Context, t *testing.T, c *testenv.Cluster, ns string) (stop func() int) {
	pods := c.Clientset().CoreV1().Pods(ns)
	l, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A RetryWatcher: a plain watch may end early (the apiserver closes it, a connection
	// drops), and every version after that would go unchecked.
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				p.mu.Lock()
				p.errs = append(p.errs, fmt.Sprintf("%s: %v", ev.Type, ev.Object))
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			p.seen = append(p.seen, string(pod.UID)+"@"+pod.ResourceVersion)
			p.mu.Unlock()
		}
	}()
	return func() int {
		w.Stop()
		<-done
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.errs) > 0 {
			t.Errorf("the test's own watch of pods failed: %v", p.errs)
		}
		return len(p.seen)
	}
}

func TestOnARealClusterShapeBothSinksEqualAFreshListAfterRolloutsScalingDeletesAKillAndExpiredHistory(t *testing.T) {
	t.Parallel() // a control plane of its own
	shape := shapeFromEnv(t)
	ctx := context.Background()
	started := time.Now()
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	if err := c.CreateNodes(ctx, "node", shape.nodes); err != nil {
		t.Fatal(err)
	}
	const ns = "shop"
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with %d nodes up in %v", shape.nodes, time.Since(started).Round(time.Millisecond))

	dsn := pg.NewDatabase(t)
	k := testenv.NewKafka(t)
	cfg := writeConfig(t, fmt.Sprintf(`cluster: shape
kubernetes:
  kubeconfig: %q
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
`, c.Kubeconfig, dsn, k.Addr(), filepath.Join(t.TempDir(), "state.db")))
	d := start(t, "run", "-c", cfg)
	daemons := []*daemon{d}
	conn := connect(t, dsn)
	eventually(t, 90*time.Second, func() error {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&n)
		if err == nil && n != len(shapeResources) {
			err = fmt.Errorf("%d of %d resources checkpointed", n, len(shapeResources))
		}
		return err
	})

	// Phase 1, watch only: the Deployments are created and settle. A watch of the test's
	// own records every pod version; each must reach the changes table.
	truth := &podVersions{}
	stopTruth := truth.follow(ctx, t, c, ns)
	names := make([]string, shape.deployments)
	for i := range names {
		names[i] = "app-" + strconv.Itoa(i)
	}
	ds := make([]*appsv1.Deployment, len(names))
	for i, name := range names {
		ds[i] = testenv.Deployment(ns, name, int32(shape.replicas), "app:1")
	}
	if err := c.CreateDeployments(ctx, ds...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	n := stopTruth()
	t.Logf("phase 1: %d pod versions watched, settled at %v", n, time.Since(started).Round(time.Millisecond))
	eventually(t, 60*time.Second, func() error {
		missing := shapeMissingVersions(ctx, conn, truth.seen)
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d pod versions the watch delivered are not in changes, e.g. %v", len(missing), len(truth.seen), missing[:min(5, len(missing))])
		}
		return nil
	})

	// Phase 2: a rollout of every Deployment; kube-cdc is killed (-9) in its middle, the
	// history expires while it is down, and the restart relists.
	if err := c.SetImage(ctx, ns, "app:2", names...); err != nil {
		t.Fatal(err)
	}
	if d.cmd.Process.Signal(syscall.SIGKILL) == nil {
		<-d.done
	}
	if err := c.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	daemons = append(daemons, d)
	if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	// Phase 3: half scaled to zero, some deleted.
	if err := c.Scale(ctx, ns, 0, names[:len(names)/2]...); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDeployments(ctx, ns, names[len(names)-shape.deleted:]...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("workload done at %v", time.Since(started).Round(time.Millisecond))

	// Every resource: the live rows equal a fresh LIST (key, uid, RV), and the latest
	// record of each key in its Kafka topic too, tombstones for the rest.
	for _, r := range shapeResources {
		list := func() map[string]string { return shapeList(t, c, r.gvr) }
		defer shapeExplain(t, k, dsn, "kube.shape."+r.topic, daemons, list)
		eventually(t, 60*time.Second, func() error {
			want := list()
			got, err := liveRowsOf(dsn, r.gvr.Group, r.gvr.Resource)
			if err != nil {
				return err
			}
			if d := shapeDiff(got, want); d != "" {
				return fmt.Errorf("postgres %s: %s", r.gvr.Resource, d)
			}
			latest, err := shapeLatest(k, "kube.shape."+r.topic)
			if err != nil {
				return err
			}
			if d := shapeDiff(latest, want); d != "" {
				return fmt.Errorf("kafka %s: %s", r.topic, d)
			}
			return nil
		})
	}
	// Per key, changes rows in id order have rising (epoch, RV).
	if n := count(t, conn, `SELECT count(*) FROM (
		SELECT epoch, resource_version, lag(epoch) OVER w AS pe, lag(resource_version) OVER w AS prv
		  FROM kube_cdc.changes WINDOW w AS (PARTITION BY api_group, resource, namespace, name ORDER BY id)) x
		 WHERE (pe, prv) >= (epoch, resource_version)`); n != 0 {
		t.Errorf("%d changes rows whose (epoch, RV) is not above their key's previous row", n)
	}
	// Every pod that was ever written and is gone has its delete.
	if n := count(t, conn, `SELECT count(DISTINCT uid) FROM kube_cdc.changes c
		 WHERE resource = 'pods' AND NOT EXISTS (SELECT 1 FROM kube_cdc.objects o
		   WHERE o.resource = 'pods' AND o.uid = c.uid AND o.deleted_at IS NULL)
		   AND NOT EXISTS (SELECT 1 FROM kube_cdc.changes x WHERE x.resource = 'pods' AND x.uid = c.uid AND x.op = 'delete')`); n != 0 {
		t.Errorf("%d pods are gone from the cluster without a delete in changes", n)
		rows, err := conn.Query(ctx, `SELECT c.name, c.op, c.resource_version, c.epoch, c.inferred, o.deleted_at IS NOT NULL
			FROM kube_cdc.changes c JOIN kube_cdc.objects o ON o.resource = c.resource AND o.uid = c.uid
			WHERE c.resource = 'pods' AND o.deleted_at IS NOT NULL ORDER BY c.name, c.id LIMIT 12`)
		if err == nil {
			for rows.Next() {
				var name, op string
				var rv int64
				var epoch int
				var inferred, deleted bool
				_ = rows.Scan(&name, &op, &rv, &epoch, &inferred, &deleted)
				t.Logf("  %s %s@%d epoch %d inferred %v tombstoned %v", name, op, rv, epoch, inferred, deleted)
			}
			rows.Close()
		}
	}
	if len(relistsOf(daemons...)) == 0 {
		t.Errorf("no relist in the logs after the history expired")
	}

	// The CMDB views answer on real objects.
	kept := shape.deployments - shape.deployments/2 - shape.deleted
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.pods
		 WHERE namespace = $1 AND phase = 'Running' AND node LIKE 'node-%' AND images = ARRAY['app:2']
		   AND owner_kind = 'ReplicaSet' AND pod_ip IS NOT NULL`, ns); n != kept*shape.replicas {
		t.Errorf("%d running pods of app:2 on a node, owned by a ReplicaSet, in the pods view; want %d", n, kept*shape.replicas)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.deployments
		 WHERE namespace = $1 AND ready_replicas = replicas AND images = ARRAY['app:2']`, ns); n != shape.deployments-shape.deleted {
		t.Errorf("%d rolled-out deployments with every replica ready in the deployments view; want %d", n, shape.deployments-shape.deleted)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.nodes WHERE ready AND pods_capacity = '110'`); n != shape.nodes {
		t.Errorf("%d ready nodes in the nodes view, want %d", n, shape.nodes)
	}
	stillRunning(t, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	var rows int
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes`).Scan(&rows)
	t.Logf("%d changes rows; done in %v", rows, time.Since(started).Round(time.Millisecond))
}

// shapeList is a fresh LIST of the resource in the whole cluster as key → "uid@rv".
func shapeList(t *testing.T, c *testenv.Cluster, gvr schema.GroupVersionResource) map[string]string {
	t.Helper()
	l, err := c.Dynamic().Resource(gvr).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range l.Items {
		key := o.GetName()
		if o.GetNamespace() != "" {
			key = o.GetNamespace() + "/" + key
		}
		out[key] = string(o.GetUID()) + "@" + o.GetResourceVersion()
	}
	return out
}

// shapeLatest is what a compacted topic keeps: the latest record of each key that is not
// a tombstone, as key → "uid@rv".
func shapeLatest(k *testenv.Kafka, topic string) (map[string]string, error) {
	recs, err := readRecords(k, topic)
	if err != nil && !strings.Contains(err.Error(), "UNKNOWN_TOPIC") {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	out := map[string]string{}
	for _, r := range recs {
		switch {
		case r.tombstone():
			delete(out, r.key)
		case r.op == "d":
			delete(out, r.key)
		default:
			out[r.key] = r.env.Source.UID + "@" + r.rv
		}
	}
	return out, nil
}

// shapeMissingVersions are the "uid@rv" of pod versions that have no changes row.
func shapeMissingVersions(ctx context.Context, conn querier, versions []string) []string {
	rows, err := conn.Query(ctx, `SELECT uid || '@' || resource_version FROM kube_cdc.changes WHERE resource = 'pods'`)
	if err != nil {
		return []string{err.Error()}
	}
	have := map[string]bool{}
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil {
			have[s] = true
		}
	}
	rows.Close()
	var out []string
	for _, v := range versions {
		if !have[v] {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// shapeDiff names what got has that want lacks, lacks, or holds at another uid@rv; "" when
// they are equal.
func shapeDiff(got, want map[string]string) string {
	var out []string
	for k, v := range got {
		if w, ok := want[k]; !ok {
			out = append(out, "extra "+k+"="+v)
		} else if w != v {
			out = append(out, k+"="+v+", want "+w)
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok {
			out = append(out, "missing "+k+"="+w)
		}
	}
	sort.Strings(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

// shapeExplain, when the test has failed, logs every record of topic and every line of the
// daemons' logs that name a key whose latest record is not what a fresh LIST shows.
func shapeExplain(t *testing.T, k *testenv.Kafka, dsn, topic string, ds []*daemon, list func() map[string]string) {
	if !t.Failed() {
		return
	}
	recs, err := readRecords(k, topic)
	if err != nil {
		return
	}
	latest, _ := shapeLatest(k, topic)
	want := list()
	for key, v := range latest {
		if want[key] == v {
			continue
		}
		parts := strings.Split(key, "/")
		name := parts[len(parts)-1]
		var lines []string
		for _, r := range recs {
			if r.key == key {
				lines = append(lines, r.String())
			}
		}
		if len(lines) == 0 {
			continue
		}
		if conn, err := pgx.Connect(context.Background(), dsn); err == nil {
			rows, err := conn.Query(context.Background(), `SELECT id, op, resource_version, epoch, inferred, snapshot FROM kube_cdc.changes WHERE name = $1 ORDER BY id`, name)
			for err == nil && rows.Next() {
				var id, rv int64
				var op string
				var epoch int
				var inferred, snapshot bool
				_ = rows.Scan(&id, &op, &rv, &epoch, &inferred, &snapshot)
				lines = append(lines, fmt.Sprintf("changes %d: %s@%d epoch %d inferred %v snapshot %v", id, op, rv, epoch, inferred, snapshot))
			}
			conn.Close(context.Background())
		}
		for i, d := range ds {
			for _, l := range strings.Split(d.log(), "\n") {
				if strings.Contains(l, name) || strings.Contains(l, "detach") || strings.Contains(l, "stream") && strings.Contains(l, "level=WARN") {
					lines = append(lines, fmt.Sprintf("daemon %d: %s", i, l))
				}
			}
		}
		t.Logf("%s %s:\n  %s", topic, key, strings.Join(lines, "\n  "))
	}
}
