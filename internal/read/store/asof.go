package store

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
		pgx.NamedArgs{"at": q.At, "resource": resourceName(q.Group, q.Resource), "namespace": namespaceArg(q), "cluster": s.cluster},
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

// AsOfTable is as_of()'s answer with every column as the function returns it, for a
// page that shows them as they come: the column names, then at most limit rows of
// values; more says a row was left out.
func (s *Store) AsOfTable(ctx context.Context, cluster string, q AsOfQuery, limit int) (columns []string, rows [][]any, more bool, err error) {
	r, err := s.pool.Query(ctx, query("as_of_table"), pgx.NamedArgs{"at": q.At, "resource": resourceName(q.Group, q.Resource),
		"namespace": namespaceArg(q), "cluster": cluster, "limit": limit + 1})
	if err != nil {
		return nil, nil, false, s.fail("as_of", err)
	}
	defer r.Close()
	for _, fd := range r.FieldDescriptions() {
		columns = append(columns, fd.Name)
	}
	for r.Next() {
		if len(rows) == limit {
			more = true
			break
		}
		vals, err := r.Values()
		if err != nil {
			return nil, nil, false, s.fail("as_of", err)
		}
		rows = append(rows, vals)
	}
	if err := r.Err(); err != nil {
		return nil, nil, false, s.fail("as_of", fmt.Errorf("%w", err))
	}
	return columns, rows, more, nil
}
