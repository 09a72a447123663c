package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/bench/internal/historygen"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/read/ui"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// historyRows is the size of the generated history: 10M (issue 22), or
// KUBE_CDC_BENCH_HISTORY_ROWS for a quicker run.
func historyRows() int {
	if n, err := strconv.Atoi(os.Getenv("KUBE_CDC_BENCH_HISTORY_ROWS")); err == nil && n > 0 {
		return n
	}
	return 10_000_000
}

// historyDSNEnv names a database BenchmarkHistoryAtScale reads instead of a new one: it
// migrates it, fills it once (when its changes table is empty) and keeps it, so that a
// read can be measured again and again without the 10-minute fill (a developer's loop;
// the figures of record come from a fresh database).
const historyDSNEnv = "KUBE_CDC_BENCH_HISTORY_DSN"

// historyOnlyEnv, a regular expression, keeps the queries whose names it matches.
const historyOnlyEnv = "KUBE_CDC_BENCH_HISTORY_ONLY"

// historyQuery is one named query of the history benchmark: add a row for each new
// query over changes (as_of, the web UI's feeds) and it is measured beside the others.
type historyQuery struct {
	name string
	sql  string
	args func(r *rand.Rand) []any
	page func(r *rand.Rand) string // instead of sql: a web UI path, served by internal/read/ui's handler (server time)
	// instead of sql: `kube-cdc history`'s read of one object, the store's History (one cluster).
	history func(r *rand.Rand) store.HistoryQuery
	// instead of sql: `kube-cdc why`'s read (store.Why, one cluster).
	why    func(r *rand.Rand) store.WhyQuery
	runs   int
	target time.Duration // p99 goal; 0 for none
	again  bool          // timed a second time, warm, once every query has run
}

// auditedNamespaces of cluster-0 have an audit event for every change (historygen).
const auditedNamespaces = 4

