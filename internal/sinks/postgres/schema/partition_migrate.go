package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// partitionMigration is the migration that partitions changes (migrations/012_partitions.sql).
const partitionMigration = "012_partitions"

// PartitionStep is one step of PartitionChanges, as it reports it: what it did, how
// long it took, and whether it held a lock that stops writers (ACCESS EXCLUSIVE) for
// that long.
type PartitionStep struct {
	Name      string
	Took      time.Duration
	Exclusive bool
}

// PartitionChanges is `kube-cdc migrate --partition-changes`: it partitions a large
// unpartitioned changes table without holding an exclusive lock on it for long
// (docs/operations.md, "Partitioning an existing changes table"), then applies every
// pending migration. Writers (an older kube-cdc still running) go on during the long
// steps:
//
//  1. the migrations before 012, as Migrate would;
//  2. a CHECK (observed_at < B) NOT VALID on changes, B the first day of the month after
//     next (UTC): an exclusive lock for milliseconds, no scan;
//  3. VALIDATE of that CHECK: a scan under a SHARE UPDATE EXCLUSIVE lock, which lets
//     writes through;
//  4. the indexes the partitioned parent has, built CONCURRENTLY on the old table;
//  5. migration 012 and the rest: 012 finds the table prepared, renames it
//     changes_legacy and attaches it as the partition [MINVALUE, B), which needs no scan
//     (the validated CHECK proves the bound) and no index build: milliseconds under an
//     exclusive lock.
//
// Every step can be run again: a run cut short is resumed by the next. B must not pass
// before step 5 (writes after B would fail the CHECK): it is at least a month away.
// report is called after each step (nil: not reported).
func PartitionChanges(ctx context.Context, dsn, schema string, report func(PartitionStep)) (applied []string, err error) {
	if report == nil {
		report = func(PartitionStep) {}
	}
	return onConn(ctx, dsn, func(conn *pgx.Conn) ([]string, error) { return partitionChanges(ctx, conn, schema, report) })
}

func partitionChanges(ctx context.Context, conn *pgx.Conn, schema string, report func(PartitionStep)) ([]string, error) {
	ident := pgx.Identifier{schema}.Sanitize()
	changes := ident + ".changes"
	step := func(name string, exclusive bool, fn func() error) error {
		start := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		report(PartitionStep{Name: name, Took: time.Since(start), Exclusive: exclusive})
		return nil
	}
	var applied []string
	if err := step("apply the migrations before "+partitionMigration, false, func() error {
		var err error
		applied, err = MigrateConn(ctx, conn, schema, partitionMigration)
		return err
	}); err != nil {
		return applied, err
	}
	var kind string
	if err := conn.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", changes).Scan(&kind); err != nil {
		return applied, fmt.Errorf("find %s: %w", changes, err)
	}
	if kind == "r" {
		// Short waits for the exclusive locks: behind a long query, a waiting ALTER would
		// hold up every writer queued behind it.
		if _, err := conn.Exec(ctx, "SET lock_timeout = '2s'"); err != nil {
			return applied, err
		}
		var valid *bool
		err := conn.QueryRow(ctx, `SELECT convalidated FROM pg_constraint
			WHERE conrelid = $1::regclass AND conname = 'changes_partition_bound'`, changes).Scan(&valid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return applied, err
		}
		if valid == nil {
			now := time.Now().UTC()
			bound := time.Date(now.Year(), now.Month()+2, 1, 0, 0, 0, 0, time.UTC)
			if err := step("add CHECK (observed_at < "+bound.Format("2006-01-02")+") NOT VALID", true, func() error {
				return retryLock(ctx, func() error {
					_, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT changes_partition_bound
						CHECK (observed_at < '%s') NOT VALID`, changes, bound.Format(time.RFC3339)))
					return err
				})
			}); err != nil {
				return applied, err
			}
		}
		if valid == nil || !*valid {
			if err := step("validate the CHECK (a scan; writes go on)", false, func() error {
				return retryLock(ctx, func() error {
					_, err := conn.Exec(ctx, "ALTER TABLE "+changes+" VALIDATE CONSTRAINT changes_partition_bound")
					return err
				})
			}); err != nil {
				return applied, err
			}
		}
		for _, ix := range legacyIndexes {
			if err := step("build index "+ix.name+" concurrently", false, func() error {
				// An index a cut-short CREATE INDEX CONCURRENTLY left invalid is built again.
				var valid *bool
				err := conn.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`,
					ident+"."+ix.name).Scan(&valid)
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				if valid != nil && *valid {
					return nil
				}
				if valid != nil {
					if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY "+ident+"."+ix.name); err != nil {
						return err
					}
				}
				_, err = conn.Exec(ctx, fmt.Sprintf("CREATE INDEX CONCURRENTLY %s ON %s %s", ix.name, changes, ix.columns))
				return err
			}); err != nil {
				return applied, err
			}
		}
	}
	var rest []string
	err := step("apply "+partitionMigration+" and the migrations after it (attach the old table)", true, func() error {
		return retryLock(ctx, func() error {
			var err error
			rest, err = MigrateConn(ctx, conn, schema, "")
			return err
		})
	})
	return append(applied, rest...), err
}

// legacyIndexes are the indexes of the partitioned changes that the old table lacks: 012's,
// under the names 012 looks for ((cluster, observed_at) it has already), and those 013
// and 015 create on the parent, which then attach these instead of building theirs under
// the migration's lock (016 drops changes_key again: 012 needs it to attach).
var legacyIndexes = []struct{ name, columns string }{
	{"changes_legacy_id", "(id)"},
	{"changes_legacy_key", "(cluster, api_group, resource, namespace, name, epoch, resource_version, op)"},
	{"changes_legacy_observed_at", "USING brin (observed_at)"},
	{"changes_legacy_key_observed", "(cluster, api_group, resource, namespace, name, observed_at, id)"},
	{"changes_legacy_feed", "(cluster, observed_at, id)"},
	{"changes_legacy_feed_deletes", "(cluster, observed_at, id) WHERE op = 'delete'"},
}

// retryLock runs fn again, a few times, while it fails for lack of a lock
// (lock_timeout).
func retryLock(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 10 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		var pgErr *pgconn.PgError
		if err = fn(); !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return err
		}
	}
	return err
}
