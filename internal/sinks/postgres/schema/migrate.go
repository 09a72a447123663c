package schema

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/version"
	"github.com/kube-cdc/kube-cdc/migrations"
)

// Migrate applies the pending migrations of migrations.FS to schema (created if missing)
// and returns the versions it applied, in order; none when the schema is up to date.
//
// A session advisory lock serialises concurrent callers (two replicas starting together):
// the second waits, then finds nothing to do. Each migration runs in its own transaction
// together with its schema_migrations row. When everything is applied already, Migrate
// issues no DDL, so a role without CREATE privilege can start against a migrated schema.
func Migrate(ctx context.Context, dsn, schema string) (applied []string, err error) {
	return MigrateBefore(ctx, dsn, schema, "")
}

// MigrateBefore is Migrate stopping before the migration whose version is stop
// ("012_partitions"; "": none): it builds an older schema, for tests and benchmarks of a
// migration.
func MigrateBefore(ctx context.Context, dsn, schema, stop string) (applied []string, err error) {
	return onConn(ctx, dsn, func(conn *pgx.Conn) ([]string, error) { return MigrateConn(ctx, conn, schema, stop) })
}

// onConn runs fn on a connection of its own to dsn (pgdb.Connect), closed after it, and
// classifies its error (pgdb.Classify): the commands' way to migrate.
func onConn(ctx context.Context, dsn string, fn func(*pgx.Conn) ([]string, error)) ([]string, error) {
	conn, password, err := pgdb.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err := fn(conn)
	return applied, pgdb.Classify(err, password)
}

// MigrateConn is MigrateBefore on a connection the caller opened (the sink's start),
// with its errors left unclassified.
func MigrateConn(ctx context.Context, conn *pgx.Conn, schema, stop string) ([]string, error) {
	files, err := migrations.Files()
	if err != nil {
		return nil, err
	}
	return MigrateFiles(ctx, conn, schema, files, stop)
}

// MigrateFiles is MigrateConn with the binary's migrations given: files are every
// migration this binary knows (a test passes fewer to play an older binary). Before
// applying anything it verifies what the schema holds (verifyApplied): a migration this
// binary does not know, or one applied with another checksum, stops it with nothing
// changed.
func MigrateFiles(ctx context.Context, conn *pgx.Conn, schema string, files []migrations.File, stop string) ([]string, error) {
	pending := files
	if stop != "" {
		for i, f := range files {
			if f.Version >= stop {
				pending = files[:i]
				break
			}
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryKey(schema)); err != nil {
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		// Closing the connection releases the lock too; unlock so a pooled caller could go on.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", advisoryKey(schema))
	}()

	ident := pgx.Identifier{schema}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", ident, err)
		}
	}
	applied, cols, err := readApplied(ctx, conn, schema)
	if err != nil {
		return nil, err
	}
	if err := verifyApplied(schema, applied, files); err != nil {
		return nil, err
	}
	if cols == nil {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+ident+`.schema_migrations (
			version    text        PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now(),
			checksum   text,
			applied_by text)`); err != nil {
			return nil, fmt.Errorf("create %s.schema_migrations: %w", ident, err)
		}
	} else if !cols["checksum"] || !cols["applied_by"] {
		// A schema migrated before checksums were recorded (before 0.1.0): the columns
		// now, and below each applied migration's checksum taken to be this binary's (the
		// only record there is), so that from now on a changed file is found.
		if _, err := conn.Exec(ctx, "ALTER TABLE "+ident+".schema_migrations "+
			"ADD COLUMN IF NOT EXISTS checksum text, ADD COLUMN IF NOT EXISTS applied_by text"); err != nil {
			return nil, fmt.Errorf("add the checksum column to %s.schema_migrations: %w", ident, err)
		}
	}
	byVersion := map[string]migrations.File{}
	for _, f := range files {
		byVersion[f.Version] = f
	}
	done := map[string]bool{}
	for _, a := range applied {
		done[a.version] = true
		if a.checksum == nil {
			if _, err := conn.Exec(ctx, "UPDATE "+ident+".schema_migrations SET checksum = $2 WHERE version = $1 AND checksum IS NULL",
				a.version, byVersion[a.version].SHA256); err != nil {
				return nil, fmt.Errorf("record the checksum of migration %s: %w", a.version, err)
			}
		}
	}

	var ran []string
	for _, f := range pending {
		if done[f.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
				return err
			}
			// The simple protocol runs a file of several statements in one round trip.
			if _, err := tx.Conn().PgConn().Exec(ctx, f.SQL).ReadAll(); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, checksum, applied_by) VALUES ($1, $2, $3)",
				f.Version, f.SHA256, version.Short())
			return err
		})
		if err != nil {
			return ran, fmt.Errorf("apply migration %s to schema %s: %w", f.Name, ident, err)
		}
		ran = append(ran, f.Version)
	}
	return ran, nil
}

// appliedMigration is a row of schema_migrations.
type appliedMigration struct {
	version  string
	checksum *string // nil: applied before checksums were recorded
	by       *string // the kube-cdc version that applied it; nil: not recorded
}

