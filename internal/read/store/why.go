package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// DefaultLookback is how far back Why looks unless told: the half hour before an
// incident in which the change that caused it usually is.
const DefaultLookback = 30 * time.Minute

// WhyQuery names an object that broke and the window before it.
type WhyQuery struct {
	Group, Resource string        // "" group for the core group
	Namespace, Name string        // "" namespace for a cluster-scoped object
	At              time.Time     // when it broke; zero: now
	Lookback        time.Duration // how far back from At; 0: DefaultLookback
	AllClusters     bool          // every cluster with a checkpoint, not only the store's
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
}

// Why lists the changes in the window before q.At to the object and to what it depends
// on (why(), migration 019), oldest first. An object the store does not hold gives none.
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
	}
	return collect(ctx, s, "read why", "why", pgx.NamedArgs{"resource": resourceName(q.Group, q.Resource),
		"namespace": q.Namespace, "name": q.Name, "at": at, "lookback": lookback, "cluster": cluster}, scanWhy)
}

func scanWhy(row pgx.CollectableRow) (WhyRow, error) {
	var (
		r                                  WhyRow
		op                                 string
		user, impersonator, agent, matched *string
	)
	err := row.Scan(&r.Relation, &r.Depth, &r.Cluster, &r.Resource.Group, &r.Resource.Resource, &r.Key.Namespace, &r.Key.Name,
		&r.ChangeID, &r.ObservedAt, &op, &r.RV, &r.UID, &r.Changed, &r.ChangedBy, &user, &impersonator, &agent, &matched)
	r.Op = change.Op(op)
	if user != nil {
		r.Actor = &change.Actor{Username: *user, Impersonator: deref(impersonator), UserAgent: deref(agent), Match: deref(matched)}
	}
	return r, err
}
