package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// LagProfileEnv names a directory: when set, the lag benchmarks serve the daemon's
// /debug/pprof (metrics.pprof) and save a CPU profile of each phase there, as
// lag-<sink>-<phase>.pprof, for `go tool pprof`.
const LagProfileEnv = "KUBE_CDC_BENCH_LAG_CPUPROFILE"

// withPprof turns on the daemon's metrics server with pprof, on a free port, when
// LagProfileEnv is set; it returns the config and the server's address ("" when off).
func withPprof(b *testing.B, config string) (string, string) {
	b.Helper()
	if os.Getenv(LagProfileEnv) == "" {
		return config, ""
	}
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	i := strings.Index(config, "metrics:\n")
	j := i + strings.Index(config[i:], "\nlog:")
	if i < 0 || j < i {
		b.Fatalf("no metrics section in the daemon's config:\n%s", config)
	}
	return config[:i] + fmt.Sprintf("metrics:\n  address: %q\n  pprof: true", addr) + config[j:], addr
}

// profilePhase CPU-profiles the daemon behind addr for dur into LagProfileEnv's
// directory; the returned func waits for the profile. No-op when addr is "".
func profilePhase(b *testing.B, addr, name string, dur time.Duration) (wait func()) {
	if addr == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(int(dur.Seconds()), 1))
		resp, err := http.Get(url)
		if err != nil {
			b.Errorf("cpu profile: %v", err)
			return
		}
		defer resp.Body.Close()
		dir := os.Getenv(LagProfileEnv)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Errorf("cpu profile: %v", err)
			return
		}
		path := filepath.Join(dir, "lag-"+name+".pprof")
		f, err := os.Create(path)
		if err != nil {
			b.Errorf("cpu profile: %v", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			b.Errorf("cpu profile: %v", err)
			return
		}
		fmt.Printf("bench: kube-cdc CPU profile in %s\n", path)
	}()
	return func() { <-done }
}

// ack is one write the apiserver acknowledged: the RV it returned and when the call returned.
type ack struct {
	rv int64
	at time.Time
}

// seenSet records when each RV was first seen in a sink.
type seenSet struct {
	mu       sync.Mutex
	at       map[int64]time.Time
	observed map[int64]time.Time // kube-cdc's ObservedAt: when its watch delivered the event
	last     time.Time
}

func newSeenSet() *seenSet {
	return &seenSet{at: map[int64]time.Time{}, observed: map[int64]time.Time{}}
}

// see records rv as visible at `at`; observed is the change's observed_at as kube-cdc
// stamped it (zero if unknown), which splits the lag into source and sink parts.
func (s *seenSet) see(rv int64, at, observed time.Time) {
	s.mu.Lock()
	if _, ok := s.at[rv]; !ok {
		s.at[rv] = at
		s.last = at
		if !observed.IsZero() {
			s.observed[rv] = observed
		}
	}
	s.mu.Unlock()
}

// split returns, per write, ack → observed by kube-cdc (apiserver watch delivery and
// decode) and observed → visible in the sink (batching, write, commit, polling).
func (s *seenSet) split(acks []ack) (source, sink []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range acks {
		o, ok := s.observed[a.rv]
		t, ok2 := s.at[a.rv]
		if ok && ok2 {
			source = append(source, max(o.Sub(a.at), 0))
			sink = append(sink, max(t.Sub(o), 0))
		}
	}
	return source, sink
}

// waitAll waits until every acked RV was seen; it returns how many are still missing.
func (s *seenSet) waitAll(acks []ack, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		s.mu.Lock()
		for _, a := range acks {
			if _, ok := s.at[a.rv]; !ok {
				missing++
			}
		}
		s.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lags is seen − acknowledged per write. A row can be seen before the Update call returned
// (the watch beat the HTTP response); those count as 0.
func (s *seenSet) lags(acks []ack) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(acks))
	for _, a := range acks {
		if t, ok := s.at[a.rv]; ok {
			out = append(out, max(t.Sub(a.at), 0))
		}
	}
	return out
}

