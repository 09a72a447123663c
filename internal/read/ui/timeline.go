package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// filter is the timeline's state, all of it in the URL.
type filter struct {
	Namespace, Resource, Name, Op, Flag, User string
	Range                                     string // a preset back from now ("1h"), when From/To are not given
	TZ                                        string // the zone times are shown in: "" for UTC, else an IANA name
	From, To                                  time.Time
	// The keyset: only rows below (BeforeAt, Before) in (observed_at, id) order (an older
	// page), or above (AfterAt, After) (a newer page); both 0: the newest page.
	Before   int64
	BeforeAt time.Time
	After    int64
	AfterAt  time.Time
}

// filtered reports whether any filter but the range is set.
func (f filter) filtered() bool {
	return f.Namespace != "" || f.Resource != "" || f.Name != "" || f.Op != "" || f.Flag != "" || f.User != ""
}

// nameMatch reads the name filter's syntax: "~RE" a regular expression (PostgreSQL's,
// case-insensitive), "=NAME" the exact name, "PREFIX*" a prefix, anything else a
// substring (case-insensitive).
func nameMatch(name string) (string, store.NameMatch) {
	switch {
	case strings.HasPrefix(name, "~"):
		return name[1:], store.NameRegex
	case strings.HasPrefix(name, "="):
		return name[1:], store.NameExact
	case strings.HasSuffix(name, "*"):
		return strings.TrimSuffix(name, "*"), store.NamePrefix
	}
	return name, store.NameSubstring
}

// Presets are the range links; the first is the default.
var presets = []string{"1h", "15m", "6h", "24h", "7d", "30d"}

func parseFilter(q url.Values, now time.Time) (filter, error) {
	f := filter{Namespace: strings.TrimSpace(q.Get("ns")), Resource: strings.TrimSpace(q.Get("resource")), Name: strings.TrimSpace(q.Get("name")),
		Op: q.Get("op"), Flag: q.Get("flag"), User: strings.TrimSpace(q.Get("user")), Range: q.Get("range")}
	loc, err := zone(q.Get("tz"))
	if err != nil {
		return f, err
	}
	if loc != time.UTC {
		f.TZ = loc.String()
	}
	switch f.Op {
	case "", "create", "update", "delete":
	default:
		return f, fmt.Errorf("op %q: want create, update or delete", f.Op)
	}
	switch f.Flag {
	case "", "snapshot", "inferred", "observed":
	default:
		return f, fmt.Errorf("flag %q: want snapshot, inferred or observed", f.Flag)
	}
	for _, k := range []string{"from", "to"} {
		v := q.Get(k)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, fmt.Errorf("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z)", k, v)
		}
		if k == "from" {
			f.From = t
		} else {
			f.To = t
		}
	}
	if f.From.IsZero() && f.To.IsZero() {
		if f.Range == "" {
			f.Range = presets[0]
		}
		d, err := parseRange(f.Range)
		if err != nil {
			return f, err
		}
		f.From = now.Add(-d)
	} else {
		f.Range = ""
		if f.To.IsZero() {
			f.To = now
		}
		if f.From.IsZero() || !f.From.Before(f.To) {
			return f, fmt.Errorf("from %s to %s: want from before to", q.Get("from"), q.Get("to"))
		}
	}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("before %q: want a change id", b)
		}
		f.Before = n
		at, err := time.Parse(time.RFC3339Nano, q.Get("before_at"))
		if err != nil {
			return f, fmt.Errorf("before_at %q: want the RFC 3339 time of the change before", q.Get("before_at"))
		}
		f.BeforeAt = at
	}
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("after %q: want a change id", a)
		}
		at, err := time.Parse(time.RFC3339Nano, q.Get("after_at"))
		if err != nil {
			return f, fmt.Errorf("after_at %q: want the RFC 3339 time of the change after", q.Get("after_at"))
		}
		if f.Before > 0 {
			return f, errors.New("before and after: want one of them (an older or a newer page)")
		}
		f.After, f.AfterAt = n, at
	}
	return f, nil
}