var historyQueries = []historyQuery{
	{name: "history() of one object", runs: 300, target: 10 * time.Millisecond, again: true,
		sql: `SELECT count(*) FROM kube_cdc.history('configmaps', $1, $2)`,
		args: func(r *rand.Rand) []any {
			return []any{historygen.Namespace(auditedNamespaces + r.IntN(40-auditedNamespaces)), historygen.Object(r.IntN(1000))}
		}},
	// The same where cluster-0's versions (a third) were each made by a write audited at
	// RequestResponse: their actors are joined exactly.
	{name: "history(), cluster-0's versions audited", runs: 100, target: 10 * time.Millisecond, again: true,
		sql: `SELECT count(*) FROM kube_cdc.history('configmaps', $1, $2)`,
		args: func(r *rand.Rand) []any {
			return []any{historygen.Namespace(r.IntN(auditedNamespaces)), historygen.Object(r.IntN(1000))}
		}},
	{name: "changes of a namespace in the last hour", runs: 50, target: 100 * time.Millisecond,
		sql: `SELECT id, cluster, name, op, resource_version, observed_at, object FROM kube_cdc.changes
			WHERE namespace = $1 AND observed_at > now() - interval '1 hour' ORDER BY id`,
		args: func(r *rand.Rand) []any { return []any{historygen.Namespace(r.IntN(40))} }},
	// Issue 22: a namespace of 1,000 ConfigMaps as it was at a moment of the last year.
	{name: "as_of of a 1,000-object namespace", runs: 20, target: 500 * time.Millisecond,
		sql: `SELECT count(*) FROM kube_cdc.as_of(now() - $1 * interval '1 day', 'configmaps', $2, $3)`,
		args: func(r *rand.Rand) []any {
			return []any{1 + r.IntN(330), historygen.Namespace(r.IntN(40)), historygen.Cluster(r.IntN(3))}
		}},
	// Issue 23: the web UI's feed, the whole page as its handler serves it.
	{name: "UI feed: first page", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string { return "/?cluster=" + historygen.Cluster(r.IntN(3)) }},
	{name: "UI feed: a namespace, last 24h", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string {
			return "/?range=24h&cluster=" + historygen.Cluster(r.IntN(3)) + "&ns=" + historygen.Namespace(r.IntN(40))
		}},
	// A name is a part of one by default (a bounded search of the range); =NAME is the exact name, read through an index.
	{name: "UI feed: a name's part, last 30d", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string {
			return "/?range=30d&cluster=" + historygen.Cluster(r.IntN(3)) + "&name=" + historygen.Object(r.IntN(1000))
		}},
	{name: "UI feed: an exact name, last 30d", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string {
			return "/?range=30d&cluster=" + historygen.Cluster(r.IntN(3)) + "&name=%3D" + historygen.Object(r.IntN(1000))
		}},
	{name: "UI feed: deletes, last 24h", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string { return "/?range=24h&op=delete&cluster=" + historygen.Cluster(r.IntN(3)) }},
	// Issue 29: an object's page (~83 versions, each diffed in Go) and `kube-cdc
	// history`'s read of it, both of one cluster, both one read of object_versions() as
	// history() is.
	{name: "UI object page", runs: 30, target: 50 * time.Millisecond, again: true,
		page: func(r *rand.Rand) string {
			return "/object?resource=configmaps&cluster=" + historygen.Cluster(r.IntN(3)) + "&ns=" + historygen.Namespace(r.IntN(40)) +
				"&name=" + historygen.Object(r.IntN(1000))
		}},
	// Issue 31: the lanes of the newest 24 h (500 lanes a page, one cluster), and what
	// changed before a pod broke (whyPod: it reads 20 ConfigMaps and sits on a node), as
	// `kube-cdc why` reads it and as the web UI's page shows it with diffs, at a moment of
	// the last 30 days.
	{name: "UI lanes: 500 objects, last 24h", runs: 30, target: 300 * time.Millisecond,
		page: func(r *rand.Rand) string { return "/lanes?range=24h&cluster=" + historygen.Cluster(r.IntN(3)) }},
	{name: "kube-cdc why's read of a pod (30 min)", runs: 100, target: 200 * time.Millisecond,
		why: func(r *rand.Rand) store.WhyQuery {
			return store.WhyQuery{Resource: "pods", Namespace: whyPodNamespace, Name: whyPodName,
				At: time.Now().Add(-time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))}
		}},
	{name: "UI why page of a pod (30 min, diffs)", runs: 30, target: 200 * time.Millisecond,
		page: func(r *rand.Rand) string {
			at := time.Now().Add(-time.Duration(r.Int64N(int64(30 * 24 * time.Hour)))).UTC().Format(time.RFC3339Nano)
			return "/why?resource=pods&cluster=" + historygen.Cluster(0) + "&ns=" + whyPodNamespace + "&name=" + whyPodName + "&at=" + at
		}},
	{name: "kube-cdc history's read of one object", runs: 100, target: 10 * time.Millisecond, again: true,
		history: func(r *rand.Rand) store.HistoryQuery {
			return store.HistoryQuery{Resource: "configmaps", Namespace: historygen.Namespace(r.IntN(40)), Name: historygen.Object(r.IntN(1000))}
		}},
}

func BenchmarkHistoryAtScale(b *testing.B) {
	for range b.N {
		historyAtScale(b)
	}
}