// lagObjects creates n ConfigMaps in ns and returns them, for updateConfigMaps.
func makeLagObjects(b *testing.B, ns string, n int) []*corev1.ConfigMap {
	b.Helper()
	ctx := context.Background()
	if err := createConfigMaps(ctx, ns, n, 8, payload1K); err != nil {
		b.Fatal(err)
	}
	l, err := writer.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*corev1.ConfigMap, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// updateConfigMaps updates objs for dur with `workers` writers, each owning a disjoint
// subset. rate > 0 paces all writers together to rate writes/s; 0 writes as fast as the
// apiserver answers. It returns every acknowledged write.
func updateConfigMaps(b *testing.B, objs []*corev1.ConfigMap, workers int, rate float64, dur time.Duration) []ack {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var tokens chan struct{}
	if rate > 0 {
		tokens = make(chan struct{}, 10000)
		go func() {
			start := time.Now()
			sent := 0
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					close(tokens)
					return
				case now := <-t.C:
					// Catch up to rate × elapsed, so the average rate is exact.
					for due := int(now.Sub(start).Seconds() * rate); sent < due; sent++ {
						tokens <- struct{}{}
					}
				}
			}
		}()
	}
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	var errOnce sync.Once
	var werr error
	for w := range workers {
		var mine []int // indices into objs: each writer owns its objects, so no conflicts
		for i := w; i < len(objs); i += workers {
			mine = append(mine, i)
		}
		wg.Go(func() {
			var local []ack
			defer func() {
				mu.Lock()
				acks = append(acks, local...)
				mu.Unlock()
			}()
			for i := 0; ; i++ {
				if tokens != nil {
					if _, ok := <-tokens; !ok {
						return
					}
				} else if ctx.Err() != nil {
					return
				}
				j := mine[i%len(mine)]
				cm := objs[j]
				cm.Data["seq"] = strconv.Itoa(i)
				// Not the benchmark's ctx: a write in flight when it ends still counts.
				got, err := writer.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
				at := time.Now()
				if err != nil {
					errOnce.Do(func() { werr = err })
					return
				}
				rv, _ := strconv.ParseInt(got.ResourceVersion, 10, 64)
				local = append(local, ack{rv: rv, at: at})
				objs[j] = got
			}
		})
	}
	wg.Wait()
	if werr != nil {
		b.Fatalf("update: %v", werr)
	}
	return acks
}

// visibleAt is when a changes row became visible: its transaction's commit time
// (testenv's PostgreSQL tracks commit timestamps), the poll's time when unknown. A poll
// every 2 ms would otherwise add about 1 ms to every figure.
const visibleAt = `coalesce(pg_xact_commit_timestamp(xmin), clock_timestamp())`

// pollChanges records, every 2 ms on one connection, the first time each RV appears in
// kube_cdc.changes (ids above fromID), until ctx ends: when its row was committed.
func pollChanges(ctx context.Context, conn *pgx.Conn, fromID int64, seen *seenSet) error {
	// One stream writes these databases, so ids commit in order; the poll that also asks
	// again for ids skipped over costs nothing more when none are.
	return pollChangesWithGaps(ctx, conn, fromID, seen)
}

// lagPhase is one writer phase against a running daemon.
type lagPhase struct {
	name    string
	workers int
	rate    float64 // 0: as fast as the apiserver takes
	dur     time.Duration
	target  time.Duration // p99 target; 0: none
	p50     time.Duration // p50 target; 0: none
	pprof   string        // the daemon's pprof address, to profile the phase; "" off
	profile string        // the profile's name
}

type lagResult struct {
	stats    lagStats
	source   lagStats // ack → kube-cdc observed the event
	sink     lagStats // observed → visible
	writes   int
	wps      float64
	catchUp  time.Duration // last ack → last change seen
	cpuPer1k float64       // daemon CPU seconds per 1,000 changes during the phase
	switches float64       // the daemon's threads' context switches per change during the phase
	missing  int
}

