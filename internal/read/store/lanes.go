package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// LanesQuery selects the lanes of one cluster: the objects that changed in [From, To).
type LanesQuery struct {
	Cluster   string // "": the store's
	From, To  time.Time
	Namespace string // "": every namespace
	// Resource "" is every resource; otherwise Group and Resource name one.
	Group, Resource string
	Name            string    // "": every name
	NameMatch       NameMatch // how Name matches, as the feed's filter (Filter.NameMatch)
	// Lanes is the page's size (default DefaultLanes), Offset the lanes before it.
	Lanes, Offset int
	// PerLane caps the versions read of one lane (default DefaultPerLane), oldest first.
	PerLane int
	// Bodies are the resources whose versions come with their object (Mark.Body), and
	// with the newest version before From (Lane.Before): those whose health the caller
	// computes. Others' objects are never read out.
	Bodies []change.Resource
	// Workload also reads the live controllers up from each lane's newest controller
	// (Lanes.Owners), for nesting a Deployment's ReplicaSets and Pods under it.
	Workload bool
}

// DefaultLanes and DefaultPerLane are LanesQuery's defaults.
const (
	DefaultLanes   = 500
	DefaultPerLane = 300
)

// Mark is one version of an object on its lane.
type Mark struct {
	ID         int64 // changes.id: the object page's #vID
	ObservedAt time.Time
	Op         change.Op
	Inferred   bool
	Snapshot   bool
	UID        string
	RV         change.RV
	ChangedBy  string
	Body       json.RawMessage // the object, for LanesQuery.Bodies' resources; else nil
	Controller *OwnerRef       // the version's controller (ownerReferences, controller true)
}

// OwnerRef names an owner as an ownerReference does.
type OwnerRef struct{ UID, Kind, Name string }

// Lane is one object's versions in the range, oldest first.
type Lane struct {
	Group, Resource, Namespace, Name string
	Kind                             string // from its objects ("" when none has one)
	Marks                            []Mark
	// Before is the newest version before the range, with its object (Bodies' resources
	// only): the state the lane starts in. Nil when none.
	Before *Mark
	// Truncated: the lane has more versions in the range than LanesQuery.PerLane.
	Truncated bool
}

// Owner is a live controller up from a lane (LanesQuery.Workload).
type Owner struct {
	Group, Resource, Kind, Namespace, Name, UID string
	Controller                                  *OwnerRef // its own controller; nil at the top
}

// Lanes is a page of lanes.
type Lanes struct {
	Lanes  []Lane
	Total  int // lanes in the range, every page
	Owners []Owner
}