func historyAtScale(b *testing.B) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dsn, reused := os.Getenv(historyDSNEnv), true
	if dsn == "" {
		dsn, reused = pg.NewDatabase(b), false
	}
	sink, err := postgres.New(ctx, "warehouse", historygen.Cluster(0), postgres.Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	conn := connect(b, dsn)
	var held int64
	if reused {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM kube_cdc.changes LIMIT 1) c`).Scan(&held); err != nil {
			b.Fatal(err)
		}
	}
	if held == 0 {
		gen, err := historygen.Generate(ctx, conn, "kube_cdc", historygen.Options{Rows: historyRows(), AuditedNamespaces: auditedNamespaces})
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("bench: history: generated %d changes rows (%d objects, 3 clusters, 12 months, %d audit events): COPY %v, %d indexes built after it %v, VACUUM (ANALYZE) %v; load average %s\n",
			gen.Options.Rows, gen.Objects, gen.AuditEvents, gen.Load.Round(time.Millisecond), len(gen.Indexes), gen.Reindex.Round(time.Millisecond), gen.Analyze.Round(time.Millisecond), loadavg())
	} else {
		var newest time.Time
		if err := conn.QueryRow(ctx, `SELECT max(observed_at) FROM kube_cdc.changes`).Scan(&newest); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("bench: history: reusing the history %s holds (newest change %v ago: the \"last hour\" and \"last 24h\" reads see less of it); no retention run\n",
			historyDSNEnv, time.Since(newest).Round(time.Second))
	}

	addWhyPod(b, conn)

	// The UI's store, and `kube-cdc history`'s own, as the commands open them.
	opts := store.Options{DSN: dsn, Schema: "kube_cdc", Cluster: historygen.Cluster(0), Sink: "warehouse",
		VerifySchema: postgres.VerifySchema, Ping: true}
	uiStore, err := ui.Connect(ctx, opts, true)
	if err != nil {
		b.Fatal(err)
	}
	defer uiStore.Close()
	reader, err := store.Open(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	web, err := ui.New(ui.Options{Store: uiStore, Cluster: historygen.Cluster(0), Log: log})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	only, err := regexp.Compile(os.Getenv(historyOnlyEnv))
	if err != nil {
		b.Fatalf("%s: %v", historyOnlyEnv, err)
	}
	// Each query's reads are kept, so that the reads of one object (history(), the object
	// page, `kube-cdc history`) are timed again once every query has run: the first pass
	// reads what the fill left in the caches (on this machine most heap pages come from the
	// disk), the second the same objects warm.
	replays := map[string][]func() error{}
	for _, q := range historyQueries {
		if !only.MatchString(q.name) {
			continue
		}
		var took []time.Duration
		for range q.runs {
			read := historyRead(ctx, q, r, reader, web, conn)
			start := time.Now()
			if err := read(); err != nil {
				b.Fatalf("%s: %v", q.name, err)
			}
			took = append(took, time.Since(start))
			if q.again {
				replays[q.name] = append(replays[q.name], read)
			}
		}
		printHistoryQuery(q, "", took)
	}
	for _, q := range historyQueries {
		var took []time.Duration
		for _, read := range replays[q.name] {
			start := time.Now()
			if err := read(); err != nil {
				b.Fatalf("%s, again: %v", q.name, err)
			}
			took = append(took, time.Since(start))
		}
		if len(took) > 0 {
			printHistoryQuery(q, ", again (warm)", took)
		}
	}
	fmt.Printf("bench: history: the queries above at load average %s\n", loadavg())

	if reused { // the retention below would drop a month of the history kept for the next run
		return
	}
	// Retention of the oldest month while a writer sends 200 changes/s; every cluster
	// keeps 11 months, so the month is dropped whole.
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.retention (cluster, keep)
		SELECT 'cluster-' || g, interval '330 days' FROM generate_series(0, 2) g
		ON CONFLICT (cluster) DO UPDATE SET keep = excluded.keep`); err != nil {
		b.Fatal(err)
	}
	quiet := steadyWrites(b, sink, 10*time.Second, nil)
	now := time.Now().UTC()
	cutoff := time.Date(now.Year(), now.Month()-11, 1, 0, 0, 0, 0, time.UTC)
	var ret schema.RetentionResult
	var retTook time.Duration
	busy := steadyWrites(b, sink, 10*time.Second, func() {
		start := time.Now()
		var err error
		ret, err = sink.Retain(ctx, cutoff)
		retTook = time.Since(start)
		if err != nil {
			b.Error(err)
		}
	})
	fmt.Printf("bench: history: retention of one month: %v (dropped %v, %d rows deleted one by one) (target ≤ 1s: %s)\n",
		retTook.Round(time.Millisecond), ret.Dropped, ret.Deleted, verdict(retTook <= time.Second))
	// A second quiet window after it: the machine's own drift between the windows shows.
	after := steadyWrites(b, sink, 10*time.Second, nil)
	base := (pct(quiet, 99) + pct(after, 99)) / 2
	ratio := float64(pct(busy, 99)) / float64(base)
	fmt.Printf("bench: history: 200 changes/s write latency p99: %v before, %v with the retention, %v after: %.2f× the quiet windows' mean (target ≤ 1.2×: %s); load average %s\n",
		pct(quiet, 99).Round(10*time.Microsecond), pct(busy, 99).Round(10*time.Microsecond), pct(after, 99).Round(10*time.Microsecond),
		ratio, verdict(ratio <= 1.2), loadavg())

}

