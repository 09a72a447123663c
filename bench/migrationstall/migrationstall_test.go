package migrationstall

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	pgschema "github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
	"github.com/kube-cdc/kube-cdc/migrations"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// `make test` runs every package's tests; this one has only a benchmark, so it
		// starts nothing unless benchmarks were asked for (`make bench`).
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := testenv.StartPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL for the migration benchmark:", err)
		os.Exit(1)
	}
	pg = p
	code := m.Run()
	p.Stop()
	os.Exit(code)
}

const (
	schema      = "kube_cdc"
	defaultRows = 10_000_000
	// keys are the objects the rows are versions of: 3 clusters × 40 namespaces × 1,000.
	keys = 120_000
	// writeEvery paces the writer: a commit every 10 ms, so a stall shows as one long
	// commit and the commits around it stay short.
	writeEvery = 10 * time.Millisecond
	// blockingLimit is the rule of RELEASING.md: a migration's blocking step stays under
	// it at 10M rows, or the migration works in the background.
	blockingLimit = time.Second
	// lockHeld is how long the instrument check holds changes' ACCESS EXCLUSIVE lock.
	lockHeld = 1500 * time.Millisecond
)

func rowsWanted(b *testing.B) int {
	s := os.Getenv("KUBE_CDC_MIGRATION_BENCH_ROWS")
	if s == "" {
		return defaultRows
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < keys {
		b.Fatalf("KUBE_CDC_MIGRATION_BENCH_ROWS=%q: want a row count of at least %d", s, keys)
	}
	return n
}

// plan is what the benchmark applies: the last released migration (the calibration)
// and every migration released.sums does not list, in order.
type plan struct {
	files      []migrations.File
	calibrate  migrations.File
	unreleased []migrations.File
}

func readPlan(b *testing.B) plan {
	b.Helper()
	files, err := migrations.Files()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "migrations", migrations.ReleasedFile))
	if err != nil {
		b.Fatal(err)
	}
	released, err := migrations.ParseReleased(data)
	if err != nil {
		b.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, r := range released {
		shipped[r.Name] = true
	}
	p := plan{files: files}
	for _, f := range files {
		if shipped[f.Name] {
			p.calibrate = f // files are in order: the last one shipped wins
		}
	}
	if p.calibrate.Name == "" {
		b.Fatalf("migrations/%s lists no migration of this tree", migrations.ReleasedFile)
	}
	for _, f := range files {
		if !shipped[f.Name] && f.Version > p.calibrate.Version {
			p.unreleased = append(p.unreleased, f)
		}
	}
	return p
}

// apply applies exactly migration f (every one before it is applied already).
func (p plan) apply(ctx context.Context, dsn string, f migrations.File) error {
	i := slices.IndexFunc(p.files, func(x migrations.File) bool { return x.Name == f.Name })
	var applied []string
	var err error
	if i == len(p.files)-1 {
		applied, err = pgschema.Migrate(ctx, dsn, schema)
	} else {
		applied, err = pgschema.MigrateBefore(ctx, dsn, schema, p.files[i+1].Version)
	}
	if err == nil && !slices.Equal(applied, []string{f.Version}) {
		err = fmt.Errorf("applied %v, want %s alone", applied, f.Version)
	}
	return err
}

// step is one row of the benchmark's table.
type step struct {
	name     string
	enforced bool // a migration added since the release: the 1 s rule applies
	run      func(ctx context.Context) error
}

func BenchmarkMigrationsAfterTheReleasedSet(b *testing.B) {
	for range b.N {
		benchmarkMigrations(b)
	}
}