func runLagPhase(b *testing.B, ph lagPhase, objs []*corev1.ConfigMap, seen *seenSet, pid int) lagResult {
	b.Helper()
	cpu0, sw0 := cpuNow(pid), switchesNow(pid)
	start := time.Now()
	profiled := profilePhase(b, ph.pprof, ph.profile, ph.dur)
	acks := updateConfigMaps(b, objs, ph.workers, ph.rate, ph.dur)
	profiled()
	writing := time.Since(start)
	lastAck := start
	for _, a := range acks {
		if a.at.After(lastAck) {
			lastAck = a.at
		}
	}
	missing := seen.waitAll(acks, 2*time.Minute)
	cpu, switches := cpuNow(pid)-cpu0, switchesNow(pid)-sw0
	seen.mu.Lock()
	catchUp := max(seen.last.Sub(lastAck), 0)
	seen.mu.Unlock()
	worst(b, acks, seen, start)
	src, snk := seen.split(acks)
	r := lagResult{source: summarize(src), sink: summarize(snk), stats: summarize(seen.lags(acks)), writes: len(acks), wps: float64(len(acks)) / writing.Seconds(),
		catchUp: catchUp, cpuPer1k: cpu / (float64(len(acks)) / 1000), switches: float64(switches) / float64(max(len(acks), 1)), missing: missing}
	if missing > 0 {
		b.Errorf("%d of %d acknowledged writes never reached the sink", missing, len(acks))
	}
	return r
}

func reportLag(b *testing.B, sink string, ph lagPhase, r lagResult) {
	b.ReportMetric(r.wps, "writes/s")
	b.ReportMetric(ms(r.stats.p50), "p50_ms")
	b.ReportMetric(ms(r.stats.p99), "p99_ms")
	b.ReportMetric(ms(r.stats.max), "max_ms")
	b.ReportMetric(ms(r.catchUp), "catchup_ms")
	b.ReportMetric(r.cpuPer1k, "cpu_s/1k_changes")
	b.ReportMetric(r.switches, "ctxsw/change")
	b.ReportMetric(0, "ns/op")
	line := fmt.Sprintf("%s lag, %s: %d writes in %v (%.0f writes/s, %d writers): ack→visible p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; catch-up after the last write %.1f ms; kube-cdc CPU %.3f s per 1k changes",
		sink, ph.name, r.writes, ph.dur, r.wps, ph.workers, ms(r.stats.p50), ms(r.stats.p90), ms(r.stats.p99), ms(r.stats.max), ms(r.catchUp), r.cpuPer1k) +
		fmt.Sprintf(" (%.1f context switches per change)", r.switches)
	if ph.target > 0 {
		b.ReportMetric(ms(r.stats.p99)/ms(ph.target), "p99/target")
		line += fmt.Sprintf(" (target p99 <= %v: %s)", ph.target, verdict(r.stats.p99 <= ph.target))
	}
	if ph.p50 > 0 {
		b.ReportMetric(ms(r.stats.p50)/ms(ph.p50), "p50/target")
		line += fmt.Sprintf(" (target p50 <= %v: %s)", ph.p50, verdict(r.stats.p50 <= ph.p50))
	}
	if ph.rate == 200 {
		line += fmt.Sprintf(" (target CPU <= %.2f s per 1k at 200 writes/s: %s)", cpuTarget, verdict(r.cpuPer1k <= cpuTarget))
	}
	b.Log(line)
	if r.source.n > 0 {
		b.ReportMetric(ms(r.source.p99), "source_p99_ms")
		b.ReportMetric(ms(r.sink.p99), "sink_p99_ms")
		b.Logf("  split: ack→observed by kube-cdc (watch delivery) p50 %.1f ms p99 %.1f ms max %.1f ms; observed→visible (batch, write, commit) p50 %.1f ms p99 %.1f ms max %.1f ms",
			ms(r.source.p50), ms(r.source.p99), ms(r.source.max), ms(r.sink.p50), ms(r.sink.p99), ms(r.sink.max))
	}
}

// Steady-state targets (issue 11): CPU per 1,000 changes at 200 writes/s, and p50 at a
// low rate with the default settings (adaptive batching writes a lone change at once).
const (
	cpuTarget  = 0.15
	lowRateP50 = 2 * time.Millisecond
)

