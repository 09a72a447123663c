package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShareSecondsEnv sets each phase of BenchmarkDatabaseShare, in seconds (default 60).
const ShareSecondsEnv = "KUBE_CDC_BENCH_SHARE_SECONDS"

// shareObjects is how many of bench-sync's ConfigMaps the steady writes update.
const shareObjects = 400

// BenchmarkDatabaseShare: what kube-cdc's history costs the user's database, against a
// floor that keeps no history (issue 29). Both write into the durable PostgreSQL
// (production defaults, fsync on) a database each, after an initial sync of the 20k
// ConfigMaps of bench-sync; then paced Updates of shareObjects of them, at 100 and then
// at 200 writes/s, each rate with fresh arms:
//   - fresh: the first phase right after the initial sync, no ANALYZE by hand (what a new
//     install's first minute costs; autovacuum and the sink itself do as they do);
//   - analyzed: an ANALYZE of the whole database by hand, then the same writes again.
//
// The floor is a history-less mirror: one watch, one autocommit upsert of the object per
// change, prepared, with pgx (informerbaseline -raw). kube-cdc writes objects, changes
// (history), its checkpoint and the rest. For each phase: the PostgreSQL CPU per 1,000
// changes (the postmaster and all its processes from /proc, reaped backends included,
// less the backend that polls for the latency), WAL bytes per change, ack→committed
// latency (pg_xact_commit_timestamp), and the statements pg_stat_statements saw per
// change with their mean execution time and how often they were planned (a prepared
// statement is planned five times, then runs its cached generic plan). Targets: kube-cdc/floor ≤ 1.0 for PostgreSQL CPU per
// change and for p50 and p99; kube-cdc fresh/analyzed ≤ 1.2 for p50, p99 and CPU.
func BenchmarkDatabaseShare(b *testing.B) {
	syncFixture(b)
	dur := 60 * time.Second
	if v := os.Getenv(ShareSecondsEnv); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s <= 0 {
			b.Fatalf("%s=%q: want a number of seconds", ShareSecondsEnv, v)
		}
		dur = time.Duration(s) * time.Second
	}
	objs := shareTargets(b)
	db := durablePostgres(b)
	for i, rate := range []float64{100, 200} {
		b.Run(fmt.Sprintf("rate=%.0f", rate), func(b *testing.B) {
			arms := []string{"kube-cdc", "floor"}
			if i%2 == 1 { // alternate which arm goes first
				arms = []string{"floor", "kube-cdc"}
			}
			got := map[string][2]sharePhase{}
			for _, arm := range arms {
				got[arm] = runShareArm(b, db, arm, objs, rate, dur)
			}
			k, f := got["kube-cdc"], got["floor"]
			for p, phase := range []string{"fresh", "analyzed"} {
				cpu, p50, p99, wal := k[p].cpuPer1k/f[p].cpuPer1k, ms(k[p].lag.p50)/ms(f[p].lag.p50),
					ms(k[p].lag.p99)/ms(f[p].lag.p99), k[p].walPerChange/f[p].walPerChange
				b.ReportMetric(cpu, phase+"_pgcpu_kubecdc/floor")
				b.ReportMetric(p50, phase+"_p50_kubecdc/floor")
				b.ReportMetric(p99, phase+"_p99_kubecdc/floor")
				b.ReportMetric(wal, phase+"_wal_kubecdc/floor")
				b.Logf("%.0f writes/s, %s: kube-cdc/floor PostgreSQL CPU per change %.2f (target <= 1.0: %s), p50 %.2f (%s), p99 %.2f (%s), WAL per change %.2f",
					rate, phase, cpu, verdict(cpu <= 1.0), p50, verdict(p50 <= 1.0), p99, verdict(p99 <= 1.0), wal)
			}
			cpu, p50, p99 := k[0].cpuPer1k/k[1].cpuPer1k, ms(k[0].lag.p50)/ms(k[1].lag.p50), ms(k[0].lag.p99)/ms(k[1].lag.p99)
			b.ReportMetric(cpu, "kubecdc_pgcpu_fresh/analyzed")
			b.ReportMetric(p50, "kubecdc_p50_fresh/analyzed")
			b.ReportMetric(p99, "kubecdc_p99_fresh/analyzed")
			b.ReportMetric(0, "ns/op")
			ok := cpu <= 1.2 && p50 <= 1.2 && p99 <= 1.2
			b.Logf("%.0f writes/s: kube-cdc fresh/analyzed PostgreSQL CPU per change %.2f, p50 %.2f, p99 %.2f (target each <= 1.2: %s)",
				rate, cpu, p50, p99, verdict(ok))
		})
	}
}