// parseRange reads a preset: a Go duration or a number of days ("7d").
func parseRange(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 {
			return time.Duration(d) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("range %q: want a duration back from now (15m, 1h, 7d)", s)
}

// values is the filter as URL parameters, with the cluster; withRange adds the range as
// given (relative presets stay relative).
func (f filter) values(cluster string, withRange bool) url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("cluster", cluster)
	set("ns", f.Namespace)
	set("resource", f.Resource)
	set("name", f.Name)
	set("op", f.Op)
	set("flag", f.Flag)
	set("user", f.User)
	set("tz", f.TZ)
	if withRange {
		if f.Range != "" {
			v.Set("range", f.Range)
		} else {
			v.Set("from", f.From.UTC().Format(time.RFC3339))
			v.Set("to", f.To.UTC().Format(time.RFC3339))
		}
	}
	return v
}

// selects is the filter as the store reads it, for cluster.
func (f filter) selects(cluster string, actors bool) store.Filter {
	g, r := parseResource(f.Resource)
	name, match := nameMatch(f.Name)
	return store.Filter{Cluster: cluster, From: f.From, To: f.To, Namespace: f.Namespace, Group: g, Resource: r,
		Name: name, NameMatch: match, Op: f.Op, Flag: f.Flag, User: f.User, Actors: actors,
		Before: f.Before, BeforeAt: f.BeforeAt, After: f.After, AfterAt: f.AfterAt}
}

// check reads the filter's resource as a person types it (a plural, short name or kind:
// resolveResource) into the id the pages use, and asks PostgreSQL whether a regular
// expression of the name filter is one: either wrong is the request's fault.
func (s *Server) check(ctx context.Context, cluster string, f *filter) (code int, err error) {
	if f.Resource != "" {
		res, err := s.resolveResource(ctx, cluster, f.Resource)
		if err != nil {
			if errors.Is(err, errUnknownResource) {
				return http.StatusBadRequest, err
			}
			return http.StatusInternalServerError, err
		}
		f.Resource = res.ID()
	}
	if name, match := nameMatch(f.Name); match == store.NameRegex && name != "" {
		if err := s.o.Store.CheckRegex(ctx, name); err != nil {
			if errors.Is(err, store.ErrBadRegex) {
				return http.StatusBadRequest, fmt.Errorf("name %q: %w", f.Name, err)
			}
			return http.StatusInternalServerError, err
		}
	}
	return 0, nil
}

// row is one change in the feed, with its object page.
type row struct {
	store.FeedRow
	URL string
}

func (s *Server) feed(ctx context.Context, cluster string, f filter, actors bool) ([]row, store.FeedPage, error) {
	p, err := s.o.Store.Feed(ctx, f.selects(cluster, actors), s.o.PageSize)
	if err != nil {
		return nil, p, err
	}
	out := make([]row, len(p.Rows))
	for i, r := range p.Rows {
		out[i] = row{FeedRow: r, URL: objectURL(cluster, r.Group, r.Resource, r.Namespace, r.Name)}
	}
	return out, p, nil
}

// chart is the data of the timeline's chart: buckets of Step seconds starting at T, one
// series per resource (the busiest maxSeries, the rest as "other") of creates and
// updates, then deletes and inferred deletes of every resource.
type chart struct {
	Step   int64    `json:"step"`
	T      []int64  `json:"t"`
	Series []series `json:"series"`
	From   int64    `json:"from"`
	To     int64    `json:"to"`
}

type series struct {
	Label string  `json:"label"`
	Kind  string  `json:"kind"` // change | delete | inferred | unhealthy | recovered (health transitions, not stacked)
	Data  []int64 `json:"data"`
}

const (
	maxSeries  = 8
	maxBuckets = 400
)

// steps are the bucket widths, the finest that keeps the range within maxBuckets.
var steps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}

func stepFor(d time.Duration) time.Duration {
	for _, s := range steps {
		if d/s <= maxBuckets {
			return s
		}
	}
	return steps[len(steps)-1]
}

