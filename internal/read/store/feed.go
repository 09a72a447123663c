package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// The web UI's reads: the frame of every page, the feed of changes and its chart, an
// object's relations. The feed and the chart are the one place this package writes SQL
// in Go: their conditions are the filters a page sets, each kept out of the statement
// when unset so that the planner sees only the indexes that serve it (a "@x IS NULL OR"
// condition would hide them).

// Features are the schema objects later migrations add.
type Features struct {
	AsOf   bool // as_of(timestamptz, text, text, text), migration 013
	Owners bool // the view owners, migration 013
	Actors bool // the view change_actors, migration 014
	Events bool // the table events, migration 019
}

// Features probes the schema for them.
func (s *Store) Features(ctx context.Context) (Features, error) {
	var f Features
	err := s.pool.QueryRow(ctx, query("features"), pgx.NamedArgs{"schema": s.schema}).Scan(&f.AsOf, &f.Owners, &f.Actors, &f.Events)
	if err != nil {
		return f, s.fail("probe the schema "+s.schema, err)
	}
	return f, nil
}

// Clusters are the clusters the schema holds checkpoints of, by name.
func (s *Store) Clusters(ctx context.Context) ([]string, error) {
	return collect(ctx, s, "read the clusters", "clusters", nil, pgx.RowTo[string])
}

// Resources are the resources cluster has checkpoints of, by resource then group.
func (s *Store) Resources(ctx context.Context, cluster string) ([]change.Resource, error) {
	return collect(ctx, s, "read the resources", "resources", pgx.NamedArgs{"cluster": cluster},
		func(row pgx.CollectableRow) (change.Resource, error) {
			var r change.Resource
			err := row.Scan(&r.Group, &r.Resource)
			return r, err
		})
}

// Ref names an object of a cluster.
type Ref struct {
	Group, Resource, Kind, Namespace, Name string
	Controller                             bool // an owner that is the object's controller
}

// Owners are the owners of an object (the view owners), by kind and name.
func (s *Store) Owners(ctx context.Context, cluster, group, resource, namespace, name string) ([]Ref, error) {
	return collect(ctx, s, "read the owners", "owners",
		pgx.NamedArgs{"cluster": cluster, "group": group, "resource": resource, "namespace": namespace, "name": name},
		func(row pgx.CollectableRow) (Ref, error) {
			r := Ref{Namespace: namespace}
			err := row.Scan(&r.Group, &r.Resource, &r.Kind, &r.Name, &r.Controller)
			return r, err
		})
}

// Children are the objects uid owns (the view owners), at most 200. namespace is the
// owner's ("" for a cluster-scoped owner): a namespaced owner's dependents live in its
// namespace, and only that namespace is read (sql/children.sql).
func (s *Store) Children(ctx context.Context, cluster, namespace, uid string) ([]Ref, error) {
	name, args := "children", pgx.NamedArgs{"cluster": cluster, "namespace": namespace, "uid": uid}
	if namespace == "" {
		name = "children_anywhere"
	}
	return collect(ctx, s, "read the children", name, args,
		func(row pgx.CollectableRow) (Ref, error) {
			var r Ref
			err := row.Scan(&r.Group, &r.Resource, &r.Kind, &r.Namespace, &r.Name)
			return r, err
		})
}

// Filter selects changes of one cluster observed in [From, To) (To zero: no end).
type Filter struct {
	Cluster   string
	From, To  time.Time
	Namespace string // "": every namespace
	// Resource "" is every resource; otherwise Group and Resource name one.
	Group, Resource string
	Name            string
	Op              string // "", create, update or delete
	Flag            string // "", snapshot, inferred (deletes) or observed (neither)
	User            string // the actor's username; only with Actors
	Actors          bool   // the schema has change_actors (Features.Actors)
	// Before, when above 0, keeps the rows below (BeforeAt, Before) in (observed_at, id)
	// order: the feed's next page.
	Before   int64
	BeforeAt time.Time
}

