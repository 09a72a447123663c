package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

// Statistics after bulk loads. Autovacuum analyzes a table a minute or more after it
// changed, and never a partitioned parent, so a new install's first minutes ran on no
// statistics at all: every plan on default estimates (docs/benchmarks.md, "The
// database's share"). The write path's statements are written so that their plans do
// not depend on statistics (each lookup names its row by a unique key); this is the
// second line: after a COPY batch (an initial sync, a relist, a resnapshot) the upkeep
// analyzes, in the background, the tables that load made stale, and EnsurePartitions
// analyzes each partition never analyzed, those it or the migrations created (empty, so
// PostgreSQL knows it is empty rather than assuming ten pages of rows).
//
// A table is due when it has no statistics, or when the rows loaded since the sink last
// analyzed it reach analyzeShare of its rows (analyzeMinRows at least): a relist of 20k
// objects into a changes of 10M rows analyzes objects, not changes. One analysis runs at
// a time, analyzeDelay after the load that made it due, so the batches of one initial
// sync cost one or two ANALYZEs, not one each. An ANALYZE the role may not run (it does
// not own the table) is a notice from PostgreSQL, not an error: nothing is lost then but
// the head start on autovacuum.
const (
	analyzeDelay   = time.Second
	analyzeShare   = 0.2
	analyzeMinRows = 1000
	analyzeTarget  = 10 // default_statistics_target of the sink's ANALYZE: 3,000 rows sampled
)

// Loaded records that a committed bulk load (a COPY batch) put n rows into objects and
// changes, and starts the background analysis unless one is pending.
func (u *Upkeep) Loaded(n int) {
	u.loaded.Add(int64(n))
	if !u.analyzeBusy.CompareAndSwap(false, true) {
		return
	}
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		defer u.analyzeBusy.Store(false)
		select {
		case <-u.ctx.Done():
			return
		case <-time.After(analyzeDelay):
		}
		if err := u.analyzeLoaded(u.ctx); err != nil && u.ctx.Err() == nil {
			u.log.Warn("analyze the tables a bulk load changed (autovacuum will, later)", "sink", u.sink, "error", err)
		}
	}()
}

// analyzeLoaded analyzes objects and changes where the rows loaded since the last
// analysis make them due (see above).
func (u *Upkeep) analyzeLoaded(ctx context.Context) error {
	loaded := u.loaded.Load()
	for _, table := range []string{"objects", "changes"} {
		qualified := pgx.Identifier{u.schema, table}.Sanitize()
		var rows float64
		var stats bool
		if err := u.pool.QueryRow(ctx, `SELECT c.reltuples, EXISTS (SELECT 1 FROM pg_statistic WHERE starelid = c.oid)
			FROM pg_class c WHERE c.oid = $1::regclass`, qualified).Scan(&rows, &stats); err != nil {
			return fmt.Errorf("read the statistics of %s: %w", table, pgdb.Classify(err, u.password))
		}
		if stats && float64(loaded) < max(analyzeMinRows, analyzeShare*rows) {
			continue
		}
		start := time.Now()
		// ANALYZE of a partitioned changes samples its partitions and analyzes each.
		if err := u.analyze(ctx, qualified); err != nil {
			return fmt.Errorf("analyze %s: %w", table, pgdb.Classify(err, u.password))
		}
		u.log.Debug("analyzed after a bulk load", "sink", u.sink, "table", table, "loaded", loaded,
			"rows_before", rows, "took", time.Since(start).String())
	}
	u.loaded.Add(-loaded)
	return nil
}

// analyzePartitions analyzes the partitions of changes that were never analyzed: those
// EnsurePartitions just created and those the migrations created, empty or nearly so.
func (u *Upkeep) analyzePartitions(ctx context.Context) error {
	rows, err := u.pool.Query(ctx, `SELECT c.relname FROM pg_partition_tree($1::regclass) t JOIN pg_class c ON c.oid = t.relid
		WHERE t.isleaf AND t.level > 0 AND c.reltuples < 0`, pgx.Identifier{u.schema, "changes"}.Sanitize())
	if err != nil {
		return fmt.Errorf("list the partitions of changes never analyzed: %w", pgdb.Classify(err, u.password))
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list the partitions of changes never analyzed: %w", pgdb.Classify(err, u.password))
	}
	for _, p := range parts {
		if err := u.analyze(ctx, pgx.Identifier{u.schema, p}.Sanitize()); err != nil {
			return fmt.Errorf("analyze the partition %s: %w", p, pgdb.Classify(err, u.password))
		}
	}
	return nil
}

// analyze runs ANALYZE of the qualified table with a sample of analyzeTarget: the write
// path's plans need the tables' sizes and their key columns' spread, not the histograms
// of jsonb the default target of 100 computes from 30,000 rows. At 20k objects of ~1.3 KB
// that took objects and changes 127 and 133 ms, against 656 and 604 ms at the default.
// Autovacuum analyzes again at the server's target once a tenth of the rows changed.
func (u *Upkeep) analyze(ctx context.Context, qualified string) error {
	return pgx.BeginFunc(ctx, u.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL default_statistics_target = %d", analyzeTarget)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "ANALYZE "+qualified)
		return err
	})
}
