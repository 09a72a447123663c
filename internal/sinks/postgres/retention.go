package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// retentionEvery is how often, at most, Write triggers the deletion of old changes rows;
// partitionsEvery how often it creates the months ahead (EnsurePartitions).
const (
	retentionEvery  = time.Minute
	partitionsEvery = time.Hour
)

// maybeRetain starts the background upkeep of changes, so Write does not wait for it,
// never twice at a time: every partitionsEvery the months ahead (EnsurePartitions), and
// every retentionEvery, with opts.Retention set, the deletion of changes older than it
// (Retain).
func (s *Sink) maybeRetain() {
	now := time.Now()
	partitions := now.UnixNano()-s.lastPartitions.Load() >= int64(partitionsEvery)
	retain := s.opts.Retention > 0 && now.UnixNano()-s.lastRetention.Load() >= int64(retentionEvery)
	if !partitions && !retain || !s.retentionBusy.CompareAndSwap(false, true) {
		return
	}
	if partitions {
		s.lastPartitions.Store(now.UnixNano())
	}
	if retain {
		s.lastRetention.Store(now.UnixNano())
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.retentionBusy.Store(false)
		if partitions {
			s.ensurePartitionsLogged(s.bgCtx)
		}
		if !retain {
			return
		}
		res, err := s.Retain(s.bgCtx, now.Add(-s.opts.Retention))
		if err != nil && s.bgCtx.Err() == nil {
			s.log.Warn("retention: delete old changes", "sink", s.name, "error", err)
			return
		}
		if res.Deleted > 0 || len(res.Dropped) > 0 || res.AuditEvents > 0 {
			s.log.Info("retention: removed old changes", "sink", s.name, "rows", res.Deleted, "partitions dropped", res.Dropped,
				"audit events", res.AuditEvents)
		}
	}()
}

// RetentionResult is what one Retain removed.
type RetentionResult struct {
	Dropped []string // partitions dropped whole
	Deleted int64    // rows deleted one by one (boundary partitions, shared ones, the default)
	// AuditEvents is how many of the cluster's audit events (migration 014) were deleted.
	AuditEvents int64
}

// DeleteExpiredChanges is Retain, returning only the rows it deleted one by one.
func (s *Sink) DeleteExpiredChanges(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.Retain(ctx, cutoff)
	return res.Deleted, err
}

// Retain removes the sink's cluster's changes observed before cutoff, partition by
// partition (migration 012):
//
//   - a partition entirely older than cutoff (its upper bound ≤ cutoff) is dropped whole
//     when no other cluster still wants a row of it: every other cluster with rows in it
//     records, in the retention table, a retention whose cutoff has passed the partition
//     too. A cluster that keeps its history forever (or is not recorded) keeps the
//     partition: this cluster then deletes its own rows in it, and the last cluster whose
//     retention passes the partition drops it.
//   - in the boundary partition (cutoff inside its range), the legacy partition and the
//     default one, the cluster's rows before cutoff are deleted in chunks, so no
//     statement holds locks for long.
//
// Then the cluster's audit events received before cutoff less auditRetentionMargin go
// too (retainAuditEvents); with opts.RetentionByPartition, before the start of the
// boundary month instead, whose changes are kept.
//
// With opts.RetentionByPartition only the first rule applies (and rows in a shared
// month that others still want are deleted): no boundary, legacy or default rows go.
//
// A month goes by DETACH PARTITION (an ACCESS EXCLUSIVE lock on changes for the catalog
// change alone) and then a DROP of the detached table, which locks changes no more. The
// DETACH waits at most dropLockTimeout for its lock, so writers never queue behind it for
// longer, and is tried again a few times, then at the next run.
func (s *Sink) Retain(ctx context.Context, cutoff time.Time) (RetentionResult, error) {
	var res RetentionResult
	auditCutoff := cutoff
	if err := s.dropDetached(ctx); err != nil {
		return res, err
	}
	parts, err := s.partitions(ctx)
	if err != nil {
		return res, err
	}
	for _, p := range parts {
		if p.lower != nil && !p.lower.Before(cutoff) {
			continue // entirely newer
		}
		if p.upper != nil && !p.upper.After(cutoff) {
			dropped, err := s.dropPartition(ctx, p)
			if err != nil {
				return res, err
			}
			if dropped {
				res.Dropped = append(res.Dropped, p.name)
				continue
			}
		}
		if s.opts.RetentionByPartition && (p.upper == nil || p.upper.After(cutoff)) {
			// Only whole months go: the audit events of the changes kept stay too.
			if p.lower != nil && p.lower.Before(auditCutoff) {
				auditCutoff = *p.lower
			}
			continue
		}
		n, err := s.deleteRows(ctx, p, cutoff)
		res.Deleted += n
		if err != nil {
			return res, err
		}
	}
	n, err := s.retainAuditEvents(ctx, auditCutoff.Add(-auditRetentionMargin))
	res.AuditEvents = n
	return res, err
}

// auditRetentionMargin is how much longer than changes audit events are kept: the
// nearest join looks a minute either side of a change (migration 014), so a change
// observed just after the cutoff keeps the event that made it.
const auditRetentionMargin = time.Minute