func (s *Server) chart(ctx context.Context, cluster string, f filter, actors bool, now time.Time) (chart, error) {
	to := f.To
	if to.IsZero() {
		to = now
	}
	step := stepFor(to.Sub(f.From))
	origin := f.From.Truncate(step)
	counts, err := s.o.Store.Counts(ctx, f.selects(cluster, actors), step, origin)
	if err != nil {
		return chart{}, err
	}
	type cell struct {
		at        time.Time
		res, kind string
		n         int64
	}
	cells := make([]cell, 0, len(counts))
	totals := map[string]int64{}
	for _, k := range counts {
		c := cell{at: k.At, res: resourceID(k.Group, k.Resource), kind: k.Kind, n: k.N}
		if c.kind == "change" {
			totals[c.res] += c.n
		}
		cells = append(cells, c)
	}
	names := make([]string, 0, len(totals))
	for k := range totals {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if totals[names[i]] != totals[names[j]] {
			return totals[names[i]] > totals[names[j]]
		}
		return names[i] < names[j]
	})
	c := chart{Step: int64(step / time.Second), From: f.From.Unix(), To: to.Unix()}
	index := map[string]int{}
	ordered := make([]series, 0, min(len(names), maxSeries+1)+2)
	for i, name := range names {
		index[name] = min(i, maxSeries)
		if i < maxSeries {
			ordered = append(ordered, series{Label: name, Kind: "change"})
		}
	}
	if len(names) > maxSeries {
		ordered = append(ordered, series{Label: "other", Kind: "change"})
	}
	del := len(ordered)
	ordered = append(ordered, series{Label: "deletes", Kind: "delete"}, series{Label: "inferred deletes", Kind: "inferred"})
	c.Series = ordered
	buckets := int(to.Sub(origin)/step) + 1
	for i := range buckets {
		c.T = append(c.T, origin.Add(time.Duration(i)*step).Unix())
	}
	for i := range c.Series {
		c.Series[i].Data = make([]int64, buckets)
	}
	// Health as its own series: the versions that made an object go bad, and recover.
	bad, rec, partial, err := s.healthCounts(ctx, f.selects(cluster, actors), counts, origin, step, buckets)
	if err != nil {
		return chart{}, err
	}
	label := map[bool]string{false: "", true: fmt.Sprintf(" (first %d versions)", healthSeriesLimit)}[partial]
	c.Series = append(c.Series, series{Label: "health: went bad" + label, Kind: "unhealthy", Data: bad},
		series{Label: "health: recovered" + label, Kind: "recovered", Data: rec})
	for _, cl := range cells {
		b := int(cl.at.Sub(origin) / step)
		if b < 0 || b >= buckets {
			continue
		}
		switch cl.kind {
		case "delete":
			c.Series[del].Data[b] += cl.n
		case "inferred":
			c.Series[del+1].Data[b] += cl.n
		default:
			c.Series[index[cl.res]].Data[b] += cl.n
		}
	}
	return c, nil
}

type timelinePage struct {
	page
	Filter    filter
	Presets   []presetLink
	Resources []string
	Rows      []row
	Next      string // the next (older) page's URL; "" on the last
	Newer     string // the newer page's URL (the page before), when this is not the newest
	First     string // the newest page's URL, when this is not it
	// Excluded, when the page is empty and filters are set, counts the range's changes
	// the filters excluded (up to excludedCap; ExcludedMore when there are more).
	Excluded     int
	ExcludedMore bool
	// Stopped, when not zero: the name or user search read store.DefaultWindow changes
	// and stopped at this moment; Next continues it.
	Stopped   time.Time
	Window    int
	Permalink string // this view with an absolute range
	ChartURL  string // the chart's data, which timeline.js fetches: counting a long range takes longer than a page of the feed
	FromText  string
	ToText    string
	Err       string
	// The time zone toggle: this view in UTC, and in the browser's zone (tz=local, which
	// timeline.js turns into the browser's zone name).
	UTCURL, LocalURL string
}

// excludedCap is how far the count of the changes a filter excluded goes: past it the
// page says "more than".
const excludedCap = 10000