// where is the filter as SQL over changes c, its values in args.
func (f Filter) where(keyset bool, args pgx.NamedArgs) string {
	arg := func(name string, v any) string {
		args[name] = v
		return "@" + name
	}
	conds := []string{"c.cluster = " + arg("cluster", f.Cluster), "c.observed_at >= " + arg("from", f.From)}
	if !f.To.IsZero() {
		conds = append(conds, "c.observed_at < "+arg("to", f.To))
	}
	if f.Namespace != "" {
		conds = append(conds, "c.namespace = "+arg("namespace", f.Namespace))
	}
	if f.Resource != "" {
		conds = append(conds, "c.api_group = "+arg("group", f.Group), "c.resource = "+arg("resource", f.Resource))
	}
	if f.Name != "" {
		conds = append(conds, "c.name = "+arg("name", f.Name))
	}
	if op, ok := map[string]string{"create": "'create'", "update": "'update'", "delete": "'delete'"}[f.Op]; ok {
		// Spelled out for delete so the partial index changes_feed_deletes applies.
		conds = append(conds, "c.op = "+op)
	}
	switch f.Flag {
	case "snapshot":
		conds = append(conds, "c.snapshot")
	case "inferred":
		conds = append(conds, "c.inferred", "c.op = 'delete'")
	case "observed":
		conds = append(conds, "NOT c.inferred", "NOT c.snapshot")
	}
	if f.User != "" && f.Actors {
		// A scalar subquery with LIMIT: evaluated per row scanned, never the view over
		// every change (an EXISTS may become a semi-join that computes it all).
		conds = append(conds, "(SELECT a.username FROM change_actors a WHERE a.change_id = c.id AND a.change_observed_at = c.observed_at LIMIT 1) = "+arg("user", f.User))
	}
	if keyset && f.Before > 0 {
		conds = append(conds, "(c.observed_at, c.id) < ("+arg("before_at", f.BeforeAt)+", "+arg("before", f.Before)+")")
	}
	return strings.Join(conds, " AND ")
}

// FeedRow is one change in the feed.
type FeedRow struct {
	ID                               int64
	ObservedAt                       time.Time
	Group, Resource, Namespace, Name string
	UID                              string
	RV                               int64
	Op, Reason, ChangedBy            string
	Inferred, Snapshot               bool
	Epoch                            int
	User, Impersonator, Match        string // "" when unknown
	UserAgent                        string // the audit event's user agent; "" when unknown
}

// Feed returns the newest limit changes the filter selects, newest first, and whether
// more follow.
func (s *Store) Feed(ctx context.Context, f Filter, limit int) ([]FeedRow, bool, error) {
	args := pgx.NamedArgs{}
	where := f.where(true, args)
	actorCols, actorJoin := "'', '', '', ''", ""
	if f.Actors {
		actorCols = "coalesce(a.username, ''), coalesce(a.impersonator, ''), coalesce(a.match, ''), coalesce(a.user_agent, '')"
		// The page first, then its rows' actors, one lookup each: joined plainly, the
		// planner may compute the view for every change of the range.
		actorJoin = "LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.match, x.user_agent FROM change_actors x WHERE x.change_id = c.id AND x.change_observed_at = c.observed_at LIMIT 1) a ON true"
	}
	sql := `SELECT c.id, c.observed_at, c.api_group, c.resource, c.namespace, c.name, c.uid, c.resource_version,
		       c.op, coalesce(c.reason, ''), c.changed_by, c.inferred, c.snapshot, c.epoch, ` + actorCols + `
		  FROM (SELECT * FROM changes c
		         WHERE ` + where + `
		         ORDER BY c.observed_at DESC, c.id DESC
		         LIMIT ` + strconv.Itoa(limit+1) + `) c ` + actorJoin + `
		 ORDER BY c.observed_at DESC, c.id DESC`
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return nil, false, s.fail("read the feed", err)
	}
	out, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (FeedRow, error) {
		var r FeedRow
		err := cr.Scan(&r.ID, &r.ObservedAt, &r.Group, &r.Resource, &r.Namespace, &r.Name, &r.UID, &r.RV,
			&r.Op, &r.Reason, &r.ChangedBy, &r.Inferred, &r.Snapshot, &r.Epoch, &r.User, &r.Impersonator, &r.Match, &r.UserAgent)
		return r, err
	})
	if err != nil {
		return nil, false, s.fail("read the feed", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// Count is the number of changes of a resource of one kind in a bucket of time.
type Count struct {
	At              time.Time // the bucket's start
	Group, Resource string
	Kind            string // change (create or update), delete or inferred (an inferred delete)
	N               int64
}

// Counts counts the changes the filter selects (Before aside) in buckets of step from
// origin, per resource and kind.
func (s *Store) Counts(ctx context.Context, f Filter, step time.Duration, origin time.Time) ([]Count, error) {
	args := pgx.NamedArgs{"step": step, "origin": origin}
	sql := `SELECT date_bin(@step::interval, c.observed_at, @origin::timestamptz), c.api_group, c.resource,
		       CASE WHEN c.op <> 'delete' THEN 'change' WHEN c.inferred THEN 'inferred' ELSE 'delete' END, count(*)
		  FROM changes c
		 WHERE ` + f.where(false, args) + `
		 GROUP BY 1, 2, 3, 4`
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return nil, s.fail("read the chart", err)
	}
	out, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (Count, error) {
		var c Count
		err := cr.Scan(&c.At, &c.Group, &c.Resource, &c.Kind, &c.N)
		return c, err
	})
	if err != nil {
		return nil, s.fail("read the chart", err)
	}
	return out, nil
}