// retainAuditEvents deletes the cluster's audit events received before cutoff, in
// chunks. By received_at, kube-cdc's clock as changes' observed_at is (not the
// apiserver's stage_at): an event arrives within seconds of the change it made, and
// received_at is indexed. The changes they joined are older than the cutoff and are
// deleted too. A role without the privilege to delete them (the receiver may write
// with another) is logged, and the changes' retention stands.
func (s *Sink) retainAuditEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.sql.retentionAudit, s.cluster, cutoff, retentionChunk)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			s.log.Warn("retention: no privilege to delete old audit events; they are kept", "sink", s.name, "error", pgErr.Message)
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("delete old audit events: %w", classify(err, s.password))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < retentionChunk {
			return total, nil
		}
	}
}

// partition is one partition of changes and its range; nil bounds are MINVALUE or
// MAXVALUE, both nil the default partition.
type partition struct {
	name         string
	lower, upper *time.Time
}

func (s *Sink) partitions(ctx context.Context) ([]partition, error) {
	rows, err := s.pool.Query(ctx, s.sql.partitions)
	if err != nil {
		return nil, fmt.Errorf("list the partitions of changes: %w", classify(err, s.password))
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partition, error) {
		var p partition
		err := row.Scan(&p.name, &p.lower, &p.upper)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the partitions of changes: %w", classify(err, s.password))
	}
	return parts, nil
}

// deleteRows deletes the cluster's rows of partition p observed before cutoff, in
// chunks.
func (s *Sink) deleteRows(ctx context.Context, p partition, cutoff time.Time) (int64, error) {
	sql, args := s.sql.retentionRows, []any{s.cluster, cutoff, retentionChunk,
		pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}}
	switch {
	case p.lower == nil && p.upper == nil: // the default partition
		sql, args[3] = s.sql.retentionDefault, pgx.Identifier{s.opts.Schema, p.name}.Sanitize()
		args = args[:4]
	default:
		if p.lower != nil {
			args[3] = *p.lower
		}
		if p.upper != nil {
			args[4] = *p.upper
		}
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sql, args...)
		if err != nil {
			return total, fmt.Errorf("delete old changes of %s: %w", p.name, classify(err, s.password))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < retentionChunk {
			return total, nil
		}
	}
}

// dropPartition drops p when no other cluster wants its rows, and reports whether it
// did. Not dropped for lack of the lock or of the privilege (DROP needs to own changes):
// false, and Retain deletes the rows instead.
func (s *Sink) dropPartition(ctx context.Context, p partition) (bool, error) {
	ident := pgx.Identifier{s.opts.Schema, p.name}.Sanitize()
	var lastErr error
	for attempt := range dropAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Duration(attempt) * dropLockTimeout):
			}
		}
		dropped := false
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", dropLockTimeout.Milliseconds())); err != nil {
				return err
			}
			// Locked first, so no row can come in between the question and the DROP.
			if _, err := tx.Exec(ctx, "LOCK TABLE "+ident+" IN SHARE MODE"); err != nil {
				return err
			}
			var others int
			if err := tx.QueryRow(ctx, fmt.Sprintf(s.sql.partitionWanted, ident), s.cluster, *p.upper).Scan(&others); err != nil {
				return err
			}
			if others > 0 {
				return nil
			}
			// Detached here, dropped after the commit: changes is locked exclusively for
			// the catalog change alone, not for the DROP's file work. The comment marks
			// the table for dropDetached should the DROP not happen.
			if _, err := tx.Exec(ctx, "ALTER TABLE "+pgx.Identifier{s.opts.Schema, "changes"}.Sanitize()+" DETACH PARTITION "+ident); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "COMMENT ON TABLE "+ident+" IS "+detachedMark); err != nil {
				return err
			}
			dropped = true
			return nil
		})
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			if dropped {
				if _, err := s.pool.Exec(ctx, "DROP TABLE "+ident); err != nil {
					return true, fmt.Errorf("drop the detached partition %s: %w", p.name, classify(err, s.password))
				}
			}
			return dropped, nil
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
			s.log.Debug("retention: no privilege to drop a partition; deleting its rows", "sink", s.name, "partition", p.name)
			return false, nil
		case errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01"): // lock_not_available, deadlock
			lastErr = err
			continue
		default:
			return false, fmt.Errorf("drop partition %s: %w", p.name, classify(err, s.password))
		}
	}
	s.log.Info("retention: changes stayed busy; dropping the partition at the next run", "sink", s.name,
		"partition", p.name, "error", lastErr)
	return false, nil
}

// detachedMark is the comment on a partition retention detached and is about to drop.
const detachedMark = "'kube-cdc: detached by retention, to be dropped'"

// dropDetached drops the tables a retention detached but did not drop (it was stopped
// between the two).
func (s *Sink) dropDetached(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, s.sql.detached, s.opts.Schema)
	if err != nil {
		return fmt.Errorf("list detached partitions: %w", classify(err, s.password))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list detached partitions: %w", classify(err, s.password))
	}
	for _, n := range names {
		if _, err := s.pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{s.opts.Schema, n}.Sanitize()); err != nil {
			return fmt.Errorf("drop the detached partition %s: %w", n, classify(err, s.password))
		}
	}
	return nil
}

const (
	retentionChunk  = 10000
	dropLockTimeout = 200 * time.Millisecond
	dropAttempts    = 5
)
