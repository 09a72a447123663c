package ui

import (
	"context"
	"encoding/json"
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
	// The keyset: only rows below (BeforeAt, Before) in (observed_at, id) order; Before 0:
	// the newest page.
	Before   int64
	BeforeAt time.Time
}

// Presets are the range links; the first is the default.
var presets = []string{"1h", "15m", "6h", "24h", "7d", "30d"}

func parseFilter(q url.Values, now time.Time) (filter, error) {
	f := filter{Namespace: q.Get("ns"), Resource: q.Get("resource"), Name: q.Get("name"), Op: q.Get("op"),
		Flag: q.Get("flag"), User: q.Get("user"), Range: q.Get("range")}
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
	return store.Filter{Cluster: cluster, From: f.From, To: f.To, Namespace: f.Namespace, Group: g, Resource: r,
		Name: f.Name, Op: f.Op, Flag: f.Flag, User: f.User, Actors: actors, Before: f.Before, BeforeAt: f.BeforeAt}
}

// row is one change in the feed, with its object page.
type row struct {
	store.FeedRow
	URL string
}

func (s *Server) feed(ctx context.Context, cluster string, f filter, actors bool) ([]row, bool, error) {
	rows, more, err := s.o.Store.Feed(ctx, f.selects(cluster, actors), s.o.PageSize)
	if err != nil {
		return nil, false, err
	}
	out := make([]row, len(rows))
	for i, r := range rows {
		out[i] = row{FeedRow: r, URL: objectURL(cluster, r.Group, r.Resource, r.Namespace, r.Name)}
	}
	return out, more, nil
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
	Next      string // the next page's URL; "" on the last
	First     string // the newest page's URL, when this is not it
	Permalink string // this view with an absolute range
	ChartURL  string // the chart's data, which timeline.js fetches: counting a long range takes longer than a page of the feed
	FromText  string
	ToText    string
	Err       string
	// The time zone toggle: this view in UTC, and in the browser's zone (tz=local, which
	// timeline.js turns into the browser's zone name).
	UTCURL, LocalURL string
}

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
	tp := timelinePage{page: p, Filter: f}
	actors := p.Features.Actors
	if tp.Resources, err = s.resources(r.Context(), p.Cluster); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var more bool
	if tp.Rows, more, err = s.feed(r.Context(), p.Cluster, f, actors); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Server-Timing", fmt.Sprintf("feed;dur=%.1f", float64(time.Since(p.start).Microseconds())/1000))
	tp.ChartURL = "/chart.json?" + r.URL.RawQuery
	base := f.values(p.Cluster, true)
	if more {
		v := f.values(p.Cluster, true)
		last := tp.Rows[len(tp.Rows)-1]
		v.Set("before", strconv.FormatInt(last.ID, 10))
		v.Set("before_at", last.ObservedAt.UTC().Format(time.RFC3339Nano))
		tp.Next = "/?" + v.Encode()
	}
	if f.Before > 0 {
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
