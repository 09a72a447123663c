package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ErrNoHistory is History's error for a key with no changes rows in the sink's cluster.
var ErrNoHistory = errors.New("no changes recorded")

// Version is one changes row of an object, as `kube-cdc history` shows it.
type Version struct {
	ID         int64 // changes.id: the order versions were written in
	ObservedAt time.Time
	Op         change.Op
	RV         change.RV
	UID        string
	ChangedBy  string
	Inferred   bool
	Reason     string // why an inferred delete happened; "" when observed
	Snapshot   bool
	// Object is the version's JSON; nil for an inferred delete, which carries no state.
	Object json.RawMessage
	// Previous is the object this version changed: the object of the key's row before it
	// in id order, even when that row is older than HistoryQuery.Since. Nil when there is
	// none to compare with: the key's first row, the first row after a delete, the first
	// row of a new uid (a recreated object starts afresh).
	Previous json.RawMessage
	// Actor is who made the change, from the apiserver's audit events (the view
	// change_actors); nil when unknown, or when the schema predates 014_actors.
	Actor *change.Actor
}

// HistoryQuery names one object and how far back to read.
type HistoryQuery struct {
	Group, Resource string // "" group for the core group
	Namespace, Name string // "" namespace for a cluster-scoped object
	Since           time.Time
}

