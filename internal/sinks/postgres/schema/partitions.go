package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

// EnsurePartitions creates the monthly partitions of changes (migration 012) from this
// month to opts.PartitionsAhead months after it that are missing, returns their names,
// and records the cluster's retention in the retention table (which Retain of every
// cluster reads before dropping a shared partition). New calls it at start, Write every
// partitionsEvery. Creating a partition needs to own changes: a role that does not
// gets an error here and its rows go to changes_default, so no write fails for it.
func (u *Upkeep) EnsurePartitions(ctx context.Context) ([]string, error) {
	var keep any // NULL: forever
	if u.opts.Retention > 0 {
		keep = u.opts.Retention
	}
	var recordErr error
	if _, err := u.pool.Exec(ctx, u.sql.recordRetention, u.cluster, keep); err != nil {
		recordErr = fmt.Errorf("record the retention of cluster %q: %w", u.cluster, pgdb.Classify(err, u.password))
	}
	rows, err := u.pool.Query(ctx, u.sql.ensurePartitions, int32(u.opts.partitionsAhead()))
	if err != nil {
		return nil, errors.Join(recordErr, fmt.Errorf("create the partitions of changes ahead: %w", pgdb.Classify(err, u.password)))
	}
	made, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errors.Join(recordErr, fmt.Errorf("create the partitions of changes ahead: %w", pgdb.Classify(err, u.password)))
	}
	return made, errors.Join(recordErr, u.analyzePartitions(ctx))
}

// ensurePartitionsLogged is EnsurePartitions for the background: its outcome goes to the
// log (a warning, once per hour at most, when it fails).
func (u *Upkeep) ensurePartitionsLogged(ctx context.Context) {
	made, err := u.EnsurePartitions(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		u.log.Warn("partitions: cannot record the cluster's retention or create the months ahead (changes of a month "+
			"not created go to changes_default until it is)", "sink", u.sink, "error", err)
	case len(made) > 0:
		u.log.Info("partitions: created", "sink", u.sink, "partitions", made)
	}
}