func benchmarkMigrations(b *testing.B) {
	ctx := context.Background()
	p := readPlan(b)
	rows := rowsWanted(b)
	dsn := pg.NewDatabase(b)
	if _, err := pgschema.MigrateBefore(ctx, dsn, schema, p.calibrate.Version); err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	began := time.Now()
	if err := fill(ctx, conn, rows, func(s string) { fmt.Printf("bench: migrations: %s\n", s) }); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("bench: migrations: %d changes rows at the schema before %s in %v\n", rows, p.calibrate.Version, time.Since(began).Round(time.Second))

	steps := []step{{
		name: fmt.Sprintf("reference: ACCESS EXCLUSIVE on changes held %v", lockHeld),
		run: func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, fmt.Sprintf("LOCK TABLE %s.changes IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(%f)", schema, lockHeld.Seconds()))
				return err
			})
		},
	}, {
		name: "calibration: " + p.calibrate.Version + " (released)",
		run:  func(ctx context.Context) error { return p.apply(ctx, dsn, p.calibrate) },
	}}
	for _, f := range p.unreleased {
		steps = append(steps, step{name: f.Version, enforced: true, run: func(ctx context.Context) error { return p.apply(ctx, dsn, f) }})
	}
	if len(p.unreleased) == 0 {
		fmt.Printf("bench: migrations: none added since the release (%s is the last one released.sums lists)\n", p.calibrate.Version)
	}
	steps = append(steps, step{
		name: "reference: CREATE INDEX on changes (not CONCURRENTLY)",
		run: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX bench_blocking_index ON %s.changes (name, resource_version)", schema))
			return err
		},
	})

	w, err := startWriter(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer w.stop()
	fmt.Printf("bench: migrations: %-58s %10s %12s %14s %8s\n", "step", "wall", "max stall", "quiet p50/max", "commits")
	for _, s := range steps {
		quiet := w.quiet(b, 100)
		m0 := time.Now()
		if err := s.run(ctx); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		m1 := time.Now()
		stall, commits := w.stallDuring(b, m0, m1)
		verdict := ""
		if s.enforced {
			verdict = "MET"
			if stall >= blockingLimit {
				verdict = fmt.Sprintf("MISSED: writers blocked %v ≥ %v (RELEASING.md, \"Migrations that rewrite\")", stall.Round(time.Millisecond), blockingLimit)
			}
		}
		fmt.Printf("bench: migrations: %-58s %10v %12v %6v/%-7v %8d %s\n", s.name, m1.Sub(m0).Round(time.Millisecond), stall.Round(time.Millisecond),
			pct(quiet, 50).Round(100*time.Microsecond), pct(quiet, 100).Round(100*time.Microsecond), commits, verdict)
		if strings.HasPrefix(s.name, "reference: ACCESS EXCLUSIVE") && stall < lockHeld*9/10 {
			b.Errorf("the writer's longest commit while changes was locked for %v was %v: the benchmark does not measure what blocks writers", lockHeld, stall)
		}
		if s.enforced {
			b.ReportMetric(stall.Seconds(), s.name+"_max_stall_s")
		}
	}
	if err := w.stop(); err != nil {
		b.Fatalf("writer: %v", err)
	}
	fmt.Printf("bench: migrations: %d writer commits in all; load average %s\n", w.count(), loadavg())
}