// Lanes reads a page of lanes in one statement (sql/lanes.sql): the objects that changed
// in the range, by namespace, resource and name, each with its versions in the range.
func (s *Store) Lanes(ctx context.Context, q LanesQuery) (Lanes, error) {
	if q.Cluster == "" {
		q.Cluster = s.cluster
	}
	if q.Lanes <= 0 {
		q.Lanes = DefaultLanes
	}
	if q.PerLane <= 0 {
		q.PerLane = DefaultPerLane
	}
	to := q.To
	if to.IsZero() {
		to = time.Now()
	}
	groups, resources := make([]string, len(q.Bodies)), make([]string, len(q.Bodies))
	for i, r := range q.Bodies {
		groups[i], resources[i] = r.Group, r.Resource
	}
	args := pgx.NamedArgs{"cluster": q.Cluster, "from": q.From, "to": to, "namespace": nullable(q.Namespace),
		"group": q.Group, "resource": nullable(q.Resource), "name": nullable(q.Name), "name_match": q.NameMatch.sqlKind(), "name_like": nameLike(q.Name, q.NameMatch), "lanes": q.Lanes,
		"offset": max(q.Offset, 0), "per_lane": q.PerLane + 1, "body_groups": groups, "body_resources": resources,
		"workload": q.Workload}
	type row struct {
		mark                                  string
		total                                 int64
		group, resource, namespace, name, uid string
		kind, ctrlUID, ctrlKind, ctrlName     string
		m                                     Mark
	}
	rows, err := collect(ctx, s, "read the lanes", "lanes", args, func(cr pgx.CollectableRow) (row, error) {
		var (
			r  row
			op string
			at *time.Time
		)
		err := cr.Scan(&r.mark, &r.total, &r.group, &r.resource, &r.namespace, &r.name, &r.m.ID, &at, &op, &r.m.Inferred,
			&r.m.Snapshot, &r.uid, &r.m.RV, &r.m.ChangedBy, &r.kind, &r.m.Body, &r.ctrlUID, &r.ctrlKind, &r.ctrlName)
		r.m.Op, r.m.UID = change.Op(op), r.uid
		if at != nil {
			r.m.ObservedAt = *at
		}
		if r.ctrlUID != "" {
			r.m.Controller = &OwnerRef{UID: r.ctrlUID, Kind: r.ctrlKind, Name: r.ctrlName}
		}
		return r, err
	})
	if err != nil {
		return Lanes{}, err
	}
	var out Lanes
	index := map[[4]string]int{}
	lane := func(r row) *Lane {
		k := [4]string{r.group, r.resource, r.namespace, r.name}
		i, ok := index[k]
		if !ok {
			i = len(out.Lanes)
			index[k] = i
			out.Lanes = append(out.Lanes, Lane{Group: r.group, Resource: r.resource, Namespace: r.namespace, Name: r.name})
		}
		return &out.Lanes[i]
	}
	// The statement returns the versions lane by lane: their order is the lanes'.
	for _, r := range rows {
		switch r.mark {
		case "version":
			out.Total = int(r.total)
			l := lane(r)
			if len(l.Marks) == q.PerLane {
				l.Truncated = true
				continue
			}
			if r.kind != "" {
				l.Kind = r.kind
			}
			l.Marks = append(l.Marks, r.m)
		case "owner":
			out.Owners = append(out.Owners, Owner{Group: r.group, Resource: r.resource, Kind: r.kind, Namespace: r.namespace,
				Name: r.name, UID: r.uid, Controller: r.m.Controller})
		}
	}
	for _, r := range rows {
		if r.mark == "before" {
			m := r.m
			lane(r).Before = &m
		}
	}
	sortLanes(out.Lanes)
	return out, nil
}

// nullable is "" as NULL: an unset filter.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Event is one Kubernetes Event about an object (the events table, migration 019).
type Event struct {
	InvolvedUID     string
	Type            string // Normal, Warning
	Reason, Message string
	Count           int // count (deprecatedCount)
	SeriesCount     int // series.count; 0 for a singleton
	FirstAt, LastAt time.Time
	Component       string // the reporting component
	Expired         bool   // the apiserver deleted it (its TTL); the row stays
}

// DefaultEvents caps Events' rows.
const DefaultEvents = 1000

// Events reads the events about the objects with uids seen last at or after from and
// first before to (zero: no end), newest first, at most limit (default DefaultEvents).
// The schema must have the events table (Features.Events).
func (s *Store) Events(ctx context.Context, cluster string, uids []string, from, to time.Time, limit int) ([]Event, error) {
	if cluster == "" {
		cluster = s.cluster
	}
	if limit <= 0 {
		limit = DefaultEvents
	}
	var end *time.Time
	if !to.IsZero() {
		end = &to
	}
	return collect(ctx, s, "read the events", "events_of",
		pgx.NamedArgs{"cluster": cluster, "uids": uids, "from": from, "to": end, "limit": limit},
		func(cr pgx.CollectableRow) (Event, error) {
			var e Event
			err := cr.Scan(&e.InvolvedUID, &e.Type, &e.Reason, &e.Message, &e.Count, &e.SeriesCount, &e.FirstAt, &e.LastAt,
				&e.Component, &e.Expired)
			return e, err
		})
}

// sortLanes puts lanes in the statement's order (namespace, group, resource, name) and
// each lane's marks in observation order: a UNION ALL promises no order of its own.
func sortLanes(lanes []Lane) {
	slices.SortFunc(lanes, func(a, b Lane) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Group, b.Group),
			cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Name, b.Name))
	})
	for _, l := range lanes {
		slices.SortFunc(l.Marks, func(a, b Mark) int {
			return cmp.Or(a.ObservedAt.Compare(b.ObservedAt), cmp.Compare(a.ID, b.ID))
		})
	}
}
