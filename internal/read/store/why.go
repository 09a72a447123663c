package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// DefaultLookback is how far back Why looks unless told: the half hour before an
// incident in which the change that caused it usually is.
const DefaultLookback = 30 * time.Minute

// WhyQuery names an object that broke and the window before it.
type WhyQuery struct {
	Cluster         string        // "": the store's (AllClusters aside)
	Group, Resource string        // "" group for the core group
	Namespace, Name string        // "" namespace for a cluster-scoped object
	At              time.Time     // when it broke; zero: now
	Lookback        time.Duration // how far back from At; 0: DefaultLookback
	AllClusters     bool          // every cluster with a checkpoint, not only the store's
	// Objects reads each change's object and the object it changed too (WhyRow.Object,
	// WhyRow.Previous: what a diff needs, the web UI's /why page); without, they are nil
	// (`kube-cdc why`, which prints the changed paths).
	Objects bool
}

// WhyRow is one change in the window, and how it relates to the object.
type WhyRow struct {
	// Relation is how the changed object relates to the one that broke: self,
	// controller (Depth levels up its controllers), configmap, secret, node, service or
	// ingress.
	Relation   string
	Depth      int
	Cluster    string
	Resource   change.Resource // Group and Resource only
	Key        change.Key
	ChangeID   int64
	ObservedAt time.Time
	Op         change.Op
	RV         change.RV
	UID        string
	Changed    []string // the changed paths of a watch update, where stored
	ChangedBy  string   // the field manager
	Actor      *change.Actor
	// Object is the version's JSON and Previous the object it changed, as
	// Revision.Object and Revision.Previous are (object_versions()); both nil without
	// WhyQuery.Objects. Object is nil for an inferred delete, Previous when there is
	// none to compare with.
	Object, Previous json.RawMessage
	// Inferred says kube-cdc wrote the delete without seeing it (a relist found the object
	// gone), and Reason why; read with WhyQuery.Objects only.
	Inferred bool
	Reason   string
}

// Why lists the changes in the window before q.At to the object and to what it depends
// on (why(), migration 019), oldest first; with q.Objects, each with its object and the
// one it changed (sql/why_versions.sql: why() and object_versions(), one statement). An
// object the store does not hold gives none.
func (s *Store) Why(ctx context.Context, q WhyQuery) ([]WhyRow, error) {
	at := q.At
	if at.IsZero() {
		at = time.Now()
	}
	lookback := q.Lookback
	if lookback <= 0 {
		lookback = DefaultLookback
	}
	var cluster *string
	if !q.AllClusters {
		cluster = &s.cluster
		if q.Cluster != "" {
			cluster = &q.Cluster
		}
	}
	args := pgx.NamedArgs{"resource": resourceName(q.Group, q.Resource),
		"namespace": q.Namespace, "name": q.Name, "at": at, "lookback": lookback, "cluster": cluster}
	if q.Objects {
		return collect(ctx, s, "read why", "why_versions", args, func(row pgx.CollectableRow) (WhyRow, error) {
			var r WhyRow
			err := scanWhyInto(row, &r, &r.Object, &r.Previous, &r.Inferred, &r.Reason)
			return r, err
		})
	}
	return collect(ctx, s, "read why", "why", args, func(row pgx.CollectableRow) (WhyRow, error) {
		var r WhyRow
		err := scanWhyInto(row, &r)
		return r, err
	})
}

// scanWhyInto scans why()'s columns into r, and the columns after them into more.
func scanWhyInto(row pgx.CollectableRow, r *WhyRow, more ...any) error {
	var (
		op                                 string
		user, impersonator, agent, matched *string
	)
	err := row.Scan(append([]any{&r.Relation, &r.Depth, &r.Cluster, &r.Resource.Group, &r.Resource.Resource, &r.Key.Namespace, &r.Key.Name,
		&r.ChangeID, &r.ObservedAt, &op, &r.RV, &r.UID, &r.Changed, &r.ChangedBy, &user, &impersonator, &agent, &matched}, more...)...)
	r.Op = change.Op(op)
	if user != nil {
		r.Actor = &change.Actor{Username: *user, Impersonator: deref(impersonator), UserAgent: deref(agent), Match: deref(matched)}
	}
	return err
}