// Querier is what the reads of schema_migrations need of a connection or a pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readApplied reads schema's schema_migrations and which of its columns exist (nil: no
// such table). It changes nothing, so a role that may only read can run it.
func readApplied(ctx context.Context, q Querier, schema string) ([]appliedMigration, map[string]bool, error) {
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	rows, err := q.Query(ctx, `SELECT a.attname::text FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, table)
	if err != nil {
		return nil, nil, fmt.Errorf("read the columns of %s.schema_migrations: %w", schema, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("read the columns of %s.schema_migrations: %w", schema, err)
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	cols := map[string]bool{}
	for _, n := range names {
		cols[n] = true
	}
	column := func(name string) string {
		if cols[name] {
			return name
		}
		return "NULL::text"
	}
	rows, err = q.Query(ctx, "SELECT version, "+column("checksum")+", "+column("applied_by")+" FROM "+table+" ORDER BY version")
	if err != nil {
		return nil, nil, fmt.Errorf("read %s.schema_migrations: %w", schema, err)
	}
	applied, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appliedMigration, error) {
		var a appliedMigration
		err := row.Scan(&a.version, &a.checksum, &a.by)
		return a, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read %s.schema_migrations: %w", schema, err)
	}
	return applied, cols, nil
}

// ErrSchemaNewer is wrapped by the error of a schema that holds a migration this binary
// does not know (a newer kube-cdc migrated it): kube-cdc refuses to write to it.
var ErrSchemaNewer = errors.New("the schema is newer than this kube-cdc")

// ErrMigrationChanged is wrapped by the error of a schema whose applied migration's
// checksum differs from the binary's file.
var ErrMigrationChanged = errors.New("an applied migration differs from this kube-cdc's")

// verifyApplied refuses a schema this binary must not write to, in one line:
//
//   - a migration the binary does not know: the schema is newer than this binary (an
//     older kube-cdc started against a database an upgrade migrated); the line names
//     the schema's newest migration and the kube-cdc that applied it, and the binary's
//     newest migration and version (ErrSchemaNewer);
//   - a migration applied with a checksum other than the binary's file: a released
//     migration never changes, so the database or the binary is not a release's; the
//     line names the migration and both checksums (ErrMigrationChanged).
//
// Rows without a checksum (applied before they were recorded) are not compared. Both
// errors are retry.Terminal: they do not heal by waiting.
func verifyApplied(schema string, applied []appliedMigration, files []migrations.File) error {
	known := map[string]migrations.File{}
	for _, f := range files {
		known[f.Version] = f
	}
	var unknown *appliedMigration
	for i, a := range applied {
		if _, ok := known[a.version]; !ok && (unknown == nil || a.version > unknown.version) {
			unknown = &applied[i]
		}
	}
	if unknown != nil {
		newest := "none"
		if len(files) > 0 {
			newest = files[len(files)-1].Version
		}
		by := "a kube-cdc that did not record its version"
		if unknown.by != nil && *unknown.by != "" {
			by = "kube-cdc " + *unknown.by
		}
		return retry.Terminal(fmt.Errorf("%w: schema %s holds migration %s, applied by %s; this kube-cdc %s knows migrations up to %s and will not write to it: run that kube-cdc or a newer one",
			ErrSchemaNewer, schema, unknown.version, by, version.Short(), newest))
	}
	for _, a := range applied {
		if a.checksum != nil && *a.checksum != known[a.version].SHA256 {
			return retry.Terminal(fmt.Errorf("%w: migration %s of schema %s was applied with sha256 %s, this kube-cdc %s ships sha256 %s; a released migration never changes, so the database or this binary is not a release's (docs/operations.md, \"Upgrade\")",
				ErrMigrationChanged, a.version, schema, *a.checksum, version.Short(), known[a.version].SHA256))
		}
	}
	return nil
}

// Verify reads schema_migrations and refuses what verifyApplied refuses, changing
// nothing: the check of a sink that does not migrate (migrate: false, and the commands
// that only read). ErrUnverifiable: the role may not read schema_migrations.
func Verify(ctx context.Context, q Querier, schema string) error {
	files, err := migrations.Files()
	if err != nil {
		return err
	}
	applied, _, err := readApplied(ctx, q, schema)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("%w: %w", ErrUnverifiable, err)
	}
	if err != nil {
		return err
	}
	return verifyApplied(schema, applied, files)
}

// ErrUnverifiable is wrapped by Verify's error when the role may not read
// schema_migrations: the caller decides whether to go on unverified.
var ErrUnverifiable = errors.New("cannot verify the applied migrations")

// advisoryKey is the migration lock of one schema; the prefix keeps it apart from other
// applications' advisory locks.
func advisoryKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kube-cdc migrate " + schema))
	return int64(h.Sum64())
}

// AppliedVersions is the versions schema_migrations records, oldest first; none when the
// table does not exist. It changes nothing (`kube-cdc check` asks it).
func AppliedVersions(ctx context.Context, q Querier, schema string) ([]string, error) {
	applied, _, err := readApplied(ctx, q, schema)
	if err != nil {
		return nil, err
	}
	versions := make([]string, len(applied))
	for i, a := range applied {
		versions[i] = a.version
	}
	return versions, nil
}
