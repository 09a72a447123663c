package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ResourceStatus is one line of `kube-cdc status` for a PostgreSQL sink.
type ResourceStatus struct {
	Sink       string
	Group      string
	Resource   string
	Scope      string
	Checkpoint change.RV
	UpdatedAt  time.Time // when the checkpoint last moved or was rewritten
	Live       int64     // objects rows of the resource with deleted_at NULL (all scopes)
	Deleted    int64     // tombstones
	// Quarantined counts the resource's unresolved quarantine rows (all scopes): changes
	// PostgreSQL could not store, of keys no later version has replaced yet.
	Quarantined int64
	// Epoch is the checkpoint's epoch (0 until the first time travel); EpochReason and
	// EpochSince say what revealed it and when (the epochs row), when it is above 0.
	Epoch       int
	EpochReason string
	EpochSince  time.Time
	// HistorySkipped counts the versions of the scope written to objects but not to
	// changes, as noise (history_skipped, migration 011).
	HistorySkipped int64
}

// Status reports every checkpoint of this sink's cluster in the schema (one per sink,
// resource and scope) with the resource's object and quarantine counts.
func (s *Sink) Status(ctx context.Context) ([]ResourceStatus, error) {
	rows, err := s.pool.Query(ctx, s.sql.status, s.cluster)
	if err != nil {
		return nil, fmt.Errorf("read status: %w", classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResourceStatus, error) {
		var r ResourceStatus
		var epoch int32
		var since *time.Time
		err := row.Scan(&r.Sink, &r.Group, &r.Resource, &r.Scope, &r.Checkpoint, &r.UpdatedAt, &r.Live, &r.Deleted, &r.Quarantined,
			&epoch, &r.EpochReason, &since, &r.HistorySkipped)
		r.Epoch = int(epoch)
		if since != nil {
			r.EpochSince = *since
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read status: %w", classify(err, s.password))
	}
	return out, nil
}

// QuarantinedChange is one unresolved quarantine row: a change PostgreSQL could not store,
// of a key no later version has replaced yet.
type QuarantinedChange struct {
	Group, Resource string
	Key             change.Key
	UID             string
	RV              change.RV
	Op              string
	Reason          string // why PostgreSQL cannot store it
	SQLState        string
	QuarantinedAt   time.Time
}

// QuarantinedChanges returns the unresolved quarantine rows of this sink's cluster, at
// most perResource of each resource (ordered by namespace, name and RV), so that status
// can name them without reading a quarantine that grew large.
func (s *Sink) QuarantinedChanges(ctx context.Context, perResource int) ([]QuarantinedChange, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT api_group, resource, namespace, name, uid, resource_version, op,
			reason, sqlstate, quarantined_at
		  FROM (SELECT *, row_number() OVER (PARTITION BY api_group, resource
		                                    ORDER BY namespace, name, resource_version) AS n
		          FROM %s.quarantine WHERE cluster = $1 AND resolved_at IS NULL) q
		 WHERE n <= $2
		 ORDER BY api_group, resource, namespace, name, resource_version`,
		pgx.Identifier{s.opts.Schema}.Sanitize()), s.cluster, perResource)
	if err != nil {
		return nil, fmt.Errorf("read the quarantine: %w", classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (QuarantinedChange, error) {
		var q QuarantinedChange
		err := row.Scan(&q.Group, &q.Resource, &q.Key.Namespace, &q.Key.Name, &q.UID, &q.RV, &q.Op,
			&q.Reason, &q.SQLState, &q.QuarantinedAt)
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the quarantine: %w", classify(err, s.password))
	}
	return out, nil
}
