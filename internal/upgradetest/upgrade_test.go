package upgradetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
	"github.com/kube-cdc/kube-cdc/migrations"
)

// pg is the package's shared server; every test gets its own database (NewDatabase).
var pg *testenv.Postgres

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := testenv.StartPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL for the upgrade tests:", err)
		os.Exit(1)
	}
	pg = p
	code := m.Run()
	p.Stop()
	os.Exit(code)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fixtures are the older releases' dumps (testdata/<name>.sql, <name>.json).
func fixtures(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("testdata/*.sql")
	if err != nil || len(m) == 0 {
		t.Fatalf("no testdata/*.sql (%v): fixture_test.go writes them (go test -tags upgradefixture)", err)
	}
	for i, f := range m {
		m[i] = strings.TrimSuffix(filepath.Base(f), ".sql")
	}
	return m
}

// restore loads a fixture into a fresh database and returns its DSN and what its
// generator saw.
func restore(t *testing.T, name string) (string, expectations) {
	t.Helper()
	dump, err := os.ReadFile(filepath.Join("testdata", name+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	var exp expectations
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err == nil {
		err = json.Unmarshal(data, &exp)
	}
	if err != nil {
		t.Fatalf("testdata/%s.json: %v", name, err)
	}
	dsn := pg.NewDatabase(t)
	conn := connect(t, dsn)
	if _, err := conn.PgConn().Exec(testCtx(t), string(dump)).ReadAll(); err != nil {
		t.Fatalf("restore testdata/%s.sql: %v", name, err)
	}
	// pg_dump empties the search_path for its session.
	if _, err := conn.Exec(testCtx(t), "RESET search_path"); err != nil {
		t.Fatal(err)
	}
	return dsn, exp
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// rowsOf is every row of table, as JSON of the given columns, sorted.
func rowsOf(t *testing.T, conn *pgx.Conn, table string, cols []string) []string {
	t.Helper()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	rows, err := conn.Query(testCtx(t), fmt.Sprintf("SELECT to_jsonb(r)::text FROM (SELECT %s FROM kube_cdc.%s) r",
		strings.Join(quoted, ", "), pgx.Identifier{table}.Sanitize()))
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	slices.Sort(out)
	return out
}

func columnsOf(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(testCtx(t), `SELECT column_name::text FROM information_schema.columns
		WHERE table_schema = 'kube_cdc' AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(cols) == 0 {
		t.Fatalf("columns of kube_cdc.%s: %v, %v", table, cols, err)
	}
	return cols
}

// readSide is what the read side answers for the fixture's rows: history(), as_of() at
// a moment inside the history, the relation and kind views, lineage() and the actors.
func readSide(t *testing.T, conn *pgx.Conn, at time.Time) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, q := range map[string]string{
		"history settings-0": `SELECT * FROM kube_cdc.history('configmaps', 'app', 'settings-0', 'east')`,
		"history runbook-4":  `SELECT * FROM kube_cdc.history('configmaps', 'ops', 'runbook-4', 'east')`,
		"history west":       `SELECT * FROM kube_cdc.history('configmaps', 'app', 'settings-2', 'west')`,
		"as_of east":         `SELECT * FROM kube_cdc.as_of($1, 'configmaps', NULL, 'east')`,
		"as_of west":         `SELECT * FROM kube_cdc.as_of((SELECT max(observed_at) FROM kube_cdc.changes WHERE cluster = 'west'), 'configmaps', 'app', 'west')`,
		"lineage":            `SELECT * FROM kube_cdc.lineage('pods', 'app', 'web-5d8f-x1', 'east')`,
		"owners":             `SELECT * FROM kube_cdc.owners`,
		"pod_placement":      `SELECT * FROM kube_cdc.pod_placement`,
		"service_backends":   `SELECT * FROM kube_cdc.service_backends`,
		"pods":               `SELECT * FROM kube_cdc.pods`,
		"deployments":        `SELECT * FROM kube_cdc.deployments`,
		"services":           `SELECT * FROM kube_cdc.services`,
		"change_actors":      `SELECT * FROM kube_cdc.change_actors`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, at)
		}
		rows, err := conn.Query(testCtx(t), "SELECT to_jsonb(r)::text FROM ("+q+") r", args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(name, "history") && name != "lineage" {
			slices.Sort(got) // a view's rows have no order
		}
		if len(got) == 0 {
			t.Errorf("%s answers nothing for the fixture: it would compare nothing", name)
		}
		out[name] = got
	}
	return out
}

func TestAnUpgradeKeepsEveryRowAnOlderReleaseStoredAndItsReadSideAnswersTheSame(t *testing.T) {
	for _, name := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			dsn, exp := restore(t, name)
			conn := connect(t, dsn)

			// Before: what the older release left, its columns, and what its read side says.
			cols := map[string][]string{}
			before := map[string][]string{}
			for _, table := range fixtureTables {
				cols[table] = columnsOf(t, conn, table)
				before[table] = rowsOf(t, conn, table, cols[table])
				if want, ok := exp.Rows[table]; !ok || len(before[table]) != want {
					t.Errorf("the fixture's %s holds %d rows, its generator saw %d: testdata/%s.sql is damaged", table, len(before[table]), want, name)
				}
			}
			var at time.Time // as_of() inside the history: after settings-0's second update
			if err := conn.QueryRow(testCtx(t), `SELECT observed_at FROM kube_cdc.changes
				WHERE cluster = 'east' AND name = 'settings-0' AND op = 'update' ORDER BY id OFFSET 1 LIMIT 1`).Scan(&at); err != nil {
				t.Fatalf("settings-0's second update: %v", err)
			}
			readBefore := readSide(t, conn, at)

			applied, err := schema.Migrate(testCtx(t), dsn, "kube_cdc")
			if err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			t.Logf("upgraded from %s, applying %v", name, applied)

			// No row lost or changed (the columns the older release had; migrations may add some).
			for _, table := range fixtureTables {
				after := rowsOf(t, conn, table, cols[table])
				if table == "schema_migrations" {
					after = slices.DeleteFunc(after, func(r string) bool {
						return !slices.Contains(before[table], r) && slices.ContainsFunc(applied, func(v string) bool { return strings.Contains(r, `"`+v+`"`) })
					})
				}
				if !slices.Equal(after, before[table]) {
					t.Errorf("%s after the upgrade differs:\n%s\nbefore:\n%s", table, diffRows(before[table], after), diffRows(after, before[table]))
				}
			}
			// Every applied migration now has this binary's checksum.
			files, err := migrations.Files()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				var sum string
				if err := conn.QueryRow(testCtx(t), `SELECT coalesce(checksum, '<null>') FROM kube_cdc.schema_migrations WHERE version = $1`, f.Version).Scan(&sum); err != nil || sum != f.SHA256 {
					t.Errorf("schema_migrations %s: checksum %s (%v), want %s", f.Version, sum, err, f.SHA256)
				}
			}

			// The read side answers the same for the old rows.
			readAfter := readSide(t, conn, at)
			for q, b := range readBefore {
				if a := readAfter[q]; !slices.Equal(a, b) {
					t.Errorf("%s after the upgrade:\n%s\nbefore:\n%s", q, strings.Join(a, "\n"), strings.Join(b, "\n"))
				}
			}

			// This binary's sink reads the older release's checkpoints as they were stored.
			if len(exp.Checkpoints) == 0 {
				t.Fatalf("testdata/%s.json lists no checkpoint", name)
			}
			sinks := map[string]*postgres.Sink{}
			for _, c := range exp.Checkpoints {
				s, ok := sinks[c.Cluster+"/"+c.Sink]
				if !ok {
					s, err = postgres.New(testCtx(t), c.Sink, c.Cluster, postgres.Options{DSN: dsn, Migrate: true}, nil)
					if err != nil {
						t.Fatalf("open sink %s of cluster %s after the upgrade: %v", c.Sink, c.Cluster, err)
					}
					t.Cleanup(func() { s.Close() })
					sinks[c.Cluster+"/"+c.Sink] = s
				}
				res := change.Resource{Group: c.Group, Resource: c.Resource, Scope: c.Scope}
				rv, err := s.Checkpoint(testCtx(t), res)
				if err != nil || rv != change.RV(c.RV) {
					t.Errorf("%s %s checkpoint of %s/%s scope %q: %d (%v), the older release stored %d", c.Cluster, c.Sink, c.Group, c.Resource, c.Scope, uint64(rv), err, c.RV)
				}
				epoch, err := s.Epoch(testCtx(t), res)
				if err != nil || int32(epoch) != c.Epoch {
					t.Errorf("%s %s epoch of %s/%s: %d (%v), the older release stored %d", c.Cluster, c.Sink, c.Group, c.Resource, epoch, err, c.Epoch)
				}
			}
			t.Logf("restore, compare, upgrade and compare again took %s", time.Since(start).Round(time.Millisecond))
		})
	}
}

// diffRows is the rows of a that b lacks.
func diffRows(a, b []string) string {
	var out []string
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, "  "+r)
		}
	}
	return strings.Join(out, "\n")
}
