package ui

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// The lanes view: one row per object over the range, each version a mark at the moment it
// was observed (so a zoomed range separates versions milliseconds apart), coloured by
// what happened, drawn on the server as SVG.

// Geometry of the drawing, in SVG user units (the drawing scales to the window).
const (
	laneLabelW = 330.0  // the labels' column
	lanePlotW  = 1000.0 // the time axis
	laneRightM = 12.0
	laneAxisH  = 34.0
	laneRowH   = 20.0
	laneMarkW  = 5.0
)

// Colours: a resource's is the timeline's (the same FNV-1a hash into the same palette as
// static/timeline.js), the ops' and health's are fixed.
var (
	lanePalette = []string{"#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#eeca3b", "#ff9da6", "#17becf", "#8c6d31", "#393b79"}
	laneColours = map[string]string{
		"delete": "#d62728", "inferred": "#ff7f0e", // as the timeline's deletes
		"health-bad": "#9c27b0", "health-recovered": "#2ca02c",
		"event-warning": "#e6a100", "event-normal": "#8a8a8a",
	}
)

// resourceColour is the timeline's colour of a resource id.
func resourceColour(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id)) // a 16-bit string in JavaScript; ids are ASCII
	return lanePalette[h.Sum32()%uint32(len(lanePalette))]
}

type lanesPage struct {
	page
	Filter             filter
	Workload           bool
	Presets            []presetLink
	Resources          []string
	FromText, ToText   string
	UTCURL, LocalURL   string
	GroupURL           string // the other grouping
	Permalink          string
	Rows               []laneRow
	Width, Height      float64
	PlotX, PlotW       float64
	Ticks              []laneTick
	Total, First, Last int // lanes in the range; this page's first and last (1-based)
	PerPage            int
	Prev, Next         string
	Truncated          bool // a lane has more versions than are drawn
	EventsShown        bool
	FromMS, ToMS       int64 // the range, for static/lanes.js (drag to zoom)
}

type laneTick struct {
	X      float64
	Label  string
	Anchor string // the label's text-anchor: a label at an edge of the axis stays inside it
}

// laneRow is a lane, or a header naming a group.
type laneRow struct {
	Header    bool
	Label     string
	Title     string // the full label
	Kind      string
	Key       string // resource/namespace/name, for tests and links
	Parent    string // the key of the lane it is nested under (workload grouping)
	Depth     int
	URL       string
	Y, MidY   float64
	LabelX    float64
	Life      []laneSpan // the object's life in the range: created to deleted
	Bad       []laneSpan // while unhealthy
	Marks     []laneMark
	Events    []laneEvent
	Truncated bool
}

type laneSpan struct{ X1, X2 float64 }

type laneMark struct {
	X, Y, W, H float64
	Fill       string
	Class      string
	URL        string
	Title      string
	ID         int64
	AtMS       int64
	Op         string
	Health     string // bad, recovered or ""
}

type laneEvent struct {
	X, Y   float64
	Points string // a triangle
	Fill   string
	Class  string
	Title  string
	Reason string
	Type   string
	AtMS   int64
	Count  int
}

// lanesPerPage is how many lanes a page draws.
const lanesPerPage = store.DefaultLanes

