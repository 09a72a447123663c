package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tidwall/gjson"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// BenchmarkInitialSyncPostgres: 20,000 ~1 KB ConfigMaps into an empty database, kube-cdc
// against baseline A (bare LIST + COPY) and baseline B (informer + upsert per event).
// It runs twice: against testenv's PostgreSQL (fsync and synchronous_commit off, as in
// every other test), against a durable one (production defaults), and against the durable
// one 1 ms of round trip away (a proxy delays every chunk 0.5 ms each way), the usual
// distance to a managed database in the same zone — where a per-event commit costs what
// it costs in production.
func BenchmarkInitialSyncPostgres(b *testing.B) {
	syncFixture(b)
	b.Run("pg=testenv-nofsync", func(b *testing.B) { initialSyncPostgres(b, pg.NewDatabase) })
	b.Run("pg=durable", func(b *testing.B) { initialSyncPostgres(b, durablePostgres(b).newDatabase) })
	b.Run("pg=durable-rtt-1ms", func(b *testing.B) {
		initialSyncPostgres(b, func(tb testing.TB) string {
			return delayedDSN(tb, durablePostgres(b).newDatabase(tb), 500*time.Microsecond)
		})
	})
}

func initialSyncPostgres(b *testing.B, newDatabase func(testing.TB) string) {
	ctx := context.Background()

	// Baseline A: a bare paged LIST (limit 500, no gzip) and one CopyFrom into a fresh table.
	aList, aCopy, aCopyObjects := baselineA(b, ctx, newDatabase(b))
	aTotal := aList + aCopy
	aOneTable := aList + aCopyObjects

	// kube-cdc: the built binary, an empty database with kube-cdc's schema (A's tables are
	// made before its clock starts too).
	dsn := newDatabase(b)
	conn := connect(b, dsn)
	config := pgDaemonConfigLevel(dsn, syncNS, "debug")
	migrateFirst(b, config)
	d := startDaemon(b, config)
	keepLog(b, d, "initial-sync-"+strings.ReplaceAll(b.Name(), "/", "-"))
	synced := waitSynced(b, conn, syncNS, syncObjs, 5*time.Minute, d)
	kcdcWall := synced.Sub(d.start)
	kcdcCPU := d.stop(b)
	b.Logf("kube-cdc's log (debug: per-batch step timings), started at %s:\n%s", d.start.Format("15:04:05.000"), testenv.Tail(d.logPath, 40))

	// Baseline B: the informer program, an empty database.
	bWall, bCPU, bHeap := baselineB(b, newDatabase(b))

	perK := func(cpu float64) float64 { return cpu / (syncObjs / 1000.0) }
	b.ReportMetric(aList.Seconds(), "A_list_s")
	b.ReportMetric(aCopy.Seconds(), "A_copy_s")
	b.ReportMetric(aTotal.Seconds(), "A_s")
	b.ReportMetric(aOneTable.Seconds(), "A_one_table_s")
	b.ReportMetric(kcdcWall.Seconds()/aOneTable.Seconds(), "kubecdc/A_one_table")
	b.ReportMetric(kcdcWall.Seconds(), "kubecdc_s")
	b.ReportMetric(kcdcCPU, "kubecdc_cpu_s")
	b.ReportMetric(bWall.Seconds(), "B_s")
	b.ReportMetric(bCPU, "B_cpu_s")
	b.ReportMetric(kcdcWall.Seconds()/aTotal.Seconds(), "kubecdc/A")
	b.ReportMetric(bWall.Seconds()/kcdcWall.Seconds(), "B/kubecdc")
	b.ReportMetric(perK(kcdcCPU)/perK(bCPU), "cpu_per_1k_kubecdc/B")
	b.ReportMetric(float64(bHeap)/syncObjs, "B_heap_B/obj")
	b.ReportMetric(0, "ns/op")
	b.Logf("initial sync of %d ConfigMaps into PostgreSQL:\n"+
		"  baseline A (bare LIST limit 500 no gzip %v + CopyFrom of the same rows, objects and changes, %v) = %v (one table only: %v)\n"+
		"  kube-cdc wall %v (start to checkpoint, its schema made beforehand), CPU %.2fs (%.3f CPU-s per 1k changes)\n"+
		"  baseline B (informer + autocommit upsert per event) wall %v, CPU %.2fs (%.3f CPU-s per 1k), heap %.0f B/object\n"+
		"  kube-cdc/A = %.2fx (target <= 1.5x: %s)\n"+
		"  B/kube-cdc = %.1fx (target >= 10x: %s)\n"+
		"  CPU per 1k changes kube-cdc/B = %.2fx (target <= 0.3x: %s)",
		syncObjs, aList.Round(time.Millisecond), aCopy.Round(time.Millisecond), aTotal.Round(time.Millisecond), aOneTable.Round(time.Millisecond),
		kcdcWall.Round(time.Millisecond), kcdcCPU, perK(kcdcCPU),
		bWall.Round(time.Millisecond), bCPU, perK(bCPU), float64(bHeap)/syncObjs,
		kcdcWall.Seconds()/aTotal.Seconds(), verdict(kcdcWall.Seconds()/aTotal.Seconds() <= 1.5),
		bWall.Seconds()/kcdcWall.Seconds(), verdict(bWall.Seconds()/kcdcWall.Seconds() >= 10),
		perK(kcdcCPU)/perK(bCPU), verdict(perK(kcdcCPU)/perK(bCPU) <= 0.3))
}