// historyRead is one read of q with arguments drawn from r, to be timed (and repeated).
func historyRead(ctx context.Context, q historyQuery, r *rand.Rand, reader *store.Store, web http.Handler, conn *pgx.Conn) func() error {
	switch {
	case q.why != nil:
		wq := q.why(r)
		return func() error { _, err := reader.Why(ctx, wq); return err }
	case q.history != nil:
		hq := q.history(r)
		return func() error { _, err := reader.History(ctx, hq); return err }
	case q.page != nil:
		path := q.page(r)
		return func() error {
			rec := httptest.NewRecorder()
			web.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK {
				return fmt.Errorf("%s: %d\n%s", path, rec.Code, rec.Body)
			}
			return nil
		}
	}
	args := q.args(r)
	return func() error {
		rows, err := conn.Query(ctx, q.sql, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		return rows.Err()
	}
}

func printHistoryQuery(q historyQuery, pass string, took []time.Duration) {
	p50, p99 := pct(took, 50), pct(took, 99)
	target := "no target"
	if q.target > 0 {
		target = fmt.Sprintf("target p99 ≤ %v: %s", q.target, verdict(p99 <= q.target))
	}
	fmt.Printf("bench: history: %-62s p50 %8v  p99 %8v  (%s)\n", q.name+pass, p50.Round(10*time.Microsecond),
		p99.Round(10*time.Microsecond), target)
}

// BenchmarkHistoryRelistWrite writes the same relist batch (20,000 ~1.3 KB snapshots)
// into a fresh partitioned changes (every migration) and a fresh unpartitioned one (the
// migrations before 012), alternating, historyRelistRounds times each: the medians'
// ratio is the partitioned table's relative write throughput (target ≥ 0.95×).
func BenchmarkHistoryRelistWrite(b *testing.B) {
	for range b.N {
		var part, plain []time.Duration
		for range historyRelistRounds {
			plain = append(plain, relistInto(b, false))
			part = append(part, relistInto(b, true))
		}
		mp, mu := pct(part, 50), pct(plain, 50)
		fmt.Printf("bench: history: relist of 20,000 ~1.3 KB objects: partitioned %v, unpartitioned %v (medians of %d; all: %v / %v): throughput %.2f× (target ≥ 0.95×: %s); load average %s\n",
			mp.Round(time.Millisecond), mu.Round(time.Millisecond), historyRelistRounds, roundAll(part), roundAll(plain),
			float64(mu)/float64(mp), verdict(float64(mu)/float64(mp) >= 0.95), loadavg())
	}
}

const historyRelistRounds = 5

// steadyWrites writes one change every 5 ms (200/s) for d through sink and returns each
// Write's latency; during, when not nil, runs once a second into it (d 0: the writes
// stop when during returns).
func steadyWrites(b *testing.B, sink *postgres.Sink, d time.Duration, during func()) []time.Duration {
	ctx := context.Background()
	res := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	end := time.Now().Add(d)
	var done atomic.Bool
	if d == 0 { // until during has run
		end = time.Now().Add(24 * time.Hour)
		during0 := during
		during = func() { during0(); done.Store(true) }
	}
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Second)
			during()
		}()
	}
	var took []time.Duration
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; time.Now().Before(end) && !done.Load(); i++ {
		<-tick.C
		rv := change.RV(time.Now().UnixNano())
		c := change.Change{Cluster: historygen.Cluster(0), Resource: res, Key: change.Key{Namespace: "live", Name: fmt.Sprintf("cm-%d", i%200)},
			UID: "u", RV: rv, Op: change.OpUpdate, Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","data":{"pad":"` + strings.Repeat("x", 1000) + `"}}`),
			Labels: json.RawMessage(`{}`), ObservedAt: time.Now()}
		start := time.Now()
		if err := sink.Write(ctx, change.Batch{Resource: res, Changes: []change.Change{c}, Checkpoint: rv}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	wg.Wait()
	return took
}

// relistInto writes one relist batch of 20,000 ~1.3 KB snapshots into a fresh schema,
// partitioned (every migration) or not (the migrations before 012), and returns the
// Write's time.
func relistInto(b *testing.B, partitioned bool) time.Duration {
	if partitioned {
		return relistBefore(b, "")
	}
	return relistBefore(b, "012_partitions")
}

// relistBefore is relistInto into a schema of the migrations before stop (every one when
// stop is "").
func relistBefore(b *testing.B, stop string) time.Duration {
	ctx := context.Background()
	dsn := pg.NewDatabase(b)
	if stop != "" {
		migrateBefore(b, dsn, stop)
	}
	sink, err := postgres.New(ctx, "warehouse", "bench", postgres.Options{DSN: dsn, Migrate: stop == ""}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	res := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	batch := change.Batch{Resource: res, Checkpoint: 30000}
	pad := strings.Repeat("x", 1000)
	for i := range 20000 {
		batch.Changes = append(batch.Changes, change.Change{Cluster: "bench", Resource: res,
			Key: change.Key{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}, UID: fmt.Sprintf("uid-%d", i), RV: change.RV(10 + i),
			Op: change.OpCreate, Snapshot: true, ListRV: 30000, ObservedAt: time.Now(),
			Object: json.RawMessage(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"ns"},"data":{"pad":%q}}`, i, pad)),
			Labels: json.RawMessage(`{}`)})
	}
	start := time.Now()
	if err := sink.Write(ctx, batch); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// pct is percentile over an unsorted slice.
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, float64(p)/100)
}

// migrationRows is the size of the unpartitioned changes BenchmarkPartitionChanges
// migrates: 1M (issue 22), or KUBE_CDC_BENCH_MIGRATION_ROWS.
func migrationRows() int {
	if n, err := strconv.Atoi(os.Getenv("KUBE_CDC_BENCH_MIGRATION_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// BenchmarkPartitionChanges measures `kube-cdc migrate --partition-changes` on an
// unpartitioned changes of migrationRows() rows while a sink writes 200 changes/s into
// it: each step's time, the time under an exclusive lock, and the writes' latency.
// Beside it, the automatic migration of a table at its copy limit (100,000 rows), whose
// whole transaction holds the lock.
func BenchmarkPartitionChanges(b *testing.B) {
	for range b.N {
		ctx := context.Background()
		dsn := pg.NewDatabase(b)
		applyMigrationsBefore012(b, dsn)
		conn := connect(b, dsn)
		gen, err := historygen.Generate(ctx, conn, "kube_cdc", historygen.Options{Rows: migrationRows()})
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("bench: migration: %d unpartitioned changes rows generated in %v; load average %s\n", gen.Options.Rows,
			(gen.Load + gen.Reindex + gen.Analyze).Round(time.Millisecond), loadavg())
		sink, err := postgres.New(ctx, "warehouse", historygen.Cluster(0), postgres.Options{DSN: dsn, Migrate: false}, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		var steps []schema.PartitionStep
		var total time.Duration
		writes := steadyWrites(b, sink, 0, func() {
			start := time.Now()
			if _, err := schema.PartitionChanges(ctx, dsn, "kube_cdc", func(st schema.PartitionStep) { steps = append(steps, st) }); err != nil {
				b.Error(err)
			}
			total = time.Since(start)
		})
		sink.Close()
		var exclusive time.Duration
		for _, st := range steps {
			lock := ""
			if st.Exclusive {
				exclusive += st.Took
				lock = "  (exclusive lock)"
			}
			fmt.Printf("bench: migration:   %-75s %v%s\n", st.Name, st.Took.Round(time.Millisecond), lock)
		}
		fmt.Printf("bench: migration: --partition-changes of %d rows: %v in all, %v under exclusive locks; %d writes at 200/s meanwhile: p50 %v, p99 %v, max %v\n",
			gen.Options.Rows, total.Round(time.Millisecond), exclusive.Round(time.Millisecond), len(writes),
			pct(writes, 50).Round(10*time.Microsecond), pct(writes, 99).Round(10*time.Microsecond), pct(writes, 100).Round(time.Millisecond))

		// The automatic migration at its limit: one transaction, the lock held throughout.
		dsn = pg.NewDatabase(b)
		applyMigrationsBefore012(b, dsn)
		conn = connect(b, dsn)
		if _, err := historygen.Generate(ctx, conn, "kube_cdc", historygen.Options{Rows: 100_000}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := schema.Migrate(ctx, dsn, "kube_cdc"); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("bench: migration: automatic migration 012 copying 100,000 rows: %v (all of it under an exclusive lock)\n",
			time.Since(start).Round(time.Millisecond))
	}
}

// applyMigrationsBefore012 builds the schema as it was before changes was partitioned.
func applyMigrationsBefore012(b *testing.B, dsn string) {
	migrateBefore(b, dsn, "012_partitions")
}

// migrateBefore builds the schema of the migrations before stop, plus the two columns
// this build's sink writes (migration 017: changes.changed, objects.in_changes), so that
// it can write into the older schema. Both are catalog-only (no default to fill, no
// index), so they leave what the benchmarks compare (the tables and their indexes) as it
// was.
func migrateBefore(b *testing.B, dsn, stop string) {
	ctx := context.Background()
	if _, err := schema.MigrateBefore(ctx, dsn, "kube_cdc", stop); err != nil {
		b.Fatal(err)
	}
	if _, err := connect(b, dsn).Exec(ctx, `ALTER TABLE kube_cdc.changes ADD COLUMN IF NOT EXISTS changed text[];
		ALTER TABLE kube_cdc.objects ADD COLUMN IF NOT EXISTS in_changes boolean NOT NULL DEFAULT true`); err != nil {
		b.Fatal(err)
	}
}

// The pod whose "before it broke" the history benchmark reads: in cluster-0, reading 20 of
// its namespace's generated ConfigMaps (volumes and envFrom) and on a node, so that why()
// looks up every relation it knows.
const (
	whyPodNamespace = "ns-5"
	whyPodName      = "checkout-0"
)

// addWhyPod writes the pod's live row (historygen writes ConfigMaps only); a database
// reused holds it already.
func addWhyPod(b *testing.B, conn *pgx.Conn) {
	var volumes, envFrom []map[string]any
	for i := range 20 {
		if i%2 == 0 {
			volumes = append(volumes, map[string]any{"name": fmt.Sprintf("v%d", i), "configMap": map[string]any{"name": historygen.Object(i)}})
		} else {
			envFrom = append(envFrom, map[string]any{"configMapRef": map[string]any{"name": historygen.Object(i)}})
		}
	}
	pod, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": whyPodName, "namespace": whyPodNamespace, "uid": "why-pod", "labels": map[string]any{"app": "checkout"}},
		"spec": map[string]any{"nodeName": "node-1", "volumes": volumes,
			"containers": []any{map[string]any{"name": "app", "image": "shop/checkout:1", "envFrom": envFrom}}},
		"status": map[string]any{"phase": "Running"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `INSERT INTO kube_cdc.objects
		(cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version, object, created_at)
		VALUES ($1, '', 'v1', 'pods', 'Pod', $2, $3, 'why-pod', 1, $4, now() - interval '400 days')
		ON CONFLICT DO NOTHING`, historygen.Cluster(0), whyPodNamespace, whyPodName, pod); err != nil {
		b.Fatal(err)
	}
}
