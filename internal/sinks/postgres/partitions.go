package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnsurePartitions creates the monthly partitions of changes (migration 012) from this
// month to opts.PartitionsAhead months after it that are missing, returns their names,
// and records the cluster's retention in the retention table (which Retain of every
// cluster reads before dropping a shared partition). New calls it at start, Write every
// partitionsEvery. Creating a partition needs to own changes: a role that does not
// gets an error here and its rows go to changes_default, so no write fails for it.
func (s *Sink) EnsurePartitions(ctx context.Context) ([]string, error) {
	var keep any // NULL: forever
	if s.opts.Retention > 0 {
		keep = s.opts.Retention
	}
	var recordErr error
	if _, err := s.pool.Exec(ctx, s.sql.recordRetention, s.cluster, keep); err != nil {
		recordErr = fmt.Errorf("record the retention of cluster %q: %w", s.cluster, classify(err, s.password))
	}
	rows, err := s.pool.Query(ctx, s.sql.ensurePartitions, int32(s.opts.partitionsAhead()))
	if err != nil {
		return nil, errors.Join(recordErr, fmt.Errorf("create the partitions of changes ahead: %w", classify(err, s.password)))
	}
	made, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errors.Join(recordErr, fmt.Errorf("create the partitions of changes ahead: %w", classify(err, s.password)))
	}
	return made, errors.Join(recordErr, s.analyzePartitions(ctx))
}

// ensurePartitionsLogged is EnsurePartitions for the background: its outcome goes to the
// log (a warning, once per hour at most, when it fails).
func (s *Sink) ensurePartitionsLogged(ctx context.Context) {
	made, err := s.EnsurePartitions(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("partitions: cannot record the cluster's retention or create the months ahead (changes of a month "+
			"not created go to changes_default until it is)", "sink", s.name, "error", err)
	case len(made) > 0:
		s.log.Info("partitions: created", "sink", s.name, "partitions", made)
	}
}
