package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkListMode: the initial sync of 20k ConfigMaps of ~1 KB (and of 100k, adding
// the 80k small ones) into an empty PostgreSQL database, read by a streaming list
// (kubernetes.listMode: stream, WatchList) and by a paged LIST (paged, limit 500), run
// back to back in the same apiserver: kube-cdc's wall time (start to checkpoint), CPU and
// peak RSS, and the apiserver's own RSS growth during the sync (its /proc status sampled
// every 20 ms, peak minus what it held just before), side by side as ratios stream/paged.
// The paged run goes first at each size, so a heap the apiserver keeps after one run
// counts against the stream run's growth, not for it.
func BenchmarkListMode(b *testing.B) {
	syncFixture(b)
	sizes := []struct {
		name       string
		namespaces []string
		objects    int
	}{{"20k", []string{syncNS}, syncObjs}}
	if !testing.Short() { // -short: 20k only
		extraFixture(b)
		sizes = append(sizes, struct {
			name       string
			namespaces []string
			objects    int
		}{"100k", []string{syncNS, extraNS}, syncObjs + extraObjs})
	}
	for _, size := range sizes {
		b.Run("objects="+size.name, func(b *testing.B) {
			paged := listModeSync(b, "paged", size.namespaces, size.objects)
			stream := listModeSync(b, "stream", size.namespaces, size.objects)
			b.ReportMetric(paged.wall.Seconds(), "paged_s")
			b.ReportMetric(stream.wall.Seconds(), "stream_s")
			b.ReportMetric(stream.wall.Seconds()/paged.wall.Seconds(), "wall_stream/paged")
			b.ReportMetric(stream.cpu/paged.cpu, "cpu_stream/paged")
			b.ReportMetric(float64(stream.rss)/float64(paged.rss), "kubecdc_rss_stream/paged")
			b.ReportMetric(float64(paged.apiGrowth)/(1<<20), "apiserver_growth_paged_MiB")
			b.ReportMetric(float64(stream.apiGrowth)/(1<<20), "apiserver_growth_stream_MiB")
			b.ReportMetric(0, "ns/op")
			b.Logf("initial sync of %d ConfigMaps into PostgreSQL, by list mode:\n"+
				"                          paged      stream     stream/paged\n"+
				"  wall (to checkpoint)    %-10s %-10s %.2fx\n"+
				"  kube-cdc CPU            %-10s %-10s %.2fx\n"+
				"  kube-cdc peak RSS       %-10s %-10s %.2fx\n"+
				"  apiserver RSS growth    %-10s %-10s %s\n"+
				"  apiserver RSS before    %-10s %-10s",
				size.objects,
				paged.wall.Round(10*time.Millisecond), stream.wall.Round(10*time.Millisecond), stream.wall.Seconds()/paged.wall.Seconds(),
				fmt.Sprintf("%.2fs", paged.cpu), fmt.Sprintf("%.2fs", stream.cpu), stream.cpu/paged.cpu,
				mib(paged.rss), mib(stream.rss), float64(stream.rss)/float64(paged.rss),
				mib(paged.apiGrowth), mib(stream.apiGrowth), ratio(stream.apiGrowth, paged.apiGrowth),
				mib(paged.apiBefore), mib(stream.apiBefore))
		})
	}
}

type listModeRun struct {
	wall      time.Duration
	cpu       float64 // kube-cdc's user+sys seconds
	rss       int64   // kube-cdc's peak RSS (VmHWM), bytes
	apiBefore int64   // the apiserver's RSS just before, bytes
	apiGrowth int64   // the apiserver's peak RSS during the sync minus apiBefore, bytes
}

func listModeSync(b *testing.B, mode string, namespaces []string, objects int) listModeRun {
	b.Helper()
	pid := kube.APIServerPID()
	before := procStatus(pid, "VmRSS")
	dsn := pg.NewDatabase(b)
	conn := connect(b, dsn)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak int64
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, procStatus(pid, "VmRSS"))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	cfg := fmt.Sprintf(`cluster: bench
kubernetes:
  kubeconfig: %q
  listMode: %s
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
log:
  level: info
`, kube.Kubeconfig, mode, strings.Join(namespaces, ", "), dsn)
	d := startDaemon(b, cfg)
	synced := waitAllSynced(b, conn, len(namespaces), objects, 10*time.Minute, d)
	close(stop)
	wg.Wait()
	rss := procStatus(d.cmd.Process.Pid, "VmHWM")
	cpu := d.stop(b)
	keepLog(b, d, "listmode-"+mode)
	return listModeRun{wall: synced.Sub(d.start), cpu: cpu, rss: rss, apiBefore: before, apiGrowth: max(0, peak-before)}
}

// waitAllSynced polls until every one of n configmaps checkpoints exists and objects
// holds want live configmap rows.
func waitAllSynced(b *testing.B, conn *pgx.Conn, n, want int, timeout time.Duration, d *daemon) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var cks, rows int64
		err := conn.QueryRow(b.Context(), `SELECT
			(SELECT count(*) FROM kube_cdc.checkpoints WHERE resource = 'configmaps' AND resource_version > 0),
			(SELECT count(*) FROM kube_cdc.objects WHERE resource = 'configmaps' AND deleted_at IS NULL)`).Scan(&cks, &rows)
		if err == nil && cks >= int64(n) && rows >= int64(want) {
			return time.Now()
		}
		d.failIfExited(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("not synced within %v\n%s", timeout, readTail(d.logPath))
	return time.Time{}
}

// procStatus reads one "kB" field of /proc/PID/status (VmRSS, VmHWM) in bytes; 0 when
// it cannot.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(n int64) string { return fmt.Sprintf("%.0fMiB", float64(n)/(1<<20)) }

func ratio(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
