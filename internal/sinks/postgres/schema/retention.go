package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

// RetentionEvery is how often, at most, a writer's upkeep deletes old rows in the
// background: old changes here, old events in the sink (events.go).
const RetentionEvery = time.Minute

// retentionEvery is how often, at most, AfterWrite starts the deletion of old changes
// rows; partitionsEvery how often it creates the months ahead (EnsurePartitions).
const (
	retentionEvery  = RetentionEvery
	partitionsEvery = time.Hour
)

// AfterWrite starts the background upkeep of changes, so the write that calls it does
// not wait for it, never twice at a time: every partitionsEvery the months ahead
// (EnsurePartitions), and every retentionEvery, with opts.Retention set, the deletion of
// changes older than it (Retain).
func (u *Upkeep) AfterWrite() {
	now := time.Now()
	partitions := now.UnixNano()-u.lastPartitions.Load() >= int64(partitionsEvery)
	retain := u.opts.Retention > 0 && now.UnixNano()-u.lastRetention.Load() >= int64(retentionEvery)
	if !partitions && !retain || !u.retentionBusy.CompareAndSwap(false, true) {
		return
	}
	if partitions {
		u.lastPartitions.Store(now.UnixNano())
	}
	if retain {
		u.lastRetention.Store(now.UnixNano())
	}
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		defer u.retentionBusy.Store(false)
		if partitions {
			u.ensurePartitionsLogged(u.ctx)
		}
		if !retain {
			return
		}
		res, err := u.Retain(u.ctx, now.Add(-u.opts.Retention))
		if err != nil && u.ctx.Err() == nil {
			u.log.Warn("retention: delete old changes", "sink", u.sink, "error", err)
			return
		}
		if res.Deleted > 0 || len(res.Dropped) > 0 || res.AuditEvents > 0 {
			u.log.Info("retention: removed old changes", "sink", u.sink, "rows", res.Deleted, "partitions dropped", res.Dropped,
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
func (u *Upkeep) Retain(ctx context.Context, cutoff time.Time) (RetentionResult, error) {
	var res RetentionResult
	auditCutoff := cutoff
	if err := u.dropDetached(ctx); err != nil {
		return res, err
	}
	parts, err := u.partitions(ctx)
	if err != nil {
		return res, err
	}
	for _, p := range parts {
		if p.lower != nil && !p.lower.Before(cutoff) {
			continue // entirely newer
		}
		if p.upper != nil && !p.upper.After(cutoff) {
			dropped, err := u.dropPartition(ctx, p)
			if err != nil {
				return res, err
			}
			if dropped {
				res.Dropped = append(res.Dropped, p.name)
				continue
			}
		}
		if u.opts.RetentionByPartition && (p.upper == nil || p.upper.After(cutoff)) {
			// Only whole months go: the audit events of the changes kept stay too.
			if p.lower != nil && p.lower.Before(auditCutoff) {
				auditCutoff = *p.lower
			}
			continue
		}
		n, err := u.deleteRows(ctx, p, cutoff)
		res.Deleted += n
		if err != nil {
			return res, err
		}
	}
	n, err := u.retainAuditEvents(ctx, auditCutoff.Add(-auditRetentionMargin))
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
func (u *Upkeep) retainAuditEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := u.pool.Exec(ctx, u.sql.retentionAudit, u.cluster, cutoff, RetentionChunk)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			u.log.Warn("retention: no privilege to delete old audit events; they are kept", "sink", u.sink, "error", pgErr.Message)
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("delete old audit events: %w", pgdb.Classify(err, u.password))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < RetentionChunk {
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

func (u *Upkeep) partitions(ctx context.Context) ([]partition, error) {
	rows, err := u.pool.Query(ctx, u.sql.partitions)
	if err != nil {
		return nil, fmt.Errorf("list the partitions of changes: %w", pgdb.Classify(err, u.password))
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partition, error) {
		var p partition
		err := row.Scan(&p.name, &p.lower, &p.upper)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the partitions of changes: %w", pgdb.Classify(err, u.password))
	}
	return parts, nil
}

// deleteRows deletes the cluster's rows of partition p observed before cutoff, in
// chunks.
func (u *Upkeep) deleteRows(ctx context.Context, p partition, cutoff time.Time) (int64, error) {
	sql, args := u.sql.retentionRows, []any{u.cluster, cutoff, RetentionChunk,
		pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}}
	switch {
	case p.lower == nil && p.upper == nil: // the default partition
		sql, args[3] = u.sql.retentionDefault, pgx.Identifier{u.schema, p.name}.Sanitize()
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
		tag, err := u.pool.Exec(ctx, sql, args...)
		if err != nil {
			return total, fmt.Errorf("delete old changes of %s: %w", p.name, pgdb.Classify(err, u.password))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < RetentionChunk {
			return total, nil
		}
	}
}

// dropPartition drops p when no other cluster wants its rows, and reports whether it
// did. Not dropped for lack of the lock or of the privilege (DROP needs to own changes):
// false, and Retain deletes the rows instead.
func (u *Upkeep) dropPartition(ctx context.Context, p partition) (bool, error) {
	ident := pgx.Identifier{u.schema, p.name}.Sanitize()
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
		err := pgx.BeginFunc(ctx, u.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", dropLockTimeout.Milliseconds())); err != nil {
				return err
			}
			// Locked first, so no row can come in between the question and the DROP.
			if _, err := tx.Exec(ctx, "LOCK TABLE "+ident+" IN SHARE MODE"); err != nil {
				return err
			}
			var others int
			if err := tx.QueryRow(ctx, fmt.Sprintf(u.sql.partitionWanted, ident), u.cluster, *p.upper).Scan(&others); err != nil {
				return err
			}
			if others > 0 {
				return nil
			}
			// Detached here, dropped after the commit: changes is locked exclusively for
			// the catalog change alone, not for the DROP's file work. The comment marks
			// the table for dropDetached should the DROP not happen.
			if _, err := tx.Exec(ctx, "ALTER TABLE "+pgx.Identifier{u.schema, "changes"}.Sanitize()+" DETACH PARTITION "+ident); err != nil {
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
				if _, err := u.pool.Exec(ctx, "DROP TABLE "+ident); err != nil {
					return true, fmt.Errorf("drop the detached partition %s: %w", p.name, pgdb.Classify(err, u.password))
				}
			}
			return dropped, nil
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
			u.log.Debug("retention: no privilege to drop a partition; deleting its rows", "sink", u.sink, "partition", p.name)
			return false, nil
		case errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01"): // lock_not_available, deadlock
			lastErr = err
			continue
		default:
			return false, fmt.Errorf("drop partition %s: %w", p.name, pgdb.Classify(err, u.password))
		}
	}
	u.log.Info("retention: changes stayed busy; dropping the partition at the next run", "sink", u.sink,
		"partition", p.name, "error", lastErr)
	return false, nil
}

// detachedMark is the comment on a partition retention detached and is about to drop.
const detachedMark = "'kube-cdc: detached by retention, to be dropped'"

// dropDetached drops the tables a retention detached but did not drop (it was stopped
// between the two).
func (u *Upkeep) dropDetached(ctx context.Context) error {
	rows, err := u.pool.Query(ctx, u.sql.detached, u.schema)
	if err != nil {
		return fmt.Errorf("list detached partitions: %w", pgdb.Classify(err, u.password))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list detached partitions: %w", pgdb.Classify(err, u.password))
	}
	for _, n := range names {
		if _, err := u.pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{u.schema, n}.Sanitize()); err != nil {
			return fmt.Errorf("drop the detached partition %s: %w", n, pgdb.Classify(err, u.password))
		}
	}
	return nil
}

// RetentionChunk is how many rows one retention statement deletes at most, so that no
// statement holds its locks for long.
const RetentionChunk = 10000

const (
	dropLockTimeout = 200 * time.Millisecond
	dropAttempts    = 5
)