// History returns the versions of one object of the sink's cluster observed at or after
// q.Since (all of them when zero), in id order, each with the object it changed (see
// Version.Previous; the migration 005_history's SQL function history applies the same
// rule). It returns ErrNoHistory when the key has no changes rows at all, and no error
// when it has some but none since q.Since.
func (s *Sink) History(ctx context.Context, q HistoryQuery) ([]Version, error) {
	var since *time.Time
	if !q.Since.IsZero() {
		since = &q.Since
	}
	schema := pgx.Identifier{s.opts.Schema}.Sanitize()
	var actors bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".change_actors").Scan(&actors); err != nil {
		return nil, fmt.Errorf("read the history: %w", classify(err, s.password))
	}
	actorJoin := "LEFT JOIN (SELECT NULL::bigint AS change_id, NULL AS username, NULL AS impersonator, NULL AS user_agent, " +
		"NULL AS verb, NULL AS subresource, NULL AS audit_id, NULL AS match, NULL::interval AS distance) a ON false"
	if actors {
		actorJoin = ActorJoinSQL(schema, "x.username, x.impersonator, x.user_agent, x.verb, x.subresource, x.audit_id, x.match, x.distance")
	}
	// Without JIT: the query probes every partition of changes, and the actor view's
	// subqueries in each, so at 10M rows it is estimated above jit_above_cost; compiling
	// it cost more than running it (docs/benchmarks.md).
	var versions []Version
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(historySQL, schema, actorJoin),
			s.cluster, q.Group, q.Resource, q.Namespace, q.Name, since)
		if err != nil {
			return err
		}
		versions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Version, error) {
			var v Version
			var op string
			var user, impersonator, agent, verb, sub, auditID, match *string
			var distance *float64
			err := row.Scan(&v.ID, &v.ObservedAt, &op, &v.RV, &v.UID, &v.ChangedBy, &v.Inferred, &v.Reason, &v.Snapshot,
				&v.Object, &v.Previous, &user, &impersonator, &agent, &verb, &sub, &auditID, &match, &distance)
			v.Op = change.Op(op)
			if user != nil {
				v.Actor = &change.Actor{Username: *user, Impersonator: deref(impersonator), UserAgent: deref(agent), Verb: deref(verb),
					Subresource: deref(sub), AuditID: deref(auditID), Match: deref(match)}
				if distance != nil {
					v.Actor.Distance = time.Duration(*distance * float64(time.Second))
				}
			}
			return v, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the history: %w", classify(err, s.password))
	}
	if len(versions) > 0 {
		return versions, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s.changes
		WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND namespace = $4 AND name = $5)`,
		pgx.Identifier{s.opts.Schema}.Sanitize()), s.cluster, q.Group, q.Resource, q.Namespace, q.Name).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read the history: %w", classify(err, s.password))
	}
	if !exists {
		return nil, ErrNoHistory
	}
	return nil, nil
}

// historySQL: $1 cluster, $2 group, $3 resource, $4 namespace, $5 name, $6 since (NULL:
// all). The previous object is taken before the since filter, so the first version shown
// still compares with its real predecessor. The changes_key_observed index leads with the key.
// ActorJoinSQL is the LEFT JOIN LATERAL that gives each version of one key its actor, as
// the view change_actors (migration 014) defines it, with cols (over the lookup's alias x)
// as the columns of alias a. The query names the key as $1 cluster, $2 group, $3 resource,
// $4 namespace, $5 name, and its versions as rows of changes aliased h (uid,
// resource_version, epoch, op, inferred, object, observed_at). Each version's actor is
// looked up from its own columns (change_actor; the view would read the change again),
// and only when the key has an audit event at all, or its namespace a deletecollection:
// the rest of the time (most keys; every key of a cluster whose audit events are not
// received) the lookup, ~15 µs a version, is a one-time filter.
func ActorJoinSQL(schema, cols string) string {
	return fmt.Sprintf(`LEFT JOIN LATERAL (SELECT %[2]s
		  FROM %[1]s.change_actor($1, $2, $3, $4, $5, h.uid, h.resource_version, h.epoch, h.op, h.inferred,
		                          h.object -> 'metadata' ? 'deletionTimestamp', h.observed_at) x
		 WHERE EXISTS (SELECT 1 FROM %[1]s.audit_events e
		                WHERE e.cluster = $1 AND e.api_group = $2 AND e.resource = $3 AND e.namespace = $4
		                  AND e.name IN ($5, ''))
		OFFSET 0) a ON true`, schema, cols) // OFFSET 0: kept in the lookup, the EXISTS is its one-time filter
}

const historySQL = `SELECT h.id, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, coalesce(h.reason, ''),
		h.snapshot, h.object, h.previous, a.username, a.impersonator, a.user_agent, a.verb, a.subresource, a.audit_id, a.match,
		extract(epoch FROM a.distance)::float8
	  FROM (SELECT id, observed_at, op, resource_version, uid, changed_by, inferred, reason, snapshot, object, epoch,
	               CASE WHEN lag(op) OVER w <> 'delete' AND (lag(uid) OVER w = uid OR '' IN (uid, lag(uid) OVER w))
	                    THEN lag(object) OVER w END AS previous
	          FROM %[1]s.changes
	         WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND namespace = $4 AND name = $5
	        WINDOW w AS (ORDER BY id)) h
	  %[2]s
	 WHERE $6::timestamptz IS NULL OR h.observed_at >= $6
	 ORDER BY h.id`

// RecordedResources returns every resource the schema keeps checkpoints of for the sink's
// cluster (any sink), with the kind of one of its objects ("" when it has none), ordered
// by group and resource: what a name given on the command line can mean.
func (s *Sink) RecordedResources(ctx context.Context) ([]change.Resource, error) {
	schema := pgx.Identifier{s.opts.Schema}.Sanitize()
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT c.api_group, c.resource, coalesce(k.kind, '')
		  FROM (SELECT DISTINCT api_group, resource FROM %[1]s.checkpoints WHERE cluster = $1) c
		  LEFT JOIN LATERAL (SELECT kind FROM %[1]s.objects o
		                      WHERE o.cluster = $1 AND o.api_group = c.api_group AND o.resource = c.resource
		                      LIMIT 1) k ON true
		 ORDER BY 1, 2`, schema), s.cluster)
	if err != nil {
		return nil, fmt.Errorf("read the recorded resources: %w", classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change.Resource, error) {
		var r change.Resource
		err := row.Scan(&r.Group, &r.Resource, &r.Kind)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the recorded resources: %w", classify(err, s.password))
	}
	return out, nil
}

// HistoryNamespaces returns the namespaces in which the sink's cluster has changes rows
// of an object of the resource with that name, sorted ("" for a cluster-scoped object).
func (s *Sink) HistoryNamespaces(ctx context.Context, group, resource, name string) ([]string, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT namespace FROM %s.changes
		WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND name = $4 ORDER BY 1`,
		pgx.Identifier{s.opts.Schema}.Sanitize()), s.cluster, group, resource, name)
	if err != nil {
		return nil, fmt.Errorf("read the history: %w", classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the history: %w", classify(err, s.password))
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