func (s *Server) lanes(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "Lanes")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	now := s.o.Now()
	q := r.URL.Query()
	f, err := parseFilter(q, now)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	lp := lanesPage{page: p, Filter: f, PerPage: lanesPerPage}
	switch q.Get("group") {
	case "", "kind":
	case "workload":
		lp.Workload = true
	default:
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("group %q: want kind (the default) or workload", q.Get("group")))
		return
	}
	offset := 0
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("page %q: want a page number from 1", v))
			return
		}
		offset = (n - 1) * lanesPerPage
	}
	to := f.To
	if to.IsZero() {
		to = now
	}
	if lp.Resources, err = s.resources(r.Context(), p.Cluster); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	// The resource and name read as the timeline reads them: a short name or kind, a
	// name's part, prefix (x*), exact (=x) or regex (~re).
	if code, err := s.check(r.Context(), p.Cluster, &f); err != nil {
		s.fail(w, r, code, err)
		return
	}
	group, resource := parseResource(f.Resource)
	name, match := nameMatch(f.Name)
	got, err := s.o.Store.Lanes(r.Context(), store.LanesQuery{Cluster: p.Cluster, From: f.From, To: to, Namespace: f.Namespace,
		Group: group, Resource: resource, Name: name, NameMatch: match, Lanes: lanesPerPage, Offset: offset, Bodies: bodyResources(),
		Workload: lp.Workload})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var events []store.Event
	if p.Features.Events && len(got.Lanes) > 0 {
		var uids []string
		for _, l := range got.Lanes {
			for _, m := range l.Marks {
				if m.UID != "" && !slices.Contains(uids, m.UID) {
					uids = append(uids, m.UID)
				}
			}
		}
		for _, o := range got.Owners {
			uids = append(uids, o.UID)
		}
		if events, err = s.o.Store.Events(r.Context(), p.Cluster, uids, f.From, to, 0); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		lp.EventsShown = true
	}
	keep := url.Values{}
	base := f.values(p.Cluster, true)
	for _, k := range []string{"range", "from", "to", "tz"} {
		if v := base.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	d := drawing{from: f.From, to: to, keep: keep.Encode(), cluster: p.Cluster}
	lp.Rows = d.rows(got, events, lp.Workload)
	lp.Width, lp.PlotX, lp.PlotW = laneLabelW+lanePlotW+laneRightM, laneLabelW, lanePlotW
	lp.Height = laneAxisH + float64(len(lp.Rows))*laneRowH + 4
	lp.Ticks = d.ticks(p.Zone)
	lp.FromMS, lp.ToMS = f.From.UnixMilli(), to.UnixMilli()
	for _, l := range got.Lanes {
		lp.Truncated = lp.Truncated || l.Truncated
	}
	lp.Total = got.Total
	if len(got.Lanes) > 0 {
		lp.First, lp.Last = offset+1, offset+len(got.Lanes)
	}
	link := func(v url.Values) string { return "/lanes?" + v.Encode() }
	vals := func() url.Values {
		v := f.values(p.Cluster, true)
		v.Del("op")
		v.Del("flag")
		v.Del("user")
		if lp.Workload {
			v.Set("group", "workload")
		}
		return v
	}
	page := offset/lanesPerPage + 1
	if page > 1 {
		v := vals()
		v.Set("page", strconv.Itoa(page-1))
		lp.Prev = link(v)
	}
	if offset+len(got.Lanes) < got.Total {
		v := vals()
		v.Set("page", strconv.Itoa(page+1))
		lp.Next = link(v)
	}
	g := vals()
	if lp.Workload {
		g.Del("group")
	} else {
		g.Set("group", "workload")
	}
	lp.GroupURL = link(g)
	for _, pr := range presets {
		v := vals()
		v.Del("from")
		v.Del("to")
		v.Set("range", pr)
		lp.Presets = append(lp.Presets, presetLink{Label: pr, URL: link(v), Current: f.Range == pr})
	}
	abs := vals()
	abs.Del("range")
	abs.Set("from", f.From.UTC().Format(time.RFC3339Nano))
	abs.Set("to", to.UTC().Format(time.RFC3339Nano))
	lp.Permalink = link(abs)
	v := vals()
	v.Del("tz")
	lp.UTCURL = link(v)
	v.Set("tz", "local")
	lp.LocalURL = link(v)
	lp.FromText = f.From.UTC().Format(time.RFC3339)
	if !f.To.IsZero() {
		lp.ToText = f.To.UTC().Format(time.RFC3339)
	}
	lp.finish()
	s.render(w, "lanes", lp)
}

// drawing places a page of lanes on the time axis.
type drawing struct {
	from, to time.Time
	keep     string // the range and zone, for the object pages' links
	cluster  string
}

func (d drawing) x(t time.Time) float64 {
	span := d.to.Sub(d.from)
	if span <= 0 {
		return laneLabelW
	}
	f := float64(t.Sub(d.from)) / float64(span)
	return laneLabelW + min(max(f, 0), 1)*lanePlotW
}

// node is a lane or an owner in the workload tree.
type node struct {
	lane     *store.Lane
	owner    *store.Owner
	ref      *store.OwnerRef // an owner known only by a reference
	uid      string
	parent   string
	children []*node
	first    time.Time
}

func (n *node) sortKey() (ns, kind, name string) {
	switch {
	case n.lane != nil:
		return n.lane.Namespace, cmp.Or(n.lane.Kind, n.lane.Resource), n.lane.Name
	case n.owner != nil:
		return n.owner.Namespace, n.owner.Kind, n.owner.Name
	}
	return "", n.ref.Kind, n.ref.Name
}

