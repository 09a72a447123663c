package bench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/keyindex"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The benchmarks at cluster scale: a Cluster of their own (controllers, scheduler, KWOK
// nodes) holding the shape of a real cluster — nodes, Deployments, their ReplicaSets and
// Pods, Services and their EndpointSlices — rather than ConfigMaps a benchmark wrote.

// ClusterShapeEnv overrides the cluster's size: "nodes,deployments,replicas" (default
// 1000,100,100: 1,000 nodes and 10,000 pods). A small shape ("20,10,10") checks the
// benchmark itself in a minute.
const ClusterShapeEnv = "KUBE_CDC_BENCH_CLUSTER_SHAPE"

const scaleNS = "bench-scale"

type scaleShape struct{ nodes, deployments, replicas int }

func scaleShapeFromEnv(b *testing.B) scaleShape {
	v := os.Getenv(ClusterShapeEnv)
	if v == "" {
		return scaleShape{nodes: 1000, deployments: 100, replicas: 100}
	}
	var s scaleShape
	if _, err := fmt.Sscanf(v, "%d,%d,%d", &s.nodes, &s.deployments, &s.replicas); err != nil || s.nodes <= 0 || s.deployments <= 0 || s.replicas <= 0 {
		b.Fatalf("%s=%q: want nodes,deployments,replicas, e.g. 1000,100,100", ClusterShapeEnv, v)
	}
	return s
}