// BenchmarkLagPostgres: time from the apiserver acknowledging an Update to its changes row
// being visible, at 200 writes/s and at the maximum rate the apiserver takes.
func BenchmarkLagPostgres(b *testing.B) {
	const ns = "bench-lag-pg"
	objs := makeLagObjects(b, ns, lagObjects)
	dsn := pg.NewDatabase(b)
	conn := connect(b, dsn)
	config, pprofAddr := withPprof(b, pgDaemonConfigLevel(dsn, ns, daemonLogLevel()))
	d := startDaemon(b, config)
	keepLog(b, d, "lag-postgres")
	waitSynced(b, conn, ns, lagObjects, 2*time.Minute, d)
	var fromID int64
	if err := conn.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&fromID); err != nil {
		b.Fatal(err)
	}
	seen := newSeenSet()
	ctx, cancel := context.WithCancel(context.Background())
	pollDone := make(chan error, 1)
	go func() { pollDone <- pollChanges(ctx, conn, fromID, seen) }()
	defer func() {
		cancel()
		if err := <-pollDone; err != nil {
			b.Errorf("poll changes: %v", err)
		}
		d.stop(b)
	}()
	b.Run("idle", func(b *testing.B) { reportIdle(b, "PostgreSQL", d.cmd.Process.Pid) })
	for _, ph := range []lagPhase{
		{name: "100 writes/s", workers: 4, rate: 100, dur: 20 * time.Second, p50: lowRateP50},
		{name: "200 writes/s", workers: 8, rate: 200, dur: 20 * time.Second, target: 50 * time.Millisecond},
		{name: "max rate", workers: 32, dur: 20 * time.Second},
	} {
		sub := "rate=max"
		if ph.rate > 0 {
			sub = fmt.Sprintf("rate=%.0f", ph.rate)
		}
		ph.pprof, ph.profile = pprofAddr, "postgres-"+strings.TrimPrefix(sub, "rate=")
		b.Run(sub, func(b *testing.B) {
			reportLag(b, "PostgreSQL", ph, runLagPhase(b, ph, objs, seen, d.cmd.Process.Pid))
		})
	}
}

// worst logs the slowest writes with when they were acknowledged (seconds into the phase),
// to tell periodic stalls from a steady queue.
func worst(b *testing.B, acks []ack, seen *seenSet, start time.Time) {
	type w struct {
		at, lag time.Duration
		rv      int64
	}
	var all []w
	seen.mu.Lock()
	for _, a := range acks {
		if t, ok := seen.at[a.rv]; ok {
			all = append(all, w{a.at.Sub(start), t.Sub(a.at), a.rv})
		}
	}
	seen.mu.Unlock()
	slices.SortFunc(all, func(x, y w) int { return cmp.Compare(y.lag, x.lag) })
	var sb strings.Builder
	for _, x := range all[:min(len(all), 12)] {
		fmt.Fprintf(&sb, " rv %d at +%.2fs lag %.0fms;", x.rv, x.at.Seconds(), ms(x.lag))
	}
	b.Logf("slowest writes:%s", sb.String())
}

// idleWindow is how long reportIdle watches a daemon with nothing to do.
const idleWindow = 10 * time.Second

// reportIdle reports the CPU the daemon behind pid uses with no change to stream (its
// timers, renewals, the runtime): paid whatever the rate, it is part of every phase's
// CPU per change, the larger the lower the rate.
func reportIdle(b *testing.B, sink string, pid int) {
	cpu0, start := cpuNow(pid), time.Now()
	time.Sleep(idleWindow) // the measurement is of this window: nothing to wait for
	perSec := (cpuNow(pid) - cpu0) / time.Since(start).Seconds()
	b.ReportMetric(1000*perSec, "idle_cpu_ms/s")
	b.ReportMetric(0, "ns/op")
	b.Logf("%s: kube-cdc idle, streaming nothing for %v: %.2f ms CPU per second (%.3f s per 1k changes at 200/s)",
		sink, idleWindow, 1000*perSec, perSec/0.2)
}

// switchesNow sums the voluntary and involuntary context switches of pid's threads. Most
// of a steady change's CPU on a virtual machine is threads sleeping and being woken
// (docs/benchmarks.md, "Issue 11, fourth pass"), so the count per change says where a CPU
// figure comes from. Threads that exit meanwhile take their counts with them: a slight
// undercount.
func switchesNow(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "voluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}