// sharePhase is what one phase of one arm cost the database.
type sharePhase struct {
	writes       int
	lag          lagStats
	cpuPer1k     float64 // PostgreSQL CPU seconds per 1,000 changes
	walPerChange float64 // bytes
	statements   float64 // statements per change (pg_stat_statements, the arm's database)
	top          string  // the costliest statements: calls per change, mean time
}

// shareTargets returns shareObjects ConfigMaps of bench-sync, for updateConfigMaps.
func shareTargets(b *testing.B) []*corev1.ConfigMap {
	b.Helper()
	l, err := writer.CoreV1().ConfigMaps(syncNS).List(context.Background(), metav1.ListOptions{Limit: shareObjects})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*corev1.ConfigMap, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// runShareArm starts arm ("kube-cdc" or "floor") into a fresh database of db, waits for its
// initial sync of bench-sync, and runs the fresh and the analyzed phase at rate.
func runShareArm(b *testing.B, db *durablePG, arm string, objs []*corev1.ConfigMap, rate float64, dur time.Duration) [2]sharePhase {
	b.Helper()
	ctx := context.Background()
	dsn := db.newDatabase(b)
	conn := connect(b, dsn)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("pg_stat_statements (the durable server preloads it): %v", err)
	}
	var d *daemon
	var poll func(context.Context, *pgx.Conn, *seenSet) error
	syncStart := time.Now()
	if arm == "kube-cdc" {
		d = startDaemon(b, pgDaemonConfigLevel(dsn, syncNS, daemonLogLevel()))
		waitSynced(b, conn, syncNS, syncObjs, 5*time.Minute, d)
		var fromID int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&fromID); err != nil {
			b.Fatal(err)
		}
		poll = func(ctx context.Context, c *pgx.Conn, s *seenSet) error { return pollChanges(ctx, c, fromID, s) }
	} else {
		d = startInformer(b, syncNS, "-raw=true", "-dsn", dsn)
		fromRV := waitInformerRows(b, conn, syncObjs, d)
		poll = func(ctx context.Context, c *pgx.Conn, s *seenSet) error { return pollInformerRows(ctx, c, fromRV, s) }
	}
	b.Logf("%s: initial sync of %d ConfigMaps into a new database in %v", arm, syncObjs, time.Since(syncStart).Round(time.Millisecond))
	defer func() {
		d.stop(b)
		conn.Close(ctx)
		dropDatabase(b, db, dsn)
	}()
	var out [2]sharePhase
	for p, phase := range []string{"fresh", "analyzed"} {
		if phase == "analyzed" {
			if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
				b.Fatal(err)
			}
		}
		out[p] = runSharePhase(b, db, dsn, poll, objs, rate, dur)
		r := out[p]
		b.Logf("%s, %.0f writes/s, %s: %d writes; ack→committed p50 %.2f ms, p90 %.2f ms, p99 %.2f ms; PostgreSQL CPU %.3f s per 1k changes; WAL %.0f bytes per change; %.2f statements per change:%s",
			arm, rate, phase, r.writes, ms(r.lag.p50), ms(r.lag.p90), ms(r.lag.p99), r.cpuPer1k, r.walPerChange, r.statements, r.top)
		b.ReportMetric(r.cpuPer1k, arm+"_"+phase+"_pgcpu_s/1k")
		b.ReportMetric(r.walPerChange, arm+"_"+phase+"_wal_B/change")
		b.ReportMetric(ms(r.lag.p50), arm+"_"+phase+"_p50_ms")
		b.ReportMetric(ms(r.lag.p99), arm+"_"+phase+"_p99_ms")
	}
	return out
}

