package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// Children are the objects uid owns (the relation of the view owners), at most 200, read
// by the owner's uid through migration 021's indexes (sql/children.sql).
func (s *Store) Children(ctx context.Context, cluster, uid string) ([]Ref, error) {
	return collect(ctx, s, "read the children", "children", pgx.NamedArgs{"cluster": cluster, "uid": uid},
		func(row pgx.CollectableRow) (Ref, error) {
			var r Ref
			err := row.Scan(&r.Group, &r.Resource, &r.Kind, &r.Namespace, &r.Name)
			return r, err
		})
}

// NameMatch says how Filter.Name matches a name.
type NameMatch int

// The ways a name filter matches. Exact reads an index (changes_key_observed); the others
// cannot, and are searched within a bounded window (Filter.Window).
const (
	NameSubstring NameMatch = iota // the name contains Name, case-insensitively
	NameExact                      // the name is Name
	NamePrefix                     // the name starts with Name, case-insensitively
	NameRegex                      // the name matches the POSIX regular expression Name (PostgreSQL's ~*), case-insensitively
)

// nameLike is the ILIKE pattern of a substring or prefix name filter ("" for the others).
func nameLike(name string, m NameMatch) string {
	switch m {
	case NameSubstring:
		return "%" + likeEscape(name) + "%"
	case NamePrefix:
		return likeEscape(name) + "%"
	}
	return ""
}

// sqlKind is how a statement that takes the match as a parameter (sql/lanes.sql) tests
// it: "exact" (=), "regex" (~*) or "like" (ILIKE nameLike's pattern).
func (m NameMatch) sqlKind() string {
	switch m {
	case NameExact:
		return "exact"
	case NameRegex:
		return "regex"
	}
	return "like"
}

// DefaultWindow is Filter.Window's default: how many changes of the range one page's
// search of an unindexed filter reads at most.
const DefaultWindow = 5000

// Key is a change's place in the feed's order, (observed_at, id).
type Key struct {
	At time.Time
	ID int64
}

// Filter selects changes of one cluster observed in [From, To) (To zero: no end).
type Filter struct {
	Cluster   string
	From, To  time.Time
	Namespace string // "": every namespace
	// Resource "" is every resource; otherwise Group and Resource name one.
	Group, Resource string
	Name            string // "": every name; else matched as NameMatch says
	NameMatch       NameMatch
	Op              string // "", create, update or delete
	Flag            string // "", snapshot, inferred (deletes) or observed (neither)
	User            string // a substring of the actor's username, case-insensitive; only with Actors
	Actors          bool   // the schema has change_actors (Features.Actors)
	// Before, when above 0, keeps the rows below (BeforeAt, Before) in (observed_at, id)
	// order: the feed's next (older) page. After, when above 0, keeps the rows above
	// (AfterAt, After): the page newer than one, read upwards from it.
	Before   int64
	BeforeAt time.Time
	After    int64
	AfterAt  time.Time
	// Window bounds the search of the filters no index serves (a name substring, prefix
	// or regex; a user): a page reads at most Window changes of the range past its
	// keyset, then stops (FeedPage.Stopped). Default DefaultWindow.
	Window int
}

// likeEscape escapes LIKE's wildcards (and its escape character) in s.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// where is the filter's conditions an index serves, as SQL over changes c, its values in
// args; unindexed the others (a name pattern, a user), "" when there are none.
func (f Filter) where(keyset bool, args pgx.NamedArgs) (indexed, unindexed string) {
	arg := func(name string, v any) string {
		args[name] = v
		return "@" + name
	}
	conds := []string{"c.cluster = " + arg("cluster", f.Cluster), "c.observed_at >= " + arg("from", f.From)}
	var slow []string
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
		switch f.NameMatch {
		case NameExact:
			conds = append(conds, "c.name = "+arg("name", f.Name))
		case NameRegex:
			slow = append(slow, "c.name ~* "+arg("name", f.Name))
		default:
			slow = append(slow, "c.name ILIKE "+arg("name", nameLike(f.Name, f.NameMatch)))
		}
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
		slow = append(slow, "(SELECT a.username FROM change_actors a WHERE a.change_id = c.id AND a.change_observed_at = c.observed_at LIMIT 1) ILIKE "+
			arg("user", "%"+likeEscape(f.User)+"%"))
	}
	if keyset && f.Before > 0 {
		conds = append(conds, "(c.observed_at, c.id) < ("+arg("before_at", f.BeforeAt)+", "+arg("before", f.Before)+")")
	}
	if keyset && f.After > 0 {
		conds = append(conds, "(c.observed_at, c.id) > ("+arg("after_at", f.AfterAt)+", "+arg("after", f.After)+")")
	}
	return strings.Join(conds, " AND "), strings.Join(slow, " AND ")
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

// FeedPage is one page of the feed.
type FeedPage struct {
	Rows []FeedRow // newest first
	// More: the filter selects rows beyond the page in the direction read (older; newer
	// when Filter.After is set).
	More bool
	// Stopped, when not nil, is where the bounded search of an unindexed filter stopped
	// (Filter.Window changes read) before the page was full: the changes beyond it in
	// the direction read were not searched, and the next page continues from it.
	Stopped *Key
}

