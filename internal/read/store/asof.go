package store

import (
	"context"
	"encoding/json"
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
	// Cluster is the cluster to read; "" is the store's (Options.Cluster).
	Cluster string
	// Limit, above 0, returns at most Limit objects (the first by namespace and name).
	Limit int
}

// AsOfObject is one object as the sink had observed it at the moment (as_of(), migration
// 013).
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

// AsOf returns every object of the resource in the store's cluster as the sink had
// observed it at q.At (as_of(): per key the newest changes row observed at or before
// q.At, by (observed_at, id), without the keys whose newest row is a delete), ordered by
// namespace and name.
func (s *Store) AsOf(ctx context.Context, q AsOfQuery) ([]AsOfObject, error) {
	return collect(ctx, s, "read the objects as of "+q.At.UTC().Format(time.RFC3339Nano), "as_of",
		pgx.NamedArgs{"at": q.At, "resource": resourceName(q.Group, q.Resource), "namespace": namespaceArg(q), "cluster": q.cluster(s), "limit": q.limit()},
		func(row pgx.CollectableRow) (AsOfObject, error) {
			var o AsOfObject
			err := row.Scan(&o.Namespace, &o.Name, &o.UID, &o.RV, &o.Epoch, &o.ChangeID, &o.ObservedAt, &o.Snapshot, &o.Object)
			return o, err
		})
}

func namespaceArg(q AsOfQuery) *string {
	if q.AllNamespaces {
		return nil
	}
	return &q.Namespace
}

func (q AsOfQuery) cluster(s *Store) string {
	if q.Cluster != "" {
		return q.Cluster
	}
	return s.cluster
}

// limit is the LIMIT of as_of.sql: NULL for no limit.
func (q AsOfQuery) limit() *int {
	if q.Limit <= 0 {
		return nil
	}
	return &q.Limit
}