// fill writes rows changes rows at the schema conn's database has, spread over the last
// twelve months in monthly partitions, with the objects rows of the newest versions and a
// checkpoint per cluster, as fast as PostgreSQL loads them: generate_series, the
// non-constraint indexes of changes dropped during the load and built after it, then
// VACUUM (ANALYZE). Only columns that 0.1.0 has are written.
func fill(ctx context.Context, conn *pgx.Conn, rows int, progress func(string)) error {
	s := pgx.Identifier{schema}.Sanitize()
	now := time.Now().UTC()
	start := now.AddDate(-1, 0, 0)
	for m := start; !m.After(now.AddDate(0, 1, 0)); m = m.AddDate(0, 1, 0) {
		if _, err := conn.Exec(ctx, "SELECT "+s+".changes_partition_create($1::timestamp)", m.Format("2006-01-02")); err != nil {
			return fmt.Errorf("create the partition of %s: %w", m.Format("2006-01"), err)
		}
	}
	idx, err := conn.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = $1 AND i.tablename = 'changes'
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.connamespace = $1::regnamespace)`, schema)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	indexes, err := pgx.CollectRows(idx, func(r pgx.CollectableRow) (index, error) {
		var ix index
		err := r.Scan(&ix.name, &ix.def)
		return ix, err
	})
	if err != nil {
		return err
	}
	for _, ix := range indexes {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{schema, ix.name}.Sanitize()); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return err
	}
	t0 := time.Now()
	const chunk = 1_000_000
	span := now.Add(-time.Minute).Sub(start).Seconds()
	for lo := 1; lo <= rows; lo += chunk {
		hi := min(lo+chunk-1, rows)
		// Key k = i % keys; its first version is a create. ~330 bytes of JSON a row.
		if _, err := conn.Exec(ctx, `INSERT INTO `+s+`.changes (cluster, api_group, resource, namespace, name, uid,
				resource_version, op, object, changed_by, observed_at, epoch)
			SELECT 'cluster-' || (k / 40000), '', 'configmaps', 'ns-' || (k / 1000 % 40), 'cm-' || (k % 1000), 'uid-' || k,
				i, CASE WHEN i <= $4 THEN 'create' ELSE 'update' END,
				jsonb_build_object('apiVersion', 'v1', 'kind', 'ConfigMap',
					'metadata', jsonb_build_object('name', 'cm-' || (k % 1000), 'namespace', 'ns-' || (k / 1000 % 40), 'uid', 'uid-' || k,
						'resourceVersion', i::text, 'labels', jsonb_build_object('app', 'app-' || (k % 50), 'tier', 'web')),
					'data', jsonb_build_object('revision', i::text, 'config.properties', repeat('abcdefghij', 18))),
				'kubectl/Update', $3::timestamptz + make_interval(secs => i * $5::float8 / $6), 0
			FROM (SELECT i, i % $4 AS k FROM generate_series($1::bigint, $2::bigint) i) g`,
			lo, hi, start, keys, span, rows); err != nil {
			return fmt.Errorf("load changes rows %d-%d: %w", lo, hi, err)
		}
		progress(fmt.Sprintf("loaded %d of %d changes rows (%v)", hi, rows, time.Since(t0).Round(time.Second)))
	}
	// The objects rows: each key's newest version, the largest i ≤ rows with i % keys = k.
	if _, err := conn.Exec(ctx, `INSERT INTO `+s+`.objects (cluster, api_group, api_version, resource, kind, namespace, name, uid,
			resource_version, labels, object, changed_by, created_at, updated_at)
		SELECT 'cluster-' || (k / 40000), '', 'v1', 'configmaps', 'ConfigMap', 'ns-' || (k / 1000 % 40), 'cm-' || (k % 1000), 'uid-' || k,
			i, jsonb_build_object('app', 'app-' || (k % 50), 'tier', 'web'),
			jsonb_build_object('apiVersion', 'v1', 'kind', 'ConfigMap',
				'metadata', jsonb_build_object('name', 'cm-' || (k % 1000), 'namespace', 'ns-' || (k / 1000 % 40), 'uid', 'uid-' || k,
					'resourceVersion', i::text, 'labels', jsonb_build_object('app', 'app-' || (k % 50), 'tier', 'web')),
				'data', jsonb_build_object('revision', i::text, 'config.properties', repeat('abcdefghij', 18))),
			'kubectl/Update', $3::timestamptz, $3::timestamptz + make_interval(secs => i * $4::float8 / $1)
		FROM (SELECT k, $1::bigint - (($1::bigint - k) % $2) AS i FROM generate_series(0, $2 - 1) k) n`,
		rows, keys, start, span); err != nil {
		return fmt.Errorf("load objects: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+s+`.checkpoints (cluster, sink, api_group, resource, scope, resource_version)
		SELECT 'cluster-' || c, 'warehouse', '', 'configmaps', '', $1 FROM generate_series(0, 2) c`, rows); err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	progress(fmt.Sprintf("loaded in %v; building %d indexes of changes", time.Since(t0).Round(time.Second), len(indexes)))
	t0 = time.Now()
	for _, ix := range indexes {
		// pg_indexes spells a partitioned index "ON ONLY", which would build it on the
		// parent alone, invalid, and no partition's.
		if _, err := conn.Exec(ctx, strings.Replace(ix.def, " ON ONLY ", " ON ", 1)); err != nil {
			return fmt.Errorf("rebuild index %s: %w", ix.name, err)
		}
	}
	progress(fmt.Sprintf("indexes built in %v; VACUUM (ANALYZE)", time.Since(t0).Round(time.Second)))
	t0 = time.Now()
	// VACUUM too: otherwise autovacuum visits the freshly loaded tables during the
	// measurements.
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+s+".changes, "+s+".objects"); err != nil {
		return err
	}
	progress(fmt.Sprintf("VACUUM (ANALYZE) in %v", time.Since(t0).Round(time.Second)))
	return nil
}

// commit is one of the writer's transactions.
type commit struct{ start, end time.Time }

// writer commits, every writeEvery, what the PostgreSQL sink commits for one change: a
// changes row, the objects upsert and the checkpoint, in one transaction. It writes only
// columns 0.1.0 has, so any later schema takes it.
type writer struct {
	mu      sync.Mutex
	commits []commit
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
}

func startWriter(ctx context.Context, dsn string) (*writer, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{})}
	s := pgx.Identifier{schema}.Sanitize()
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(writeEvery)
		defer tick.Stop()
		for rv := int64(1); ; rv++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("cm-%d", rv%100)
			obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns-writer","resourceVersion":"%d"},"data":{"i":"%d"}}`, name, rv, rv)
			began := time.Now()
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				var batch pgx.Batch
				batch.Queue(`INSERT INTO `+s+`.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, changed_by, observed_at, epoch)
					VALUES ('writer', '', 'configmaps', 'ns-writer', $1, 'uid-'||$1, $2, 'update', $3, 'bench', now(), 0)`, name, rv, obj)
				batch.Queue(`INSERT INTO `+s+`.objects (cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version, labels, object, changed_by, created_at, updated_at)
					VALUES ('writer', '', 'v1', 'configmaps', 'ConfigMap', 'ns-writer', $1, 'uid-'||$1, $2, '{}', $3, 'bench', now(), now())
					ON CONFLICT (cluster, api_group, resource, namespace, name) DO UPDATE
					SET resource_version = excluded.resource_version, object = excluded.object, updated_at = excluded.updated_at
					WHERE objects.resource_version < excluded.resource_version`, name, rv, obj)
				batch.Queue(`INSERT INTO `+s+`.checkpoints (cluster, sink, api_group, resource, scope, resource_version)
					VALUES ('writer', 'warehouse', '', 'configmaps', '', $1)
					ON CONFLICT (cluster, sink, api_group, resource, scope) DO UPDATE SET resource_version = excluded.resource_version`, rv)
				return tx.SendBatch(ctx, &batch).Close()
			})
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.commits = append(w.commits, commit{began, time.Now()})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *writer) stop() error {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.commits)
}