// baselineA lists syncNS with raw paged GETs (limit 500, gzip off) and copies the rows
// (namespace, name, uid, rv, object) into a fresh table with one CopyFrom.
// The rows are the ones kube-cdc persists per object: its current state (objects) and its
// audit row (changes), each a plain COPY with no upsert, no staging and no conflict
// handling. copyObjects is the first COPY alone, for comparison with a one-table load.
func baselineA(b *testing.B, ctx context.Context, dsn string) (list, copyT, copyObjects time.Duration) {
	rc := rest.CopyConfig(kube.Config)
	rc.DisableCompression = true
	rc.QPS, rc.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	conn := connect(b, dsn)
	if _, err := conn.Exec(ctx, `CREATE TABLE objects (namespace text NOT NULL, name text NOT NULL,
		uid text NOT NULL, resource_version bigint NOT NULL, object jsonb NOT NULL, PRIMARY KEY (namespace, name));
		CREATE TABLE changes (id bigserial PRIMARY KEY, namespace text NOT NULL, name text NOT NULL,
		uid text NOT NULL, resource_version bigint NOT NULL, object jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var rows [][]any
	cont := ""
	for {
		req := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/"+syncNS+"/configmaps").Param("limit", "500")
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.DoRaw(ctx)
		if err != nil {
			b.Fatal(err)
		}
		gjson.GetBytes(body, "items").ForEach(func(_, it gjson.Result) bool {
			m := gjson.GetMany(it.Raw, "metadata.namespace", "metadata.name", "metadata.uid", "metadata.resourceVersion")
			rv, _ := strconv.ParseInt(m[3].Str, 10, 64)
			rows = append(rows, []any{m[0].Str, m[1].Str, m[2].Str, rv, []byte(it.Raw)})
			return true
		})
		cont = gjson.GetBytes(body, "metadata.continue").Str
		if cont == "" {
			break
		}
	}
	list = time.Since(start)
	if len(rows) != syncObjs {
		b.Fatalf("baseline A listed %d objects, want %d", len(rows), syncObjs)
	}
	start = time.Now()
	cols := []string{"namespace", "name", "uid", "resource_version", "object"}
	for i, table := range []string{"objects", "changes"} {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
		if err != nil || n != syncObjs {
			b.Fatalf("baseline A copy into %s: %d rows, %v", table, n, err)
		}
		if i == 0 {
			copyObjects = time.Since(start)
		}
	}
	return list, time.Since(start), copyObjects
}

// baselineB runs the informer program until it has upserted every object; it returns its
// wall time (process start to exit), CPU seconds and heap after GC.
func baselineB(b *testing.B, dsn string) (time.Duration, float64, int64) {
	cmd := exec.Command(informBin, "-kubeconfig", kube.Kubeconfig, "-namespace", syncNS, "-dsn", dsn,
		"-expect", strconv.Itoa(syncObjs), "-timeout", "10m")
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
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line = sc.Text()
	}
	err = cmd.Wait()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("informer baseline: %v\n%s", err, stderr.String())
	}
	var heap int64
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "heap_bytes="); ok {
			heap, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: informer baseline: %s\n", line)
	return wall, cpuSeconds(cmd.ProcessState), heap
}