type presetLink struct {
	Label, URL string
	Current    bool
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "Timeline")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	now := s.o.Now()
	f, err := parseFilter(r.URL.Query(), now)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if code, err := s.check(r.Context(), p.Cluster, &f); err != nil {
		s.fail(w, r, code, err)
		return
	}
	tp := timelinePage{page: p, Filter: f, Window: store.DefaultWindow}
	actors := p.Features.Actors
	if tp.Resources, err = s.resources(r.Context(), p.Cluster); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var fp store.FeedPage
	if tp.Rows, fp, err = s.feed(r.Context(), p.Cluster, f, actors); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(tp.Rows) == 0 && fp.Stopped == nil && f.filtered() && f.Before == 0 && f.After == 0 {
		n, err := s.o.Store.RangeCount(r.Context(), p.Cluster, f.From, f.To, excludedCap+1)
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		tp.Excluded, tp.ExcludedMore = min(n, excludedCap), n > excludedCap
	}
	w.Header().Set("Server-Timing", fmt.Sprintf("feed;dur=%.1f", float64(time.Since(p.start).Microseconds())/1000))
	tp.ChartURL = "/chart.json?" + r.URL.RawQuery
	base := f.values(p.Cluster, true)
	keyed := func(dir string, k store.Key) string {
		v := f.values(p.Cluster, true)
		v.Set(dir, strconv.FormatInt(k.ID, 10))
		v.Set(dir+"_at", k.At.UTC().Format(time.RFC3339Nano))
		return "/?" + v.Encode()
	}
	var newest, oldest store.Key
	if len(tp.Rows) > 0 {
		newest = store.Key{At: tp.Rows[0].ObservedAt, ID: tp.Rows[0].ID}
		oldest = store.Key{At: tp.Rows[len(tp.Rows)-1].ObservedAt, ID: tp.Rows[len(tp.Rows)-1].ID}
	}
	if fp.Stopped != nil {
		tp.Stopped = fp.Stopped.At
	}
	// Older: below this page's oldest row, or below where a search stopped; newer: above
	// its newest row, or above where a search upwards stopped. Each is keyset, so Newer
	// from an older page returns to the page before it.
	upward := f.After > 0
	switch {
	case !upward && fp.Stopped != nil:
		tp.Next = keyed("before", *fp.Stopped)
	case !upward && fp.More, upward && len(tp.Rows) > 0:
		tp.Next = keyed("before", oldest)
	}
	switch {
	case upward && fp.Stopped != nil:
		tp.Newer = keyed("after", *fp.Stopped)
	case upward && fp.More, f.Before > 0 && len(tp.Rows) > 0:
		tp.Newer = keyed("after", newest)
	}
	if f.Before > 0 || f.After > 0 {
		tp.First = "/?" + base.Encode()
	}
	abs := f
	abs.Range = ""
	if abs.To.IsZero() {
		abs.To = now.Add(time.Second).Truncate(time.Second)
	}
	pl := abs.values(p.Cluster, true)
	if f.Before > 0 {
		pl.Set("before", strconv.FormatInt(f.Before, 10))
		pl.Set("before_at", f.BeforeAt.UTC().Format(time.RFC3339Nano))
	}
	if f.After > 0 {
		pl.Set("after", strconv.FormatInt(f.After, 10))
		pl.Set("after_at", f.AfterAt.UTC().Format(time.RFC3339Nano))
	}
	tp.Permalink = "/?" + pl.Encode()
	for _, pr := range presets {
		v := f.values(p.Cluster, false)
		v.Set("range", pr)
		tp.Presets = append(tp.Presets, presetLink{Label: pr, URL: "/?" + v.Encode(), Current: f.Range == pr})
	}
	// An object's page keeps the range and the zone, for its link back to the timeline.
	keep := url.Values{}
	for _, k := range []string{"range", "from", "to", "tz"} {
		if v := base.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	if len(keep) > 0 {
		for i := range tp.Rows {
			tp.Rows[i].URL += "&" + keep.Encode()
		}
	}
	tz := f
	tz.TZ = ""
	v := tz.values(p.Cluster, true)
	tp.UTCURL = "/?" + v.Encode()
	v.Set("tz", "local")
	tp.LocalURL = "/?" + v.Encode()
	tp.FromText = f.From.UTC().Format(time.RFC3339)
	if !f.To.IsZero() {
		tp.ToText = f.To.UTC().Format(time.RFC3339)
	}
	tp.finish()
	s.render(w, "timeline", tp)
}

// chartJSON serves the timeline chart's data for the filters and range in the URL (the
// timeline's own parameters).
func (s *Server) chartJSON(w http.ResponseWriter, r *http.Request) {
	start := s.o.Now()
	f, err := parseFilter(r.URL.Query(), start)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	feats, err := s.features(r.Context())
	if err != nil {
		s.o.Log.Error("ui: chart", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cl := r.URL.Query().Get("cluster")
	if cl == "" {
		p, err := s.frame(r, "")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cl = p.Cluster
	}
	if code, err := s.check(r.Context(), cl, &f); err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	c, err := s.chart(r.Context(), cl, f, feats.Actors, start)
	if err != nil {
		s.o.Log.Error("ui: chart", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Server-Timing", fmt.Sprintf("chart;dur=%.1f", float64(time.Since(start).Microseconds())/1000))
	if err := json.NewEncoder(w).Encode(c); err != nil {
		s.o.Log.Debug("ui: chart", "err", err)
	}
}
