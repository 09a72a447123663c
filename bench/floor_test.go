package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// floorArms are the side-by-side lag benchmarks' floor arms, last in their order, and
// the flag that picks each: baseline B (the hand-written informer, one write per event)
// and the raw watch (one watch request decoded as it arrives, one write per event,
// nothing else).
var floorArms = []struct{ name, flag string }{{"informerB", "-raw=false"}, {"rawWatch", "-raw=true"}}

// startInformer runs baseline B (bench/internal/informerbaseline) on ns until stopped,
// writing each event at once to the sink sinkArgs name (-dsn …, or -kafka … -topic …;
// -raw first for the raw watch). Per steady change it does less than kube-cdc (one row
// or record per change, no change log, checkpoint or tombstone): a floor.
func startInformer(b *testing.B, ns string, sinkArgs ...string) *daemon {
	b.Helper()
	return startInformerOn(b, kube.Kubeconfig, ns, sinkArgs...)
}

// startInformerOn is startInformer against the apiserver of kubeconfig.
func startInformerOn(b *testing.B, kubeconfig, ns string, sinkArgs ...string) *daemon {
	b.Helper()
	args := append([]string{"-kubeconfig", kubeconfig, "-namespace", ns, "-timeout", "3h"}, sinkArgs...)
	return startProcess(b, filepath.Join(b.TempDir(), "informerbaseline.log"), nil, informBin, args...)
}

// waitInformerRows waits until baseline B's table holds want rows and returns the highest
// RV in it, where a poll of its later writes begins.
func waitInformerRows(b *testing.B, conn *pgx.Conn, want int, d *daemon) int64 {
	b.Helper()
	return waitInformerTable(b, conn, d, fmt.Sprintf("write %d objects", want), func(n, _ int64) bool { return n >= int64(want) })
}

// waitFloorAt waits until informerbaseline's table holds an RV at or above rv: its one
// watch delivers in RV order, so every earlier event is written too.
func waitFloorAt(b *testing.B, conn *pgx.Conn, rv int64, d *daemon) {
	b.Helper()
	waitInformerTable(b, conn, d, fmt.Sprintf("reach RV %d", rv), func(_, at int64) bool { return at >= rv })
}

// waitInformerTable polls informerbaseline's table (its row count and highest RV) until
// done says so, for at most 3 minutes, and returns the highest RV; what names the wait in
// the failure.
func waitInformerTable(b *testing.B, conn *pgx.Conn, d *daemon, what string, done func(n, rv int64) bool) int64 {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var n, rv int64
		// The table does not exist until the program has connected: an error is a "not yet".
		err := conn.QueryRow(context.Background(), `SELECT count(*), coalesce(max(resource_version), 0) FROM informer_objects`).Scan(&n, &rv)
		if err == nil && done(n, rv) {
			return rv
		}
		d.failIfExited(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("informerbaseline did not %s within 3m\n%s", what, readTail(d.logPath))
	return 0
}

// pollInformerRows records, every 2 ms until ctx ends, each RV above fromRV that baseline
// B's table shows, visible at its commit. B commits one row per event in the watch's RV
// order, so RVs above the last seen are all that is new. Its rows are updated in place:
// an object written twice between two polls would hide the first write, which the lag
// benchmarks, updating each of their 200 objects about once a second, never do unless B
// falls a second behind (then waitAll reports the hidden writes as missing).
func pollInformerRows(ctx context.Context, conn *pgx.Conn, fromRV int64, seen *seenSet) error {
	last := fromRV
	for ctx.Err() == nil {
		rows, err := conn.Query(ctx, `SELECT resource_version, `+visibleAt+` FROM informer_objects
			WHERE resource_version > $1 ORDER BY resource_version`, last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var rv int64
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&rv, &at}, func() error {
			seen.see(rv, at, time.Time{})
			last = max(last, rv)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// reportFloor adds kube-cdc's CPU per change and p99 against the floor arms' (the last
// two of each slice) to a side-by-side line, and at 200 writes/s all three CPU figures
// against the absolute CPU target.
func reportFloor(b *testing.B, line *strings.Builder, stats []lagStats, cpu []float64, rate float64) {
	informer, raw := cpu[len(cpu)-2], cpu[len(cpu)-1]
	b.ReportMetric(cpu[0]/informer, "cpu_kube-cdc/informerB")
	b.ReportMetric(cpu[0]/raw, "cpu_kube-cdc/rawWatch")
	fmt.Fprintf(line, "; CPU kube-cdc/informer B %.2f (target <= 1.0: %s), kube-cdc/raw watch %.2f; p99 kube-cdc/raw watch %.2f",
		cpu[0]/informer, verdict(cpu[0] <= informer), cpu[0]/raw, ms(stats[0].p99)/ms(stats[len(stats)-1].p99))
	if rate == 200 {
		fmt.Fprintf(line, " (target CPU <= %.2f s per 1k at 200 writes/s: kube-cdc %s, informer B %s, raw watch %s)",
			cpuTarget, verdict(cpu[0] <= cpuTarget), verdict(informer <= cpuTarget), verdict(raw <= cpuTarget))
	}
}