func (d drawing) rows(got store.Lanes, events []store.Event, workload bool) []laneRow {
	byUID := map[string][]store.Event{}
	for _, e := range events {
		byUID[e.InvolvedUID] = append(byUID[e.InvolvedUID], e)
	}
	var out []laneRow
	add := func(r laneRow) {
		r.Y = laneAxisH + float64(len(out))*laneRowH
		r.MidY = r.Y + laneRowH/2
		r.LabelX = 6 + float64(r.Depth)*14
		out = append(out, r)
	}
	if !workload {
		lastNS, lastKind := "\x00", "\x00"
		for i := range got.Lanes {
			l := &got.Lanes[i]
			kind := cmp.Or(l.Kind, l.Resource)
			if l.Namespace != lastNS {
				add(laneRow{Header: true, Label: "namespace " + cmp.Or(l.Namespace, "(cluster-scoped)")})
				lastNS, lastKind = l.Namespace, "\x00"
			}
			if kind != lastKind {
				add(laneRow{Header: true, Depth: 1, Label: kind + " (" + resourceID(l.Group, l.Resource) + ")", Kind: kind})
				lastKind = kind
			}
			r := d.lane(l, byUID)
			r.Depth = 2
			add(r)
		}
		return out
	}
	// Workload: each lane under its controller, up to the top, by the uids of the lanes'
	// newest versions and of the live owners read with them.
	nodes := map[string]*node{}
	var order []*node
	put := func(n *node) *node {
		if n.uid != "" {
			if old, ok := nodes[n.uid]; ok {
				return old
			}
			nodes[n.uid] = n
		}
		order = append(order, n)
		return n
	}
	for i := range got.Lanes {
		l := &got.Lanes[i]
		n := &node{lane: l}
		if len(l.Marks) > 0 {
			newest := l.Marks[len(l.Marks)-1]
			n.uid, n.first = newest.UID, l.Marks[0].ObservedAt
			for j := len(l.Marks) - 1; j >= 0; j-- {
				if c := l.Marks[j].Controller; c != nil {
					n.parent = c.UID
					break
				}
			}
		}
		if old, ok := nodes[n.uid]; ok && n.uid != "" {
			_ = old // one object under two keys cannot happen; keep the first
			continue
		}
		put(n)
	}
	for i := range got.Owners {
		o := &got.Owners[i]
		n := &node{owner: o, uid: o.UID, first: d.from}
		if o.Controller != nil {
			n.parent = o.Controller.UID
		}
		put(n)
	}
	// A controller known only by a lane's reference (not streamed, or gone).
	for _, n := range slices.Clone(order) {
		if n.parent == "" || nodes[n.parent] != nil || n.lane == nil {
			continue
		}
		for j := len(n.lane.Marks) - 1; j >= 0; j-- {
			if c := n.lane.Marks[j].Controller; c != nil && c.UID == n.parent {
				put(&node{ref: c, uid: c.UID, first: d.from})
				break
			}
		}
	}
	var roots []*node
	for _, n := range order {
		if p := nodes[n.parent]; n.parent != "" && p != nil && p != n {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	byKey := func(a, b *node) int {
		ans, ak, an := a.sortKey()
		bns, bk, bn := b.sortKey()
		return cmp.Or(cmp.Compare(ans, bns), cmp.Compare(ak, bk), a.first.Compare(b.first), cmp.Compare(an, bn))
	}
	slices.SortFunc(roots, byKey)
	lastNS := "\x00"
	seen := map[*node]bool{}
	var walk func(n *node, depth int, parent string)
	walk = func(n *node, depth int, parent string) {
		if seen[n] || depth > 10 {
			return
		}
		seen[n] = true
		var r laneRow
		switch {
		case n.lane != nil:
			r = d.lane(n.lane, byUID)
		case n.owner != nil:
			o := n.owner
			r = laneRow{Label: o.Kind + " " + o.Name, Title: o.Kind + " " + o.Namespace + "/" + o.Name + " (no change in this range)",
				Kind: o.Kind, Key: resourceID(o.Group, o.Resource) + "/" + o.Namespace + "/" + o.Name,
				URL:  objectURL(d.cluster, o.Group, o.Resource, o.Namespace, o.Name) + d.suffix(),
				Life: []laneSpan{{laneLabelW, laneLabelW + lanePlotW}}}
			r.Events = d.events(byUID[o.UID])
		default:
			r = laneRow{Label: n.ref.Kind + " " + n.ref.Name, Title: n.ref.Kind + " " + n.ref.Name + " (not recorded)", Kind: n.ref.Kind}
		}
		r.Depth, r.Parent = depth+1, parent
		add(r)
		slices.SortFunc(n.children, byKey)
		for _, c := range n.children {
			walk(c, depth+1, r.Key)
		}
	}
	for _, n := range roots {
		if ns, _, _ := n.sortKey(); ns != lastNS && n.ref == nil {
			add(laneRow{Header: true, Label: "namespace " + cmp.Or(ns, "(cluster-scoped)")})
			lastNS = ns
		}
		walk(n, 0, "")
	}
	return out
}

// suffix keeps the range and the zone on an object page's link.
func (d drawing) suffix() string {
	if d.keep == "" {
		return ""
	}
	return "&" + d.keep
}

// lane draws one object's versions: a mark each at its moment, its life as a bar, its
// unhealthy stretches shaded.
func (d drawing) lane(l *store.Lane, events map[string][]store.Event) laneRow {
	id := resourceID(l.Group, l.Resource)
	kind := cmp.Or(l.Kind, l.Resource)
	r := laneRow{Label: kind + " " + l.Name, Kind: kind, Key: id + "/" + l.Namespace + "/" + l.Name, Truncated: l.Truncated,
		URL: objectURL(d.cluster, l.Group, l.Resource, l.Namespace, l.Name) + d.suffix()}
	r.Title = r.Label
	if l.Namespace != "" {
		r.Title = kind + " " + l.Namespace + "/" + l.Name
	}
	colour := resourceColour(id)
	var t tracker
	if l.Before != nil {
		t.step(healthOfVersion(l.Group, l.Resource, l.Before.Op, l.Before.Body))
	}
	badFrom := -1.0
	if t.bad {
		badFrom = laneLabelW
	}
	born := laneLabelW // where the current life began; -1 while deleted
	if l.Before != nil && l.Before.Op == change.OpDelete || len(l.Marks) > 0 && l.Marks[0].Op == change.OpCreate {
		born = -1
	}
	uids := map[string]bool{}
	for _, m := range l.Marks {
		uids[m.UID] = true
		x := d.x(m.ObservedAt)
		v := healthOfVersion(l.Group, l.Resource, m.Op, m.Body)
		tr := t.step(v)
		mk := laneMark{X: x - laneMarkW/2, W: laneMarkW, ID: m.ID, AtMS: m.ObservedAt.UnixMilli(), Op: string(m.Op),
			URL: versionURL(r.URL, m.ID)}
		mk.Y, mk.H = 0, laneRowH-6
		fill, class := colour, "mark op-"+string(m.Op)
		switch m.Op {
		case change.OpUpdate:
			mk.Y, mk.H = 3, laneRowH-12
		case change.OpDelete:
			fill = laneColours["delete"]
			if m.Inferred {
				fill, class = laneColours["inferred"], class+" inferred"
			}
			if born >= 0 {
				r.Life = append(r.Life, laneSpan{born, x})
			}
			born = -1
			if badFrom >= 0 {
				r.Bad = append(r.Bad, laneSpan{badFrom, x})
				badFrom = -1
			}
			t = tracker{}
		}
		switch tr {
		case wentBad:
			mk.Health, class = "bad", class+" health-bad"
			if m.Op != change.OpDelete {
				fill = laneColours["health-bad"]
			}
			badFrom = x
		case recovered:
			mk.Health, class = "recovered", class+" health-recovered"
			if m.Op != change.OpDelete {
				fill = laneColours["health-recovered"]
			}
			if badFrom >= 0 {
				r.Bad = append(r.Bad, laneSpan{badFrom, x})
			}
			badFrom = -1
		}
		if m.Op == change.OpCreate && born < 0 {
			born = x
		}
		mk.Fill, mk.Class = fill, class
		title := when(m.ObservedAt, time.UTC) + " · " + string(m.Op)
		if m.Inferred {
			title += " (inferred)"
		}
		if m.Snapshot {
			title += " (snapshot)"
		}
		title += " · rv " + m.RV.String()
		if v.known {
			title += " · health " + v.reason
		}
		if m.ChangedBy != "" {
			title += " · field manager " + m.ChangedBy
		}
		mk.Title = title + " · click for the diff and who made it"
		r.Marks = append(r.Marks, mk)
	}
	if badFrom >= 0 {
		r.Bad = append(r.Bad, laneSpan{badFrom, laneLabelW + lanePlotW})
	}
	if born >= 0 {
		r.Life = append(r.Life, laneSpan{born, laneLabelW + lanePlotW})
	}
	var evs []store.Event
	for uid := range uids {
		evs = append(evs, events[uid]...)
	}
	r.Events = d.events(evs)
	return r
}

// events draws a lane's Kubernetes Events as triangles under it, at their last time;
// Warning ones in amber.
func (d drawing) events(evs []store.Event) []laneEvent {
	slices.SortFunc(evs, func(a, b store.Event) int { return a.LastAt.Compare(b.LastAt) })
	out := make([]laneEvent, 0, len(evs))
	for _, e := range evs {
		x := d.x(e.LastAt)
		fill, class := laneColours["event-normal"], "event event-normal"
		if e.Type == "Warning" {
			fill, class = laneColours["event-warning"], "event event-warning"
		}
		count := max(e.Count, e.SeriesCount, 1)
		e.Reason, e.Message = history.Visible(e.Reason), history.Visible(e.Message) // as on the object page
		out = append(out, laneEvent{X: x, Fill: fill, Class: class, Reason: e.Reason, Type: e.Type, AtMS: e.LastAt.UnixMilli(),
			Count:  count,
			Points: fmt.Sprintf("%.1f,%.1f %.1f,%.1f %.1f,%.1f", x, laneRowH-2, x-4.5, laneRowH-10, x+4.5, laneRowH-10),
			Title:  fmt.Sprintf("%s event %s ×%d, last %s: %s", cmp.Or(e.Type, "an"), e.Reason, count, when(e.LastAt, time.UTC), e.Message)})
	}
	return out
}

// tickLabelRoom is how close to an end of the axis a tick's label is anchored at its tick
// rather than centred on it, so that it is not cut off.
const tickLabelRoom = 40.0

// tickSteps are the time axis' steps, the first that gives at most ten ticks.
var tickSteps = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 7 * 24 * time.Hour,
}

// ticks are the time axis' labels: whole steps in the page's zone.
func (d drawing) ticks(loc *time.Location) []laneTick {
	span := d.to.Sub(d.from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 10 {
			step = s
			break
		}
	}
	var first time.Time
	if step < time.Hour {
		first = d.from.Truncate(step)
		// Truncate works on absolute time: a zone off UTC by a fraction of the step
		// moves the ticks off whole minutes; re-align in the zone.
		_, off := d.from.In(loc).Zone()
		first = first.Add(-time.Duration(off) * time.Second).Truncate(step).Add(time.Duration(off) * time.Second)
		for first.Before(d.from) {
			first = first.Add(step)
		}
	} else {
		l := d.from.In(loc)
		h := int(step / time.Hour)
		if h >= 24 {
			first = time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
		} else {
			first = time.Date(l.Year(), l.Month(), l.Day(), l.Hour()-l.Hour()%h, 0, 0, 0, loc)
		}
		for first.Before(d.from) {
			first = first.Add(step)
		}
	}
	var out []laneTick
	lastDay := ""
	for t := first; !t.After(d.to); t = t.Add(step) {
		l := t.In(loc)
		day := l.Format("2006-01-02")
		var label string
		switch {
		case step >= 24*time.Hour:
			label = day
		case step < time.Second:
			label = l.Format("15:04:05.000")
		case step < time.Minute:
			label = l.Format("15:04:05")
		case day != lastDay:
			label = l.Format("01-02 15:04")
		default:
			label = l.Format("15:04")
		}
		lastDay = day
		tick := laneTick{X: d.x(t), Label: label, Anchor: "middle"}
		switch {
		case tick.X-laneLabelW < tickLabelRoom:
			tick.Anchor = "start"
		case laneLabelW+lanePlotW-tick.X < tickLabelRoom:
			tick.Anchor = "end"
		}
		out = append(out, tick)
		if len(out) > 12 {
			break
		}
	}
	return out
}