// scaleResources are kube-cdc's default resources (no resources key) plus EndpointSlices.
var scaleResources = []struct {
	name string // as the config names it
	gvr  schema.GroupVersionResource
}{
	{"namespaces", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}},
	{"nodes", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}},
	{"pods", schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
	{"services", schema.GroupVersionResource{Version: "v1", Resource: "services"}},
	{"configmaps", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	{"deployments.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
	{"statefulsets.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}},
	{"daemonsets.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}},
	{"replicasets.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}},
	{"jobs.batch", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}},
	{"cronjobs.batch", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}},
	{"ingresses.networking.k8s.io", schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}},
	{"endpointslices.discovery.k8s.io", schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}},
}

// scaleTopic is the Kafka topic of a resource under the template prefix.{group}.{resource}.
func scaleTopic(prefix string, gvr schema.GroupVersionResource) string {
	g := gvr.Group
	if g == "" {
		g = "core"
	}
	return prefix + "." + g + "." + gvr.Resource
}

// scaleCluster is the running cluster with its workload settled.
type scaleCluster struct {
	*testenv.Cluster
	shape       scaleShape
	writer      kubernetes.Interface // no client-side rate limit
	deployments []string
}

// BenchmarkCluster: kube-cdc at the scale of a real cluster. The cluster is built once;
// the sub-benchmarks measure the initial sync into PostgreSQL (with the heap of a relist)
// and into Kafka against baselines A and B, then steady churn (cluster_churn_test.go).
func BenchmarkCluster(b *testing.B) {
	sc := startScaleCluster(b)
	var bRes *informerResult
	b.Run("sync=postgres", func(b *testing.B) { bRes = clusterSyncPostgres(b, sc) })
	b.Run("sync=kafka", func(b *testing.B) { clusterSyncKafka(b, sc, bRes) })
	b.Run("churn", func(b *testing.B) { clusterChurn(b, sc) })
}

func startScaleCluster(b *testing.B) *scaleCluster {
	b.Helper()
	shape := scaleShapeFromEnv(b)
	fmt.Printf("bench: cluster: machine load before start: %s\n", loadavg())
	ctx := context.Background()
	started := time.Now()
	c := testenv.NewCluster(b, testenv.ClusterOptions{})
	wc := rest.CopyConfig(c.Config)
	wc.QPS, wc.Burst = -1, 0
	w, err := kubernetes.NewForConfig(wc)
	if err != nil {
		b.Fatal(err)
	}
	sc := &scaleCluster{Cluster: c, shape: shape, writer: w}
	if err := c.CreateNodes(ctx, "node", shape.nodes); err != nil {
		b.Fatal(err)
	}
	nodesAt := time.Since(started)
	if _, err := w.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	ds := make([]*appsv1.Deployment, shape.deployments)
	svcs := make([]*corev1.Service, shape.deployments)
	for i := range ds {
		name := fmt.Sprintf("app-%03d", i)
		sc.deployments = append(sc.deployments, name)
		ds[i] = testenv.Deployment(scaleNS, name, int32(shape.replicas), "app:1")
		svcs[i] = testenv.Service(scaleNS, name)
	}
	if err := c.CreateServices(ctx, svcs...); err != nil {
		b.Fatal(err)
	}
	if err := c.CreateDeployments(ctx, ds...); err != nil {
		b.Fatal(err)
	}
	if err := sc.waitWorkload(ctx, 20*time.Minute); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("bench: cluster: %d KWOK nodes Ready in %v; %d Deployments × %d replicas (%d pods) Running, with %d Services and their EndpointSlices, in %v in all; load %s\n",
		shape.nodes, nodesAt.Round(time.Second), shape.deployments, shape.replicas, shape.deployments*shape.replicas,
		shape.deployments, time.Since(started).Round(time.Second), loadavg())
	return sc
}

// waitWorkload waits until every Deployment is rolled out and available (polling only the
// Deployments: listing 10,000 pods four times a second would slow the scheduler it waits
// for), then until every Service's EndpointSlices hold every available pod as ready. On
// this shared machine a few pods at 10k scale can stay unready for good (KWOK does not
// retry a failed status patch): while nothing moves, such pods are nudged every
// nudgeAfter (testenv.Cluster.NudgeStuckPods); once every pod exists and nothing has
// moved for stallAfter, the workload counts as settled and the shortfall is reported.
func (sc *scaleCluster) waitWorkload(ctx context.Context, timeout time.Duration) error {
	const stallAfter, nudgeAfter = 90 * time.Second, 15 * time.Second
	var lastNudge time.Time
	nudged := 0
	defer func() {
		if nudged > 0 {
			fmt.Printf("bench: cluster: %d pod nudges in all (testenv.Cluster.NudgeStuckPods)\n", nudged)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := sc.shape.deployments * sc.shape.replicas
	start, lastNote, lastMove := time.Now(), time.Now(), time.Now()
	prev, available := -1, 0
	for {
		for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
			if sc.ComponentPID(name) == 0 {
				return fmt.Errorf("%s exited:\n%s", name, testenv.Tail(sc.ComponentLogPath(name), 20))
			}
		}
		l, err := sc.writer.AppsV1().Deployments(scaleNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var updated, pending, total int
		available = 0
		for _, d := range l.Items {
			s := d.Status
			available += int(s.AvailableReplicas)
			updated += int(s.UpdatedReplicas)
			total += int(s.Replicas)
			if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != *d.Spec.Replicas ||
				s.AvailableReplicas != *d.Spec.Replicas || s.Replicas != *d.Spec.Replicas {
				pending++
			}
		}
		if pending == 0 && len(l.Items) == sc.shape.deployments {
			break
		}
		if progress := updated*1_000_000 + available; progress != prev {
			prev, lastMove = progress, time.Now()
		} else if updated == want && total == want && time.Since(lastMove) > nudgeAfter && time.Since(lastNudge) > nudgeAfter {
			lastNudge = time.Now()
			n, err := sc.NudgeStuckPods(ctx, scaleNS, nudgeAfter)
			if err != nil {
				return fmt.Errorf("nudge stuck pods: %w", err)
			}
			if n > 0 {
				nudged += n
				fmt.Printf("bench: cluster: nudged %d pods KWOK left scheduled but not ready for %v\n", n, nudgeAfter)
			}
		} else if updated == want && total == want && time.Since(lastMove) > stallAfter {
			fmt.Printf("bench: cluster: %d of %d pods never became available (nothing moved for %v); going on with the cluster as it is\n",
				want-available, want, stallAfter)
			break
		}
		if time.Since(lastNote) > 20*time.Second {
			lastNote = time.Now()
			fmt.Printf("bench: cluster: %v: %d of %d Deployments rolling out; %d pods updated, %d available (load %s)\n",
				time.Since(start).Round(time.Second), pending, len(l.Items), updated, available, loadavg())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployments not rolled out within %v: %d pending", timeout, pending)
		case <-time.After(time.Second):
		}
	}
	for {
		l, err := sc.writer.DiscoveryV1().EndpointSlices(scaleNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
		if ready >= available {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("endpointslices hold %d ready endpoints, want %d", ready, available)
		case <-time.After(time.Second):
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// scaleDaemonConfig is kube-cdc's config for the scale resources with one sink.
func scaleDaemonConfig(kubeconfig, sink string) string {
	var rs strings.Builder
	for _, r := range scaleResources {
		fmt.Fprintf(&rs, "  - name: %s\n", r.name)
	}
	return fmt.Sprintf(`cluster: bench
kubernetes:
  kubeconfig: %q
resources:
%ssinks:
%smetrics:
  address: ""
log:
  level: info
`, kubeconfig, rs.String(), sink)
}

func scalePostgresConfig(sc *scaleCluster, dsn string) string {
	return scaleDaemonConfig(sc.Kubeconfig, fmt.Sprintf(`  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
`, dsn))
}

func scaleKafkaConfig(b *testing.B, sc *scaleCluster, prefix string) string {
	return scaleDaemonConfig(sc.Kubeconfig, fmt.Sprintf(`  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      topic: %q
      createTopics: true
      partitions: %d
    checkpoint:
      type: file
      path: %q
`, kfk.Addr(), prefix+".{group}.{resource}", kafkaPartitions, filepath.Join(b.TempDir(), "state.db")))
}

// scaleList is every listed object as baseline A stores it, counted per resource.
type scaleList struct {
	rows       [][]any // resource, namespace, name, uid, rv, object
	byResource map[string]int
	took       time.Duration
}

// listScale lists every scale resource with raw paged GETs (limit 500, gzip off), as
// baseline A does.
func listScale(b *testing.B, sc *scaleCluster) scaleList {
	b.Helper()
	ctx := context.Background()
	rc := rest.CopyConfig(sc.Config)
	rc.DisableCompression = true
	rc.QPS, rc.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	out := scaleList{byResource: map[string]int{}}
	start := time.Now()
	for _, r := range scaleResources {
		path := "/apis/" + r.gvr.Group + "/" + r.gvr.Version + "/" + r.gvr.Resource
		if r.gvr.Group == "" {
			path = "/api/v1/" + r.gvr.Resource
		}
		cont := ""
		for {
			req := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("limit", "500")
			if cont != "" {
				req = req.Param("continue", cont)
			}
			body, err := req.DoRaw(ctx)
			if err != nil {
				b.Fatalf("list %s: %v", path, err)
			}
			gjson.GetBytes(body, "items").ForEach(func(_, it gjson.Result) bool {
				m := gjson.GetMany(it.Raw, "metadata.namespace", "metadata.name", "metadata.uid", "metadata.resourceVersion")
				rv, _ := strconv.ParseInt(m[3].Str, 10, 64)
				out.rows = append(out.rows, []any{r.gvr.Resource, m[0].Str, m[1].Str, m[2].Str, rv, []byte(it.Raw)})
				out.byResource[r.gvr.Resource]++
				return true
			})
			cont = gjson.GetBytes(body, "metadata.continue").Str
			if cont == "" {
				break
			}
		}
	}
	out.took = time.Since(start)
	return out
}

func (l scaleList) bytes() (n int) {
	for _, r := range l.rows {
		n += len(r[5].([]byte))
	}
	return n
}

func (l scaleList) String() string {
	var parts []string
	for _, r := range scaleResources {
		if n := l.byResource[r.gvr.Resource]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r.gvr.Resource, n))
		}
	}
	return fmt.Sprintf("%d objects (%s; %.1f MB of JSON)", len(l.rows), strings.Join(parts, ", "), float64(l.bytes())/1e6)
}

// informerResult is what baseline B measured.
type informerResult struct {
	wall time.Duration
	cpu  float64
	heap int64
}

// clusterSyncPostgres: kube-cdc's initial sync of the cluster into an empty database,
// against baseline A (bare LIST + COPY) and B (informers + upsert per event); then the
// heap of a relist of the same objects against the full database.
func clusterSyncPostgres(b *testing.B, sc *scaleCluster) *informerResult {
	ctx := context.Background()

	// Baseline A: the bare LIST, then a COPY into an objects and a changes table.
	l := listScale(b, sc)
	n := len(l.rows)
	aConn := connect(b, pg.NewDatabase(b))
	if _, err := aConn.Exec(ctx, `CREATE TABLE objects (resource text NOT NULL, namespace text NOT NULL, name text NOT NULL,
		uid text NOT NULL, resource_version bigint NOT NULL, object jsonb NOT NULL, PRIMARY KEY (resource, namespace, name));
		CREATE TABLE changes (id bigserial PRIMARY KEY, resource text NOT NULL, namespace text NOT NULL, name text NOT NULL,
		uid text NOT NULL, resource_version bigint NOT NULL, object jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, table := range []string{"objects", "changes"} {
		got, err := aConn.CopyFrom(ctx, pgx.Identifier{table}, []string{"resource", "namespace", "name", "uid", "resource_version", "object"}, pgx.CopyFromRows(l.rows))
		if err != nil || int(got) != n {
			b.Fatalf("baseline A copy into %s: %d of %d rows, %v", table, got, n, err)
		}
	}
	aCopy := time.Since(start)
	aTotal := l.took + aCopy

	// kube-cdc: the built binary, an empty database with kube-cdc's schema (A's tables are
	// made before its clock starts too).
	dsn := pg.NewDatabase(b)
	conn := connect(b, dsn)
	config := scalePostgresConfig(sc, dsn)
	migrateFirst(b, config)
	walBefore := walLSN(b, conn)
	d := startDaemon(b, config)
	synced := waitScaleSyncedPostgres(b, conn, n, 10*time.Minute, d)
	wall := synced.Sub(d.start)
	rss := procStatus(d.cmd.Process.Pid, "VmHWM")
	wal := walSince(b, conn, walBefore)
	var tables int64
	if err := conn.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'kube_cdc' AND c.relkind = 'r'`).Scan(&tables); err != nil {
		b.Fatal(err)
	}
	cpu := d.stop(b)

	// Baseline B: the informer program, an empty database.
	bRes := clusterInformer(b, sc, pg.NewDatabase(b), n)

	// The heap of a relist against the database kube-cdc filled (the whole key index is
	// loaded), and of the pipeline streaming once it is done (no per-object state).
	heap := relistHeap(b, "cluster-relist-full", sc, dsn, conn, n)
	idx := keyIndexHeap(b, dsn)

	perK := func(cpu float64) float64 { return cpu / (float64(n) / 1000) }
	ratioA := wall.Seconds() / aTotal.Seconds()
	ratioB := bRes.wall.Seconds() / wall.Seconds()
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(l.took.Seconds(), "A_list_s")
	b.ReportMetric(aCopy.Seconds(), "A_copy_s")
	b.ReportMetric(aTotal.Seconds(), "A_s")
	b.ReportMetric(wall.Seconds(), "kubecdc_s")
	b.ReportMetric(cpu, "kubecdc_cpu_s")
	b.ReportMetric(bRes.wall.Seconds(), "B_s")
	b.ReportMetric(bRes.cpu, "B_cpu_s")
	b.ReportMetric(ratioA, "kubecdc/A")
	b.ReportMetric(ratioB, "B/kubecdc")
	b.ReportMetric(perK(cpu)/perK(bRes.cpu), "cpu_kubecdc/B")
	b.ReportMetric(heap.perObj, "relist_heap_B/obj")
	b.ReportMetric(heap.steadyPerObj, "steady_heap_B/obj")
	b.ReportMetric(idx.index, "keyindex_B/entry")
	b.ReportMetric(idx.index/idx.asMap, "keyindex/map")
	b.ReportMetric(float64(bRes.heap)/float64(n), "B_heap_B/obj")
	b.ReportMetric(float64(rss)/(1<<20), "kubecdc_peak_rss_MiB")
	b.ReportMetric(float64(wal)/1e6, "pg_wal_MB")
	b.ReportMetric(float64(tables)/1e6, "pg_tables_MB")
	b.ReportMetric(0, "ns/op")
	reportf(b, "  sizing: kube-cdc peak RSS %.0f MiB; PostgreSQL WAL written %.1f MB, kube_cdc tables %.1f MB on disk (%.0f / %.0f bytes per object)",
		float64(rss)/(1<<20), float64(wal)/1e6, float64(tables)/1e6, float64(wal)/float64(n), float64(tables)/float64(n))
	reportf(b, "initial sync at cluster scale into PostgreSQL: %s\n"+
		"  baseline A (bare LIST limit 500 no gzip %v + COPY into objects and changes %v) = %v\n"+
		"  kube-cdc wall %v, CPU %.2fs (%.3f CPU-s per 1k objects)\n"+
		"  baseline B (informers + autocommit upsert per event) wall %v, CPU %.2fs (%.3f CPU-s per 1k), heap %.0f B/object\n"+
		"  kube-cdc/A = %.2fx (target <= 1.1x: %s)\n"+
		"  B/kube-cdc = %.1fx; CPU kube-cdc/B = %.2fx\n"+
		"  heap per tracked object, streaming after the sync (all in: the pipeline's buffers and connections too): live %.1f MiB over a baseline of %.1f MiB = %.0f B per object (target <= 200: %s)\n"+
		"  heap per tracked object during a relist, the key index (the only per-object state, held while a relist is reconciled): %.0f B per entry (target <= 200: %s) vs %.0f B as the map it replaced = %.2fx; %d entries\n"+
		"  relist heap, all in: live peak %.1f MiB over a baseline of %.1f MiB = %.0f B per object (LIST pages and write buffers in flight too); relist took %v and wrote %d changes (nodes heartbeat meanwhile)",
		l, l.took.Round(time.Millisecond), aCopy.Round(time.Millisecond), aTotal.Round(time.Millisecond),
		wall.Round(time.Millisecond), cpu, perK(cpu),
		bRes.wall.Round(time.Millisecond), bRes.cpu, perK(bRes.cpu), float64(bRes.heap)/float64(n),
		ratioA, verdict(ratioA <= 1.1),
		ratioB, perK(cpu)/perK(bRes.cpu),
		float64(heap.steady)/(1<<20), float64(heap.base)/(1<<20), heap.steadyPerObj, verdict(heap.steadyPerObj <= 200),
		idx.index, verdict(idx.index <= 200), idx.asMap, idx.index/idx.asMap, idx.entries,
		float64(heap.peak)/(1<<20), float64(heap.base)/(1<<20), heap.perObj, heap.took.Round(time.Millisecond), heap.changes)
	return bRes
}

// waitScaleSyncedPostgres polls until every scale resource has a checkpoint and objects
// holds at least want live rows; it returns when that was first seen.
func waitScaleSyncedPostgres(b *testing.B, conn *pgx.Conn, want int, timeout time.Duration, d *daemon) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	var ck, n int
	var err error
	for time.Now().Before(deadline) {
		// One table per statement: a statement locking both while kube-cdc's migrations
		// alter both deadlocked with them.
		err = conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&ck)
		if err == nil && ck >= len(scaleResources) {
			err = conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.objects WHERE deleted_at IS NULL`).Scan(&n)
			if err == nil && n >= want {
				return time.Now()
			}
		}
		d.failIfExited(b)
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("not synced within %v: %d of %d checkpoints, %d of %d objects (%v)", timeout, ck, len(scaleResources), n, want, err)
	return time.Time{}
}

// clusterInformer runs baseline B over the scale resources until it has added want
// objects.
func clusterInformer(b *testing.B, sc *scaleCluster, dsn string, want int) *informerResult {
	b.Helper()
	bin := filepath.Join(binDir, "clusterinformer")
	if _, err := os.Stat(bin); err != nil {
		if err := testenv.GoBuild(bin, "./bench/internal/clusterinformer"); err != nil {
			b.Fatal(err)
		}
	}
	var gvrs []string
	for _, r := range scaleResources {
		gvrs = append(gvrs, r.gvr.Group+"/"+r.gvr.Version+"/"+r.gvr.Resource)
	}
	cmd := exec.Command(bin, "-kubeconfig", sc.Kubeconfig, "-resources", strings.Join(gvrs, ","), "-dsn", dsn,
		"-expect", strconv.Itoa(want), "-timeout", "10m")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var line string
	s := bufio.NewScanner(out)
	for s.Scan() {
		line = s.Text()
	}
	err = cmd.Wait()
	r := &informerResult{wall: time.Since(start)}
	if err != nil {
		b.Fatalf("cluster informer baseline: %v\n%s", err, stderr.String())
	}
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "heap_bytes="); ok {
			r.heap, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	r.cpu = cpuSeconds(cmd.ProcessState)
	fmt.Printf("bench: cluster informer baseline: %s\n", line)
	return r
}

type heapResult struct {
	base, peak   uint64
	perObj       float64
	steady       uint64  // the live heap once the relist is done, the pipeline streaming
	steadyPerObj float64 // (steady − base) / objects
	took         time.Duration
	changes      int64
}

// relistHeap forgets the checkpoints of a database that holds every object and runs the
// pipeline in this process, wired like cmd/kube-cdc/run.go: every resource relists and
// diffs against the sink with its whole key index loaded. The live heap is sampled as in
// BenchmarkRelistMemory; per object is (live peak − live heap before start) / objects.
func relistHeap(b *testing.B, name string, sc *scaleCluster, dsn string, conn *pgx.Conn, n int) heapResult {
	b.Helper()
	ctx := context.Background()
	// An empty database has no schema yet: the pipeline migrates it.
	var id0, id1 int64
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
		IF to_regclass('kube_cdc.checkpoints') IS NOT NULL THEN DELETE FROM kube_cdc.checkpoints; END IF; END $$`); err != nil {
		b.Fatal(err)
	}
	var migrated bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('kube_cdc.changes') IS NOT NULL`).Scan(&migrated); err != nil {
		b.Fatal(err)
	}
	if migrated {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&id0); err != nil {
			b.Fatal(err)
		}
	}
	var r heapResult
	r.base = liveHeap()
	h := startHeapSampler(name)
	start := time.Now()
	ip := startClusterInProcess(b, sc.Config, dsn)
	waitScaleSyncedPostgres(b, conn, n, 10*time.Minute, nil)
	r.took = time.Since(start)
	h.finish(b)
	r.steady = steadyHeap(b, name+"-steady")
	r.steadyPerObj = float64(r.steady-min(r.base, r.steady)) / float64(n)
	ip.stop(b)
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&id1); err != nil {
		b.Fatal(err)
	}
	r.changes = id1 - id0
	r.peak = h.livePeak
	r.perObj = float64(r.peak-min(r.base, r.peak)) / float64(n)
	return r
}

// startClusterInProcess is startInProcess for the scale resources of another apiserver.
func startClusterInProcess(b *testing.B, cfg *rest.Config, dsn string) *inProcess {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rc := rest.CopyConfig(cfg)
	rc.Timeout = time.Minute
	clients, err := source.NewClients(rc, source.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]source.Spec, len(scaleResources))
	for i, r := range scaleResources {
		specs[i] = source.Spec{Name: r.name}
	}
	targets, err := source.Resolve(clients.Discovery, specs)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sink, err := postgres.New(ctx, "warehouse", "bench", postgres.Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		b.Fatal(err)
	}
	pts := make([]pipeline.Target, len(targets))
	for i, t := range targets {
		pts[i] = targetOf(t, func() *source.Stream {
			return &source.Stream{Clients: clients, Target: t, Transform: &source.Transform{RedactSecrets: true}, Log: log}
		})
	}
	p := pipeline.New(pipeline.Options{Cluster: "bench", Log: log}, []pipeline.Sink{sink}, pts)
	ip := &inProcess{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := p.Run(ctx)
		sink.Close()
		ip.done <- err
	}()
	return ip
}

// clusterSyncKafka: kube-cdc's initial sync of the cluster into Kafka (a topic per
// resource), against baseline A for Kafka — the bare LIST plus a bare kafka-go Writer
// producing kube-cdc's very records in one call — and B (which writes to PostgreSQL).
func clusterSyncKafka(b *testing.B, sc *scaleCluster, bRes *informerResult) {
	ctx := context.Background()
	l := listScale(b, sc)
	n := len(l.rows)
	l.rows = nil // only the count and the LIST's time are needed here

	const prefix = "scale"
	d := startDaemon(b, scaleKafkaConfig(b, sc, prefix))
	first, last := waitScaleRecords(b, prefix, int64(n), d)
	cpu := d.stop(b)
	wall := last.Sub(d.start)
	produce := last.Sub(first)

	var msgs []kafka.Message
	var bytes int
	for _, r := range scaleResources {
		topic := scaleTopic(prefix, r.gvr)
		got, err := kfk.ReadAll(ctx, topic)
		if err != nil {
			b.Fatal(err)
		}
		if err := kfk.CreateTopic(ctx, "bare."+topic, kafkaPartitions, true); err != nil {
			b.Fatal(err)
		}
		for _, m := range got {
			msgs = append(msgs, kafka.Message{Topic: "bare." + topic, Key: m.Key, Value: m.Value, Headers: m.Headers, Time: m.Time})
			bytes += len(m.Value)
		}
	}
	if len(msgs) != n {
		b.Errorf("kube-cdc produced %d records, want %d (one per object)", len(msgs), n)
	}
	w := kfk.Writer("")
	defer w.Close()
	start := time.Now()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	bare := time.Since(start)
	aTotal := l.took + bare

	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	ratioA := wall.Seconds() / aTotal.Seconds()
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(l.took.Seconds(), "A_list_s")
	b.ReportMetric(bare.Seconds(), "A_bare_produce_s")
	b.ReportMetric(aTotal.Seconds(), "A_s")
	b.ReportMetric(wall.Seconds(), "kubecdc_s")
	b.ReportMetric(produce.Seconds(), "kubecdc_produce_s")
	b.ReportMetric(cpu, "kubecdc_cpu_s")
	b.ReportMetric(ratioA, "kubecdc/A")
	b.ReportMetric(rate(produce)/rate(bare), "produce_rate_kubecdc/bare")
	if bRes != nil {
		b.ReportMetric(bRes.wall.Seconds()/wall.Seconds(), "B/kubecdc")
	}
	b.ReportMetric(0, "ns/op")
	line := fmt.Sprintf("initial sync at cluster scale into Kafka (%d topics, %d partitions each): %d records, %.1f MB of values\n"+
		"  baseline A (bare LIST %v + one bare kafka-go WriteMessages of kube-cdc's records %v) = %v\n"+
		"  kube-cdc start→all acknowledged %v (first→last record %v, %.0f rec/s), CPU %.2fs (%.3f CPU-s per 1k objects)\n"+
		"  kube-cdc/A = %.2fx (target <= 1.1x: %s); first→last record rate kube-cdc/bare writer = %.2fx (bound by the paged LIST, not a sink figure: the sink's own produce rate on the same records is BenchmarkKafkaSinkWrite's, target >= 0.9x there)",
		len(scaleResources), kafkaPartitions, len(msgs), float64(bytes)/1e6,
		l.took.Round(time.Millisecond), bare.Round(time.Millisecond), aTotal.Round(time.Millisecond),
		wall.Round(time.Millisecond), produce.Round(time.Millisecond), rate(produce), cpu, cpu/(float64(n)/1000),
		ratioA, verdict(ratioA <= 1.1), rate(produce)/rate(bare))
	if bRes != nil {
		line += fmt.Sprintf("\n  baseline B (informers + upsert per event into PostgreSQL) wall %v: B/kube-cdc = %.1fx", bRes.wall.Round(time.Millisecond), bRes.wall.Seconds()/wall.Seconds())
	}
	reportf(b, "%s", line)
}

// waitScaleRecords polls the high watermarks of every topic under prefix until they sum
// to want; it returns when the first record and the last were first seen.
func waitScaleRecords(b *testing.B, prefix string, want int64, d *daemon) (first, last time.Time) {
	b.Helper()
	c := kafkaClient()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		n := scaleRecords(c, prefix)
		now := time.Now()
		if n > 0 && first.IsZero() {
			first = now
		}
		if n >= want {
			return first, now
		}
		d.failIfExited(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("topics %s.*: fewer than %d records within 10 minutes", prefix, want)
	return
}

// scaleRecords sums the high watermarks of every topic under prefix, in one request
// (topics not created yet count 0).
func scaleRecords(c *kafka.Client, prefix string) (n int64) {
	topics := map[string][]kafka.OffsetRequest{}
	for _, r := range scaleResources {
		for p := range kafkaPartitions {
			topics[scaleTopic(prefix, r.gvr)] = append(topics[scaleTopic(prefix, r.gvr)], kafka.LastOffsetOf(p))
		}
	}
	res, err := c.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: topics})
	if err != nil {
		return 0
	}
	for _, ps := range res.Topics {
		for _, p := range ps {
			if p.Error == nil {
				n += p.LastOffset
			}
		}
	}
	return n
}

// reportf prints a benchmark's report to stdout, whole: go test cuts a benchmark's log
// after a few lines.
func reportf(b *testing.B, format string, args ...any) {
	fmt.Printf("bench: %s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}

// walLSN is the server's current WAL position.
func walLSN(b *testing.B, conn *pgx.Conn) string {
	b.Helper()
	var lsn string
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walSince is how many bytes of WAL the server wrote since lsn (every database's: the
// benchmarks run one at a time).
func walSince(b *testing.B, conn *pgx.Conn, lsn string) int64 {
	b.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// keyIndexResult is the live heap of the key indexes of every scale resource, read from
// a database that holds them, per entry: as the pipeline holds it (keyindex.Index) and
// as the map it held before.
type keyIndexResult struct {
	entries      int
	index, asMap float64 // bytes per entry
}

// keyIndexHeap reads every scale resource's key index from dsn the way a relist's
// cursor does (postgres.Sink.KeyIndex), one per resource as each cursor holds its own,
// into keyindex.Index values and then into maps, and measures the live heap each holds.
func keyIndexHeap(b *testing.B, dsn string) keyIndexResult {
	b.Helper()
	ctx := context.Background()
	sink, err := postgres.New(ctx, "warehouse", "bench", postgres.Options{DSN: dsn, Migrate: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	read := func(add func(i int, k change.Key, e change.Entry)) {
		for i, r := range scaleResources {
			res := change.Resource{Group: r.gvr.Group, Version: r.gvr.Version, Resource: r.gvr.Resource}
			if err := sink.KeyIndex(ctx, res, func(k change.Key, e change.Entry) error { add(i, k, e); return nil }); err != nil {
				b.Fatal(err)
			}
		}
	}
	perEntry := func(base uint64, entries int) float64 {
		live := liveHeap()
		return float64(live-min(base, live)) / float64(max(entries, 1))
	}
	var r keyIndexResult
	base := liveHeap()
	idx := make([]keyindex.Index, len(scaleResources))
	read(func(i int, k change.Key, e change.Entry) { idx[i].Add(k, e) })
	for i := range idx {
		idx[i].Seal()
		r.entries += idx[i].Len()
	}
	r.index = perEntry(base, r.entries)
	runtime.KeepAlive(idx)
	idx = nil

	base = liveHeap()
	maps := make([]map[change.Key]change.Entry, len(scaleResources))
	for i := range maps {
		maps[i] = map[change.Key]change.Entry{}
	}
	read(func(i int, k change.Key, e change.Entry) { maps[i][k] = e })
	r.asMap = perEntry(base, r.entries)
	runtime.KeepAlive(maps)
	return r
}
