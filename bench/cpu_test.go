package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkLagAdaptiveBatching: the same stream of Updates, at 100 and then 200 writes/s,
// followed at once by two kube-cdc processes, each into a database of its own: one at the
// default settings (adaptive batching: a lone change is written at once, batches form
// while a write is in flight), one with `pipeline.maxWait: 10ms` (the former default: a
// change waits up to 10 ms for company). Both see the very same writes on the same loaded
// machine, so their ratios are fair even when the absolute figures are not. Reported per
// rate: each one's ack→visible p50/p99 and CPU per 1,000 changes, and adaptive/10ms.
// With BaselineBinEnv set, a third process runs that binary at its defaults on the same
// writes (before/after a change, under the same load). Last, the floor arms (floorArms: the
// hand-written informer and a raw watch, one upsert per event) follow the same writes.
// Targets: adaptive p50 ≤ 2 ms at 100 writes/s, its CPU per change not above the 10 ms
// batcher's (ratio ≤ 1.0; the noise between two processes is a few percent) nor the
// hand-written informer's (bench/floor_test.go).
func BenchmarkLagAdaptiveBatching(b *testing.B) {
	const ns = "bench-lag-batching"
	objs := makeLagObjects(b, ns, lagObjects)
	var arms []*lagArm
	ctx, cancel := context.WithCancel(context.Background())
	var polls []chan error
	type config struct{ name, bin, extra string }
	configs := []config{
		{"adaptive", daemonBin, ""},
		{"maxWait=10ms", daemonBin, "pipeline:\n  maxWait: 10ms\n"},
	}
	if bin := os.Getenv(BaselineBinEnv); bin != "" {
		configs = append(configs, config{"baseline", bin, ""})
	}
	for _, a := range configs {
		dsn := pg.NewDatabase(b)
		conn := connect(b, dsn)
		d := startDaemonBin(b, a.bin, pgDaemonConfigLevel(dsn, ns, daemonLogLevel())+a.extra)
		waitSynced(b, conn, ns, lagObjects, 2*time.Minute, d)
		var fromID int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&fromID); err != nil {
			b.Fatal(err)
		}
		ar := &lagArm{name: a.name, d: d, seen: newSeenSet()}
		arms = append(arms, ar)
		done := make(chan error, 1)
		polls = append(polls, done)
		go func() { done <- pollChanges(ctx, conn, fromID, ar.seen) }()
	}
	for _, f := range floorArms { // one upsert per event
		dsn := pg.NewDatabase(b)
		conn := connect(b, dsn)
		d := startInformer(b, ns, f.flag, "-dsn", dsn)
		fromRV := waitInformerRows(b, conn, lagObjects, d)
		ar := &lagArm{name: f.name, d: d, seen: newSeenSet()}
		arms = append(arms, ar)
		done := make(chan error, 1)
		polls = append(polls, done)
		go func() { done <- pollInformerRows(ctx, conn, fromRV, ar.seen) }()
	}
	defer func() {
		cancel()
		for _, p := range polls {
			if err := <-p; err != nil {
				b.Errorf("poll changes: %v", err)
			}
		}
		for _, a := range arms {
			a.d.stop(b)
		}
	}()
	for _, rate := range []float64{100, 200} {
		b.Run(fmt.Sprintf("rate=%.0f", rate), func(b *testing.B) {
			stats, cpu, line := runArms(b, arms, "sink", rate, func() []ack {
				return updateConfigMaps(b, objs, int(rate/25), rate, 20*time.Second)
			})
			ratio := cpu[0] / cpu[1]
			b.ReportMetric(ratio, "cpu_adaptive/10ms")
			b.ReportMetric(ms(stats[0].p50)/ms(stats[1].p50), "p50_adaptive/10ms")
			b.ReportMetric(0, "ns/op")
			fmt.Fprintf(line, " CPU adaptive/10ms %.2f (target <= 1.0: %s)", ratio, verdict(ratio <= 1.0))
			if len(arms) > 4 {
				fmt.Fprintf(line, "; this tree/baseline binary: CPU %.2f, p50 %.2f, p99 %.2f", cpu[0]/cpu[2],
					ms(stats[0].p50)/ms(stats[2].p50), ms(stats[0].p99)/ms(stats[2].p99))
				b.ReportMetric(cpu[0]/cpu[2], "cpu_adaptive/baseline")
			}
			reportFloor(b, line, stats, cpu, rate)
			if rate == 100 {
				fmt.Fprintf(line, "; adaptive p50 target <= %v: %s", lowRateP50, verdict(stats[0].p50 <= lowRateP50))
			}
			b.Log(line.String())
		})
	}
}

// lagArm is one daemon of a side-by-side lag benchmark: all follow the same writes.
type lagArm struct {
	name string
	d    *daemon
	seen *seenSet
}

// runArms makes the writes at rate (write returns their acknowledgements) and waits until every
// arm has seen them in its sink; it returns each arm's lag figures and CPU per 1k writes,
// reported as metrics and begun as a log line.
func runArms(b *testing.B, arms []*lagArm, sink string, rate float64, write func() []ack) ([]lagStats, []float64, *strings.Builder) {
	b.Helper()
	cpu0 := make([]float64, len(arms))
	for i, a := range arms {
		cpu0[i] = cpuNow(a.d.cmd.Process.Pid)
	}
	acks := write()
	stats := make([]lagStats, len(arms))
	cpu := make([]float64, len(arms))
	line := &strings.Builder{}
	fmt.Fprintf(line, "%d writes at %.0f/s;", len(acks), rate)
	for i, a := range arms {
		if missing := a.seen.waitAll(acks, 2*time.Minute); missing > 0 {
			b.Errorf("%s: %d of %d acknowledged writes never reached the %s", a.name, missing, len(acks), sink)
		}
		cpu[i] = (cpuNow(a.d.cmd.Process.Pid) - cpu0[i]) / (float64(len(acks)) / 1000)
		stats[i] = summarize(a.seen.lags(acks))
		b.ReportMetric(ms(stats[i].p50), a.name+"_p50_ms")
		b.ReportMetric(ms(stats[i].p99), a.name+"_p99_ms")
		b.ReportMetric(cpu[i], a.name+"_cpu_s/1k")
		fmt.Fprintf(line, " %s: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, CPU %.3f s per 1k;", a.name,
			ms(stats[i].p50), ms(stats[i].p90), ms(stats[i].p99), cpu[i])
	}
	return stats, cpu, line
}
