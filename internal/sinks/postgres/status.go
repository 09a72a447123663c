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
			&epoch, &r.EpochReason, &since)
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
