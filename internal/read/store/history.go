package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ErrNoHistory is History's error for a key with no changes rows in the store's cluster.
var ErrNoHistory = errors.New("no changes recorded")

// Revision is one changes row of an object: a version as history shows it, with the
// object it changed and who made it (object_versions(), migration 020).
type Revision struct {
	ID         int64 // changes.id: the order versions were written in
	ObservedAt time.Time
	Op         change.Op
	RV         change.RV
	UID        string
	ChangedBy  string
	Inferred   bool
	Reason     string // why an inferred delete happened; "" when observed
	Snapshot   bool
	Epoch      int
	// Object is the version's JSON; nil for an inferred delete, which carries no state.
	Object json.RawMessage
	// Previous is the object this version changed: the object of the key's row before it
	// in id order, even when that row is older than HistoryQuery.Since. Nil when there is
	// none to compare with: the key's first row, the first row after a delete, the first
	// row of a new uid (a recreated object starts afresh).
	Previous json.RawMessage
	// Actor is who made the change, from the apiserver's audit events (change_actor); nil
	// when unknown.
	Actor *change.Actor

	previousIsPrior bool // the read sent no Previous: it is the row before's Object
}

// HistoryQuery names one object and how far back to read.
type HistoryQuery struct {
	Cluster         string // "": the store's
	Group, Resource string // "" group for the core group
	Namespace, Name string // "" namespace for a cluster-scoped object
	Since           time.Time
}

// History returns the versions of one object observed at or after q.Since (all of them
// when zero), in id order, each with the object it changed (Revision.Previous) and its
// actor: one read of object_versions(), which history() reads too. It returns
// ErrNoHistory when the key has no changes rows at all, and no error when it has some but
// none since q.Since.
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]Revision, error) {
	if q.Cluster == "" {
		q.Cluster = s.cluster
	}
	var since *time.Time
	if !q.Since.IsZero() {
		since = &q.Since
	}
	args := pgx.NamedArgs{"cluster": q.Cluster, "group": q.Group, "resource": q.Resource,
		"namespace": q.Namespace, "name": q.Name}
	versions, err := collect(ctx, s, "read the history", "versions", pgx.NamedArgs{
		"resource": resourceName(q.Group, q.Resource), "namespace": q.Namespace, "name": q.Name,
		"cluster": q.Cluster, "since": since}, scanRevision)
	if err != nil {
		return nil, err
	}
	if len(versions) > 0 {
		// The read leaves out a previous the row before holds (sql/versions.sql).
		for i := range versions {
			if versions[i].previousIsPrior {
				versions[i].Previous = versions[i-1].Object
			}
		}
		return versions, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, query("history_exists"), args).Scan(&exists); err != nil {
		return nil, s.fail("read the history", err)
	}
	if !exists {
		return nil, ErrNoHistory
	}
	return nil, nil
}

func scanRevision(row pgx.CollectableRow) (Revision, error) {
	var (
		v                                               Revision
		op                                              string
		user, impersonator, agent, verb, sub, id, match *string
		distance                                        *float64
	)
	// The documents are scanned as bytes: into a json.RawMessage pgx would run them
	// through json.Unmarshal, whose validation of what PostgreSQL already validated was a
	// third of the object page's time at 10M rows.
	var object, previous []byte
	err := row.Scan(&v.ID, &v.ObservedAt, &op, &v.RV, &v.UID, &v.ChangedBy, &v.Inferred, &v.Reason, &v.Snapshot, &v.Epoch,
		&object, &previous, &v.previousIsPrior, &user, &impersonator, &agent, &verb, &sub, &id, &match, &distance)
	v.Op, v.Object, v.Previous = change.Op(op), object, previous
	if user != nil {
		v.Actor = &change.Actor{Username: *user, Impersonator: deref(impersonator), UserAgent: deref(agent), Verb: deref(verb),
			Subresource: deref(sub), AuditID: deref(id), Match: deref(match)}
		if distance != nil {
			v.Actor.Distance = time.Duration(*distance * float64(time.Second))
		}
	}
	return v, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// RecordedResources returns every resource the schema keeps checkpoints of for the
// store's cluster (any sink), with the kind of one of its objects ("" when it has none),
// ordered by group and resource: what a name given on the command line can mean.
func (s *Store) RecordedResources(ctx context.Context) ([]change.Resource, error) {
	return s.RecordedResourcesOf(ctx, s.cluster)
}

// RecordedResourcesOf is RecordedResources of the named cluster (the web UI's pages name
// theirs).
func (s *Store) RecordedResourcesOf(ctx context.Context, cluster string) ([]change.Resource, error) {
	return collect(ctx, s, "read the recorded resources", "recorded_resources", pgx.NamedArgs{"cluster": cluster},
		func(row pgx.CollectableRow) (change.Resource, error) {
			var r change.Resource
			err := row.Scan(&r.Group, &r.Resource, &r.Kind)
			return r, err
		})
}

// HistoryNamespaces returns the namespaces in which the store's cluster has changes rows
// of an object of the resource with that name, sorted ("" for a cluster-scoped object).
func (s *Store) HistoryNamespaces(ctx context.Context, group, resource, name string) ([]string, error) {
	return collect(ctx, s, "read the history", "history_namespaces",
		pgx.NamedArgs{"cluster": s.cluster, "group": group, "resource": resource, "name": name}, pgx.RowTo[string])
}
