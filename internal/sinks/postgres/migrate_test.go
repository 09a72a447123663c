package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/version"
	"github.com/kube-cdc/kube-cdc/migrations"
)

func embeddedMigrations(t *testing.T) []migrations.File {
	t.Helper()
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// appliedRows are schema's schema_migrations rows as "version checksum applied_by".
func appliedRows(t *testing.T, dsn, schema string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), fmt.Sprintf(
		`SELECT version || ' ' || coalesce(checksum, '<null>') || ' ' || coalesce(applied_by, '<null>') FROM %s.schema_migrations ORDER BY version`,
		pgx.Identifier{schema}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateRecordsEachMigrationsChecksumAndTheKubeCDCThatAppliedIt(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	var want []string
	for _, f := range embeddedMigrations(t) {
		want = append(want, f.Version+" "+f.SHA256+" "+version.Short())
	}
	// The checksum is of the file as shipped: the same whatever the schema is called.
	for _, name := range []string{"kube_cdc", "Other CDC"} {
		if _, err := schema.Migrate(testCtx(t), dsn, name); err != nil {
			t.Fatal(err)
		}
		if got := appliedRows(t, dsn, name); !slices.Equal(got, want) {
			t.Errorf("schema %q: schema_migrations\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// opener is one way kube-cdc opens a PostgreSQL sink's schema.
type opener struct {
	name string
	open func(dsn string) error
}

func openers(t *testing.T) []opener {
	return []opener{
		{"run (New, migrate: true)", func(dsn string) error {
			s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: true}, testLog(t))
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"run with migrate: false (New, migrate: false)", func(dsn string) error {
			s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: false}, testLog(t))
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"status, history, as-of (store.Open)", func(dsn string) error {
			r, err := store.Open(testCtx(t), store.Options{DSN: dsn, Schema: DefaultSchema, Cluster: cluster, Sink: "warehouse",
				VerifySchema: VerifySchema, Ping: true})
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"kube-cdc migrate (Migrate)", func(dsn string) error {
			_, err := schema.Migrate(testCtx(t), dsn, "kube_cdc")
			return err
		}},
		{"the audit receiver (NewAuditStore, migrate: true)", func(dsn string) error {
			s, err := NewAuditStore(testCtx(t), cluster, Options{DSN: dsn, Migrate: true})
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"the audit receiver (NewAuditStore, migrate: false)", func(dsn string) error {
			s, err := NewAuditStore(testCtx(t), cluster, Options{DSN: dsn, Migrate: false})
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
}

// wantRefusal asserts err is a terminal one-line refusal wrapping sentinel and naming
// every string of want.
func wantRefusal(t *testing.T, what string, err, sentinel error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, sentinel)
		return
	}
	if !errors.Is(err, sentinel) || !retry.IsTerminal(err) || strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: %v (terminal %v), want one terminal line wrapping %q", what, err, retry.IsTerminal(err), sentinel)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not name %q", what, err, w)
		}
	}
}

func TestAnAppliedMigrationThatDiffersFromTheBinarysIsRefusedNamingItAndBothChecksums(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	var shipped string
	for _, f := range embeddedMigrations(t) {
		if f.Version == "005_history" {
			shipped = f.SHA256
		}
	}
	// The database applied another 005_history than this binary ships (a file edited
	// after its release, or a database migrated by a build that was not a release's).
	other := strings.Repeat("0a", 32)
	if _, err := connect(t, dsn).Exec(testCtx(t), `UPDATE kube_cdc.schema_migrations SET checksum = $1 WHERE version = '005_history'`, other); err != nil {
		t.Fatal(err)
	}
	before := appliedRows(t, dsn, "kube_cdc")
	for _, o := range openers(t) {
		wantRefusal(t, o.name, o.open(dsn), schema.ErrMigrationChanged,
			"migration 005_history of schema kube_cdc was applied with sha256 "+other, "ships sha256 "+shipped)
	}
	if after := appliedRows(t, dsn, "kube_cdc"); !slices.Equal(after, before) {
		t.Errorf("schema_migrations changed under a refusal:\n%s\nwas\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}

func TestAnOlderBinaryRefusesToWriteToASchemaANewerOneMigrated(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	files := embeddedMigrations(t)
	newest := files[len(files)-1].Version

	t.Run("the runner of a binary that knows one migration fewer", func(t *testing.T) {
		older := files[:len(files)-1]
		before := appliedRows(t, dsn, "kube_cdc")
		_, err := schema.MigrateFiles(testCtx(t), connect(t, dsn), "kube_cdc", older, "")
		wantRefusal(t, "migrate", err, schema.ErrSchemaNewer,
			"schema kube_cdc holds migration "+newest+", applied by kube-cdc "+version.Short(),
			"knows migrations up to "+older[len(older)-1].Version, "will not write to it")
		if after := appliedRows(t, dsn, "kube_cdc"); !slices.Equal(after, before) {
			t.Errorf("schema_migrations changed under a refusal:\n%s\nwas\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
	})

	t.Run("every way of opening the sink, after a future release migrated it", func(t *testing.T) {
		if _, err := connect(t, dsn).Exec(testCtx(t),
			`INSERT INTO kube_cdc.schema_migrations (version, checksum, applied_by) VALUES ('999_from_the_future', $1, '9.9.9')`,
			strings.Repeat("ff", 32)); err != nil {
			t.Fatal(err)
		}
		before := appliedRows(t, dsn, "kube_cdc")
		for _, o := range openers(t) {
			wantRefusal(t, o.name, o.open(dsn), schema.ErrSchemaNewer,
				"schema kube_cdc holds migration 999_from_the_future, applied by kube-cdc 9.9.9",
				"this kube-cdc "+version.Short()+" knows migrations up to "+newest)
		}
		if after := appliedRows(t, dsn, "kube_cdc"); !slices.Equal(after, before) {
			t.Errorf("schema_migrations changed under a refusal:\n%s\nwas\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
		if n := count(t, dsn, `SELECT (SELECT count(*) FROM kube_cdc.checkpoints) + (SELECT count(*) FROM kube_cdc.objects) + (SELECT count(*) FROM kube_cdc.changes) + (SELECT count(*) FROM kube_cdc.retention)`); n != 0 {
			t.Errorf("%d rows written by a binary that refused the schema", n)
		}
	})
}

func TestASchemaMigratedBeforeChecksumsWereRecordedGetsThemAtTheNextMigrate(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	// Before 0.1.0, schema_migrations had (version, applied_at) only.
	if _, err := schema.MigrateBefore(testCtx(t), dsn, "kube_cdc", "017_history_changed"); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, dsn).Exec(testCtx(t), `ALTER TABLE kube_cdc.schema_migrations DROP COLUMN checksum, DROP COLUMN applied_by`); err != nil {
		t.Fatal(err)
	}
	// A binary that does not migrate reads such a table.
	s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: false}, testLog(t))
	if err != nil {
		t.Fatalf("New without migrate on a schema without checksums: %v", err)
	}
	s.Close()

	// What MigrateBefore left: 017_history_changed and every migration after it.
	var pending []string
	for _, f := range embeddedMigrations(t) {
		if f.Version >= "017_history_changed" {
			pending = append(pending, f.Version)
		}
	}
	applied, err := schema.Migrate(testCtx(t), dsn, "kube_cdc")
	if err != nil || !slices.Equal(applied, pending) {
		t.Fatalf("Migrate applied %v, %v; want %v", applied, err, pending)
	}
	var want []string
	for _, f := range embeddedMigrations(t) {
		by := "<null>" // applied before the version was recorded: unknown
		if slices.Contains(pending, f.Version) {
			by = version.Short()
		}
		want = append(want, f.Version+" "+f.SHA256+" "+by)
	}
	if got := appliedRows(t, dsn, "kube_cdc"); !slices.Equal(got, want) {
		t.Errorf("schema_migrations\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
