package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
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

// Status reports every checkpoint of the store's cluster in the schema (one per sink,
// resource and scope) with the resource's object and quarantine counts.
func (s *Store) Status(ctx context.Context) ([]ResourceStatus, error) {
	return collect(ctx, s, "read status", "status", pgx.NamedArgs{"cluster": s.cluster},
		func(row pgx.CollectableRow) (ResourceStatus, error) {
			var r ResourceStatus
			var since *time.Time
			err := row.Scan(&r.Sink, &r.Group, &r.Resource, &r.Scope, &r.Checkpoint, &r.UpdatedAt, &r.Live, &r.Deleted,
				&r.Quarantined, &r.Epoch, &r.EpochReason, &since, &r.HistorySkipped)
			if since != nil {
				r.EpochSince = *since
			}
			return r, err
		})
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

// QuarantinedChanges returns the unresolved quarantine rows of the store's cluster, at
// most perResource of each resource (ordered by namespace, name and RV), so that status
// can name them without reading a quarantine that grew large.
func (s *Store) QuarantinedChanges(ctx context.Context, perResource int) ([]QuarantinedChange, error) {
	return collect(ctx, s, "read the quarantine", "quarantined", pgx.NamedArgs{"cluster": s.cluster, "per": perResource},
		func(row pgx.CollectableRow) (QuarantinedChange, error) {
			var q QuarantinedChange
			err := row.Scan(&q.Group, &q.Resource, &q.Key.Namespace, &q.Key.Name, &q.UID, &q.RV, &q.Op,
				&q.Reason, &q.SQLState, &q.QuarantinedAt)
			return q, err
		})
}

// Writers lists the running kube-cdc processes that write the store's sink (same
// database, schema, cluster and sink name): the holder of the writer lock first, then
// those waiting for it. More than one means two kube-cdc run without leader election.
func (s *Store) Writers(ctx context.Context) ([]pgdb.Writer, error) {
	ws, err := pgdb.Writers(ctx, s.pool, pgdb.WriterKey(s.schema, s.cluster, s.sink))
	if err != nil {
		return nil, s.fail("read the writer lock", err)
	}
	return ws, nil
}
