package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// AsOfQuery names a resource, optionally one namespace, and a moment.
type AsOfQuery struct {
	At              time.Time
	Group, Resource string // "" group for the core group
	// Namespace restricts the answer to one namespace ("" is the cluster-scoped objects');
	// AllNamespaces reads every one.
	Namespace     string
	AllNamespaces bool
}

// AsOfObject is one object as the sink had observed it at the moment (see the SQL
// function as_of, migration 013).
type AsOfObject struct {
	Namespace, Name string
	UID             string
	RV              change.RV
	Epoch           int
	// ChangeID is the changes row the version comes from; 0 when retention had deleted
	// every row of the key and the version is the objects row, unchanged since the moment.
	ChangeID   int64
	ObservedAt time.Time // when kube-cdc received the version
	Snapshot   bool      // the version was read by a relist
	Object     json.RawMessage
}

// AsOf returns every object of the resource in the sink's cluster as the sink had observed
// it at q.At (the SQL function as_of: per key the newest changes row observed at or
// before q.At, by (observed_at, id), without the keys whose newest row is a delete),
// ordered by namespace and name.
func (s *Sink) AsOf(ctx context.Context, q AsOfQuery) ([]AsOfObject, error) {
	name := q.Resource
	if q.Group != "" {
		name += "." + q.Group
	}
	var ns *string
	if !q.AllNamespaces {
		ns = &q.Namespace
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT namespace, name, uid, rv, epoch, coalesce(change_id, 0), observed_at,
			snapshot, object FROM %s.as_of($1, $2, $3, $4)`, pgx.Identifier{s.opts.Schema}.Sanitize()),
		q.At, name, ns, s.cluster)
	if err != nil {
		return nil, fmt.Errorf("read the objects as of %s: %w", q.At.UTC().Format(time.RFC3339Nano), classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AsOfObject, error) {
		var o AsOfObject
		err := row.Scan(&o.Namespace, &o.Name, &o.UID, &o.RV, &o.Epoch, &o.ChangeID, &o.ObservedAt, &o.Snapshot, &o.Object)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the objects as of %s: %w", q.At.UTC().Format(time.RFC3339Nano), classify(err, s.password))
	}
	return out, nil
}