// Feed returns a page of at most limit changes the filter selects: the newest (below
// Before when set), or the oldest above After, always listed newest first. Conditions
// no index serves are checked on at most f.Window changes of the range, read in the
// feed's order through changes_feed: a page costs at most that many rows however rare
// the match, and says where it stopped.
func (s *Store) Feed(ctx context.Context, f Filter, limit int) (FeedPage, error) {
	args := pgx.NamedArgs{}
	where, slow := f.where(true, args)
	order := "DESC"
	if f.After > 0 {
		order = "ASC"
	}
	byKey := "c.observed_at " + order + ", c.id " + order
	actorCols, actorJoin := "'', '', '', ''", ""
	if f.Actors {
		actorCols = "coalesce(a.username, ''), coalesce(a.impersonator, ''), coalesce(a.match, ''), coalesce(a.user_agent, '')"
		// The page first, then its rows' actors, one lookup each: joined plainly, the
		// planner may compute the view for every change of the range.
		actorJoin = "LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.match, x.user_agent FROM change_actors x WHERE x.change_id = c.id AND x.change_observed_at = c.observed_at LIMIT 1) a ON true"
	}
	page := `SELECT * FROM changes c WHERE ` + where + ` ORDER BY ` + byKey + ` LIMIT ` + strconv.Itoa(limit+1)
	marks := "true, 0::bigint"
	window := f.Window
	if window <= 0 {
		window = DefaultWindow
	}
	if slow != "" {
		// The window: the next Window changes in the feed's order, each with its
		// position (rn) and whether the slow conditions hold; then the matches, and the
		// window's last row whatever it is (where the search stopped). Every step keeps
		// the index's order, so the scan stops as soon as the page is full.
		args["window"] = window
		page = `SELECT * FROM (
			SELECT c.*, ` + slow + ` AS matched, row_number() OVER (ORDER BY ` + byKey + `) AS rn
			  FROM (SELECT * FROM changes c WHERE ` + where + ` ORDER BY ` + byKey + ` LIMIT @window) c) c
			WHERE c.matched OR c.rn = @window
			ORDER BY ` + byKey + ` LIMIT ` + strconv.Itoa(limit+2)
		marks = "c.matched, c.rn"
	}
	sql := `SELECT c.id, c.observed_at, c.api_group, c.resource, c.namespace, c.name, c.uid, c.resource_version,
		       c.op, coalesce(c.reason, ''), c.changed_by, c.inferred, c.snapshot, c.epoch, ` + actorCols + `, ` + marks + `
		  FROM (` + page + `) c ` + actorJoin + `
		 ORDER BY ` + byKey
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return FeedPage{}, s.fail("read the feed", err)
	}
	type marked struct {
		FeedRow
		matched bool
		rn      int64
	}
	got, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (marked, error) {
		var r marked
		err := cr.Scan(&r.ID, &r.ObservedAt, &r.Group, &r.Resource, &r.Namespace, &r.Name, &r.UID, &r.RV,
			&r.Op, &r.Reason, &r.ChangedBy, &r.Inferred, &r.Snapshot, &r.Epoch, &r.User, &r.Impersonator, &r.Match, &r.UserAgent, &r.matched, &r.rn)
		return r, err
	})
	if err != nil {
		return FeedPage{}, s.fail("read the feed", err)
	}
	var p FeedPage
	for _, r := range got {
		if r.matched {
			p.Rows = append(p.Rows, r.FeedRow)
		}
		if r.rn == int64(window) {
			p.Stopped = &Key{At: r.ObservedAt, ID: r.ID}
		}
	}
	if len(p.Rows) > limit {
		p.Rows, p.More, p.Stopped = p.Rows[:limit], true, nil
	}
	if f.After > 0 {
		slices.Reverse(p.Rows)
	}
	return p, nil
}

// ErrBadRegex marks a regular expression PostgreSQL refuses (CheckRegex).
var ErrBadRegex = errors.New("invalid regular expression")

// CheckRegex asks PostgreSQL, whose dialect (POSIX ARE) the name filter uses, whether re
// is a regular expression; an error wrapping ErrBadRegex says why not.
func (s *Store) CheckRegex(ctx context.Context, re string) error {
	var ok bool
	err := s.pool.QueryRow(ctx, query("regex_check"), pgx.NamedArgs{"re": re}).Scan(&ok)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "2201B" {
		return fmt.Errorf("%w: %s", ErrBadRegex, strings.TrimPrefix(pgErr.Message, "invalid regular expression: "))
	}
	if err != nil {
		return s.fail("check the regular expression", err)
	}
	return nil
}

// RangeCount counts the cluster's changes in [from, to) (to zero: no end), every filter
// aside, up to limit: what a page says its filters excluded. It reads changes_feed only.
func (s *Store) RangeCount(ctx context.Context, cluster string, from, to time.Time, limit int) (int, error) {
	var toArg *time.Time
	if !to.IsZero() {
		toArg = &to
	}
	var n int
	err := s.pool.QueryRow(ctx, query("range_count"), pgx.NamedArgs{"cluster": cluster, "from": from, "to": toArg, "limit": limit}).Scan(&n)
	if err != nil {
		return 0, s.fail("count the range's changes", err)
	}
	return n, nil
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
		 WHERE ` + f.counted(args) + `
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

// counted is every condition of the filter but the keyset, for the chart's counts.
func (f Filter) counted(args pgx.NamedArgs) string {
	indexed, slow := f.where(false, args)
	if slow == "" {
		return indexed
	}
	return indexed + " AND " + slow
}