// wait polls until cond holds of the commits, failing on the writer's error or after a
// minute without.
func (w *writer) wait(b *testing.B, what string, cond func([]commit) bool) []commit {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w.mu.Lock()
		err, cs := w.err, w.commits
		ok := err == nil && cond(cs)
		w.mu.Unlock()
		switch {
		case err != nil:
			b.Fatalf("writer: %v", err)
		case ok:
			return cs
		case time.Now().After(deadline):
			b.Fatalf("writer: not within 2m: %s", what)
		}
		time.Sleep(writeEvery) // polling the writer's record
	}
}

// quiet waits for n commits more and returns their latencies: the writer undisturbed.
func (w *writer) quiet(b *testing.B, n int) []time.Duration {
	b.Helper()
	mark := w.count()
	cs := w.wait(b, fmt.Sprintf("%d commits", n), func(cs []commit) bool { return len(cs) >= mark+n })
	out := make([]time.Duration, 0, n)
	for _, c := range cs[mark:] {
		out = append(out, c.end.Sub(c.start))
	}
	return out
}

// stallDuring waits until a commit begun after m1 has ended (so a commit the step held
// has ended too), then returns the longest commit that overlapped [m0, m1] and how many
// commits ended inside it.
func (w *writer) stallDuring(b *testing.B, m0, m1 time.Time) (time.Duration, int) {
	b.Helper()
	cs := w.wait(b, "a commit begun after the step", func(cs []commit) bool {
		return len(cs) > 0 && cs[len(cs)-1].start.After(m1)
	})
	var longest time.Duration
	n := 0
	for _, c := range cs {
		if c.start.After(m1) || c.end.Before(m0) {
			continue
		}
		longest = max(longest, c.end.Sub(c.start))
		if !c.end.After(m1) {
			n++
		}
	}
	return longest, n
}

// pct is the p-th percentile of ds (p = 100: the largest).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