// runSharePhase makes dur of paced Updates at rate while poll records when each became
// visible, and measures what they cost the database.
func runSharePhase(b *testing.B, db *durablePG, dsn string, poll func(context.Context, *pgx.Conn, *seenSet) error,
	objs []*corev1.ConfigMap, rate float64, dur time.Duration) sharePhase {
	b.Helper()
	ctx := context.Background()
	stats := connect(b, dsn)
	defer stats.Close(ctx)
	pollConn := connect(b, dsn)
	defer pollConn.Close(ctx)
	var pollPID, statsPID int
	if err := pollConn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pollPID); err != nil {
		b.Fatal(err)
	}
	if err := stats.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&statsPID); err != nil {
		b.Fatal(err)
	}
	var lsn0 string
	if err := stats.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text FROM pg_stat_statements_reset()`).Scan(&lsn0); err != nil {
		b.Fatal(err)
	}
	seen := newSeenSet()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- poll(pctx, pollConn, seen) }()
	// The database's CPU: the postmaster's tree less the two backends of this benchmark.
	pgCPU := func() float64 {
		return treeCPU(db.cmd.Process.Pid, childrenOf()) - cpuNow(pollPID) - cpuNow(statsPID)
	}
	cpu0 := pgCPU()
	acks := updateConfigMaps(b, objs, int(rate/25), rate, dur)
	missing := seen.waitAll(acks, 2*time.Minute)
	cpu := pgCPU() - cpu0
	cancel()
	if err := <-done; err != nil {
		b.Errorf("poll: %v", err)
	}
	if missing > 0 {
		b.Errorf("%d of %d acknowledged writes never reached the database", missing, len(acks))
	}
	n := float64(len(acks))
	r := sharePhase{writes: len(acks), lag: summarize(seen.lags(acks)), cpuPer1k: cpu / (n / 1000)}
	var wal float64
	if err := stats.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	r.walPerChange = wal / n
	// The arm's statements, not this benchmark's polls and looks.
	rows, err := stats.Query(ctx, `SELECT calls, plans, mean_exec_time, mean_plan_time, regexp_replace(left(query, 70), '\s+', ' ', 'g')
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_xact_commit_timestamp%' AND query NOT LIKE '%pg_stat_statements%'
		  AND query NOT LIKE '%pg_current_wal_lsn%' AND query NOT LIKE '%pg_backend_pid%'
		ORDER BY calls * mean_exec_time + plans * mean_plan_time DESC`)
	if err != nil {
		b.Fatal(err)
	}
	var top strings.Builder
	var calls, plans int64
	var mean, plan float64
	var query string
	i := 0
	if _, err := pgx.ForEachRow(rows, []any{&calls, &plans, &mean, &plan, &query}, func() error {
		r.statements += float64(calls) / n
		if i < 4 {
			fmt.Fprintf(&top, " [%.2f/change, exec %.3f ms; planned %d times, %.3f ms each] %s;", float64(calls)/n, mean, plans, plan, query)
		}
		i++
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	r.top = top.String()
	return r
}

// dropDatabase drops the database of dsn, so its autovacuum does not run in a later arm's
// window.
func dropDatabase(b *testing.B, db *durablePG, dsn string) {
	name := dsn[strings.LastIndex(dsn, "/")+1:]
	name, _, _ = strings.Cut(name, "?")
	conn, err := pgx.Connect(context.Background(), db.dsn("postgres"))
	if err != nil {
		b.Errorf("drop %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		b.Errorf("drop %s: %v", name, err)
	}
}
