package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

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
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the PostgreSQL DSN: %w", redact(err, ""))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, cfg.Password)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err = migrate(ctx, conn, schema)
	return applied, classify(err, cfg.Password)
}

// MigrateBefore is Migrate stopping before the migration whose version is stop
// ("012_partitions"): it builds an older schema, for tests and benchmarks of a
// migration.
func MigrateBefore(ctx context.Context, dsn, schema, stop string) (applied []string, err error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the PostgreSQL DSN: %w", redact(err, ""))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, cfg.Password)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err = migrateBefore(ctx, conn, schema, stop)
	return applied, classify(err, cfg.Password)
}

func migrate(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	return migrateBefore(ctx, conn, schema, "")
}

// migrateBefore applies the pending migrations whose version sorts before stop (every
// one when stop is ""): PartitionChanges stops before 012 to prepare the table, tests
// build an older schema.
func migrateBefore(ctx context.Context, conn *pgx.Conn, schema, stop string) ([]string, error) {
	files, err := migrationFiles()
	if err != nil {
		return nil, err
	}
	if stop != "" {
		for i, f := range files {
			if f.version >= stop {
				files = files[:i]
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
	var hasTable bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident+".schema_migrations").Scan(&hasTable); err != nil {
		return nil, err
	}
	if !hasTable {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+ident+`.schema_migrations (
			version    text        PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return nil, fmt.Errorf("create %s.schema_migrations: %w", ident, err)
		}
	}
	done := map[string]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM "+ident+".schema_migrations")
	if err != nil {
		return nil, err
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		done[v] = true
	}

	var applied []string
	for _, f := range files {
		if done[f.version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
				return err
			}
			// The simple protocol runs a file of several statements in one round trip.
			if _, err := tx.Conn().PgConn().Exec(ctx, f.sql).ReadAll(); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version) VALUES ($1)", f.version)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("apply migration %s to schema %s: %w", f.name, ident, err)
		}
		applied = append(applied, f.version)
	}
	return applied, nil
}

type migrationFile struct {
	name    string // "001_init.sql"
	version string // "001_init"
	sql     string
}

func migrationFiles() ([]migrationFile, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	files := make([]migrationFile, 0, len(names))
	for _, n := range names {
		b, err := migrations.FS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		files = append(files, migrationFile{name: n, version: strings.TrimSuffix(n, ".sql"), sql: string(b)})
	}
	return files, nil
}

// advisoryKey is the migration lock of one schema; the prefix keeps it apart from other
// applications' advisory locks.
func advisoryKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kube-cdc migrate " + schema))
	return int64(h.Sum64())
}
