package ui_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// lanesPath is the lanes view of the lanes' world over [from, to) ms after t0.
func (w lanesWorld) lanesPath(from, to int, extra string) string {
	v := url.Values{"cluster": {w.cluster}, "from": {w.at(from).Format(time.RFC3339Nano)}, "to": {w.at(to).Format(time.RFC3339Nano)}}
	return "/lanes?" + v.Encode() + extra
}

func TestTheStoreReadsAPageOfLanesWithTheirVersionsHealthBodiesAndLiveControllers(t *testing.T) {
	w := theLanes(t)
	got, err := st.Lanes(testCtx(t), store.LanesQuery{Cluster: w.cluster, From: w.at(5000), To: w.at(120000),
		Bodies: []change.Resource{{Resource: "pods"}}, Workload: true})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range got.Lanes {
		keys = append(keys, l.Resource+"/"+l.Name)
	}
	want := []string{"pods/web-new-a", "pods/web-new-b", "pods/web-old-a", "pods/web-old-b", "replicasets/web-new", "replicasets/web-old"}
	if !slices.Equal(keys, want) || got.Total != len(want) {
		t.Fatalf("lanes %v (total %d), want %v: the objects that changed in the range, by namespace, group, resource and name", keys, got.Total, want)
	}
	crash := got.Lanes[1]
	var ops []string
	for _, m := range crash.Marks {
		ops = append(ops, string(m.Op))
		if m.Body == nil {
			t.Errorf("web-new-b's %s at %v has no object: pods' versions come with theirs", m.Op, m.ObservedAt)
		}
	}
	if !slices.Equal(ops, []string{"create", "update", "update"}) || !crash.Marks[1].ObservedAt.Equal(w.at(30000)) {
		t.Errorf("web-new-b's marks are %v (the second at %v), want create, update, update in observation order, the crash at %v", ops, crash.Marks[1].ObservedAt, w.at(30000))
	}
	if old := got.Lanes[2]; old.Before == nil || old.Before.Op != change.OpCreate || old.Before.Body == nil || len(old.Marks) != 1 || old.Marks[0].Op != change.OpDelete {
		t.Errorf("web-old-a: before %+v, marks %+v; want its create before the range (with its object) and its delete in it", old.Before, old.Marks)
	}
	if rs := got.Lanes[4]; rs.Marks[0].Body != nil || rs.Kind != "ReplicaSet" || rs.Marks[0].Controller == nil || rs.Marks[0].Controller.UID != "uid-web" {
		t.Errorf("web-new: kind %q, controller %+v, object read %v; want ReplicaSet, controlled by uid-web, no object (not among the bodies asked)",
			rs.Kind, rs.Marks[0].Controller, rs.Marks[0].Body != nil)
	}
	var deploy *store.Owner
	for i, o := range got.Owners {
		if o.UID == "uid-web" {
			deploy = &got.Owners[i]
		}
	}
	if deploy == nil || deploy.Kind != "Deployment" || deploy.Resource != "deployments" || deploy.Controller != nil {
		t.Errorf("owners %+v: want the Deployment web (no change in the range), read up from the ReplicaSets, at the top", got.Owners)
	}

	// The second page of two.
	page, err := st.Lanes(testCtx(t), store.LanesQuery{Cluster: w.cluster, From: w.at(5000), To: w.at(120000), Lanes: 2, Offset: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Lanes) != 2 || page.Lanes[0].Name != "web-old-a" || page.Lanes[1].Name != "web-old-b" || page.Total != 6 || page.Owners != nil {
		t.Errorf("lanes 3 and 4: %+v (total %d, owners %v), want web-old-a and web-old-b of 6, no owners unless asked", page.Lanes, page.Total, page.Owners)
	}

	evs, err := st.Events(testCtx(t), w.cluster, []string{"uid-new-b", "uid-old-a"}, w.at(5000), w.at(120000), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Reason != "BackOff" || evs[0].Type != "Warning" || evs[0].Count != 5 || !evs[0].LastAt.Equal(w.at(31000)) {
		t.Errorf("events of web-new-b and web-old-a: %+v, want the Warning BackOff ×5 at t0+31s", evs)
	}
}

// laneMarks reads, per lane, its marks as drawn: op, health, x.
const laneMarks = `Object.fromEntries(Array.from(document.querySelectorAll('#lanes g.lane')).map(g => [g.dataset.key,
  Array.from(g.querySelectorAll('a.mark')).map(a => ({op: a.dataset.op, health: a.dataset.health, cls: a.getAttribute('class'),
    x: Number(a.querySelector('rect').getAttribute('x')), fill: getComputedStyle(a.querySelector('rect')).fill, href: a.getAttribute('href')}))]))`

type drawnMark struct {
	Op, Health, Cls, Fill, Href string
	X                           float64
}

func TestInABrowserTheLanesOfARolloutShowTheOldPodsEndingAndTheNewOnesStartingInOrder(t *testing.T) {
	browser := chromium(t)
	w := theLanes(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	// Four seconds around the rollout: its versions are 300 ms apart.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+w.lanesPath(9000, 13000, "")), chromedp.WaitVisible(chromedp.CSS("#lanes"))); err != nil {
		t.Fatal(err)
	}
	lanes := run(t, ctx, "the lanes", chromedp.Evaluate[map[string][]drawnMark](laneMarks))
	x := func(key, op string) float64 {
		t.Helper()
		for _, m := range lanes[key] {
			if m.Op == op {
				return m.X
			}
		}
		t.Fatalf("lane %s has no %s mark: %+v (lanes: %v)", key, op, lanes[key], lanes)
		return 0
	}
	seq := []struct{ key, op string }{
		{"pods/shop/web-new-a", "create"}, {"pods/shop/web-old-a", "delete"},
		{"pods/shop/web-new-b", "create"}, {"pods/shop/web-old-b", "delete"},
	}
	for i := 1; i < len(seq); i++ {
		a, b := x(seq[i-1].key, seq[i-1].op), x(seq[i].key, seq[i].op)
		if b-a < 20 {
			t.Errorf("%s %s is drawn at x=%.1f and %s %s at x=%.1f: want the rollout's steps (≥300 ms apart) in order and apart", seq[i-1].key, seq[i-1].op, a, seq[i].key, seq[i].op, b)
		}
	}
	if c := lanes["pods/shop/web-new-a"][0].Fill; c != "rgb(76, 120, 168)" && !strings.HasPrefix(c, "rgb(") {
		t.Errorf("web-new-a's create is filled %q", c)
	}
	if del := lanes["pods/shop/web-old-a"][0]; del.Fill != "rgb(214, 39, 40)" {
		t.Errorf("web-old-a's delete is filled %q, want the timeline's red for deletes", del.Fill)
	}
	labels := run(t, ctx, "the ticks", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#lanes .tick-label')).map(e => e.textContent)`))
	if len(labels) < 4 {
		t.Fatalf("the time axis shows %v, want a tick at least every second over four", labels)
	}
	var last time.Time
	for i, l := range labels {
		at, err := time.Parse("15:04:05.000", l)
		if err != nil || at.Nanosecond()%int(100*time.Millisecond) != 0 || i > 0 && !at.After(last) {
			t.Errorf("the time axis shows %q (all: %v), want whole steps, 24-hour, increasing", l, labels)
		}
		last = at
	}
}

func TestInABrowserAPodsLaneTurnsUnhealthyAfterACrashAndItsEventsShowOnTheLaneAndTheObjectPage(t *testing.T) {
	browser := chromium(t)
	w := theLanes(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+w.lanesPath(5000, 120000, "")), chromedp.WaitVisible(chromedp.CSS("#lanes"))); err != nil {
		t.Fatal(err)
	}
	lanes := run(t, ctx, "the lanes", chromedp.Evaluate[map[string][]drawnMark](laneMarks))
	crash := lanes["pods/shop/web-new-b"]
	if len(crash) != 3 || crash[0].Health != "" || crash[1].Health != "bad" || !strings.Contains(crash[1].Cls, "health-bad") ||
		crash[1].Fill != "rgb(156, 39, 176)" || crash[2].Health != "recovered" || crash[2].Fill != "rgb(44, 160, 44)" {
		t.Errorf("web-new-b's marks: %+v; want its create, then the crash drawn as health gone bad (purple), then the recovery (green)", crash)
	}
	if healthy := lanes["pods/shop/web-new-a"]; len(healthy) != 1 || healthy[0].Health != "" {
		t.Errorf("web-new-a's marks: %+v, want one create and no health change", healthy)
	}
	shaded := run(t, ctx, "the unhealthy stretch", chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll('#lanes g.lane[data-key="pods/shop/web-new-b"] rect.unhealthy')).flatMap(r => [Number(r.getAttribute('x')), Number(r.getAttribute('width'))])`))
	if len(shaded) != 2 || shaded[0] != crash[1].X+2.5 || shaded[0]+shaded[1] != crash[2].X+2.5 {
		t.Errorf("web-new-b's lane is shaded at %v, want one stretch from the crash (x=%.1f) to the recovery (x=%.1f)", shaded, crash[1].X+2.5, crash[2].X+2.5)
	}
	type ev struct{ Cls, Reason, Count string }
	evs := run(t, ctx, "the lanes' events", chromedp.Evaluate[map[string][]ev](`Object.fromEntries(Array.from(document.querySelectorAll('#lanes g.lane')).map(g => [g.dataset.key, Array.from(g.querySelectorAll('polygon.event')).map(p => ({cls: p.getAttribute('class'), reason: p.dataset.reason, count: p.dataset.count}))]))`))
	if e := evs["pods/shop/web-new-b"]; len(e) != 1 || e[0].Reason != "BackOff" || e[0].Cls != "event event-warning" || e[0].Count != "5" {
		t.Errorf("web-new-b's lane shows the events %+v, want the Warning BackOff ×5", e)
	}
	if e := evs["pods/shop/web-new-a"]; len(e) != 1 || e[0].Reason != "Pulled" || e[0].Cls != "event event-normal" {
		t.Errorf("web-new-a's lane shows the events %+v, want the Normal Pulled", e)
	}
	pulled := run(t, ctx, "the Pulled event's text", chromedp.Evaluate[string](`document.querySelector('#lanes g.lane[data-key="pods/shop/web-new-a"] polygon.event title').textContent`))
	if ran := run(t, ctx, "check for scripts", chromedp.Evaluate[bool](`window.__xss !== undefined`)); ran || !strings.Contains(pulled, xssPayload) {
		t.Errorf("an event's message ran as script (%v) or is not shown as text: %q", ran, pulled)
	}

	// The crash's mark opens its version, and the page lists the pod's events.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes g.lane[data-key="pods/shop/web-new-b"] a.mark.health-bad rect`)),
		chromedp.WaitVisible(chromedp.CSS("#events"))); err != nil {
		t.Fatal(err)
	}
	loc := run(t, ctx, "the location", chromedp.Location())
	id := regexp.MustCompile(`#v(\d+)$`).FindStringSubmatch(loc)
	if id == nil || !strings.Contains(loc, "name=web-new-b") {
		t.Fatalf("the crash's mark opened %s, want web-new-b's page at the version (#vID)", loc)
	}
	if op := run(t, ctx, "the version", chromedp.Evaluate[string](`(document.getElementById('v`+id[1]+`')?.querySelector('.op')?.textContent) || ""`)); op != "update" {
		t.Errorf("the page has the version #v%s as %q, want the crash's update", id[1], op)
	}
	rows := run(t, ctx, "the events", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#events tbody tr')).map(r => r.className + '|' + Array.from(r.cells).slice(0, 3).map(c => c.textContent).join('|'))`))
	if len(rows) != 1 || rows[0] != "warning|Warning|BackOff|5" {
		t.Errorf("web-new-b's page lists the events %q, want the Warning BackOff, count 5", rows)
	}
}

func TestInABrowserWorkloadGroupingNestsAReplicaSetsPodsUnderItsDeployment(t *testing.T) {
	browser := chromium(t)
	w := theLanes(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("load the lanes", chromedp.EmulateViewport(1280, 860), chromedp.Navigate(srv.URL+w.lanesPath(-5000, 70000, "")), chromedp.WaitVisible(chromedp.CSS("#lanes")))
	do("group by workload", chromedp.Click(chromedp.CSS("#group-toggle")), chromedp.WaitVisible(chromedp.CSS(`#lanes g.lane[data-depth="1"]`)))
	rows := run(t, ctx, "the lanes", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#lanes g.lane')).map(g => g.dataset.depth + ' ' + g.dataset.key + ' < ' + g.dataset.parent)`))
	want := []string{
		"1 deployments.apps/shop/web < ",
		"2 replicasets.apps/shop/web-old < deployments.apps/shop/web",
		"3 pods/shop/web-old-a < replicasets.apps/shop/web-old",
		"3 pods/shop/web-old-b < replicasets.apps/shop/web-old",
		"2 replicasets.apps/shop/web-new < deployments.apps/shop/web",
		"3 pods/shop/web-new-a < replicasets.apps/shop/web-new",
		"3 pods/shop/web-new-b < replicasets.apps/shop/web-new",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("grouped by workload the lanes are\n%s\nwant each ReplicaSet under the Deployment and its pods under it, oldest first:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if os.Getenv(screenshotsToDocs) != "" {
		b := run(t, ctx, "screenshot", chromedp.CaptureScreenshot())
		dst := filepath.Join(testenv.RepoRoot(), "docs", "img", "ui-lanes.png")
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", dst)
	}
}

func TestTheTimelinesChartCountsHealthGoingBadAndRecoveringAsSeriesOfTheirOwn(t *testing.T) {
	w := theLanes(t)
	srv := newServer(t, nil)
	v := url.Values{"cluster": {w.cluster}, "from": {w.at(-60000).Format(time.RFC3339)}, "to": {w.at(240000).Format(time.RFC3339)}}
	code, body := get(t, srv, "/chart.json?"+v.Encode())
	if code != 200 {
		t.Fatalf("chart.json: %d %s", code, body)
	}
	var c struct {
		T      []int64
		Series []struct {
			Label, Kind string
			Data        []int64
		}
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	at := map[string][]int64{}
	for _, s := range c.Series {
		for i, n := range s.Data {
			for range n {
				at[s.Kind] = append(at[s.Kind], c.T[i])
			}
		}
	}
	bucket := func(ms int) int64 { return w.at(ms).Truncate(time.Minute).Unix() }
	if !slices.Equal(at["unhealthy"], []int64{bucket(30000)}) || !slices.Equal(at["recovered"], []int64{bucket(60000)}) {
		t.Errorf("the chart's health series: went bad in the buckets %v, recovered in %v; want the crash's minute %d and the recovery's %d",
			at["unhealthy"], at["recovered"], bucket(30000), bucket(60000))
	}
}

// The lanes read a name as the timeline does: a part of it by default, a prefix (x*),
// the exact name (=x) or a regular expression (~re).
func TestTheLanesReadANameFilterAsTheTimelineDoes(t *testing.T) {
	w := theLanes(t)
	srv := newServer(t, nil)
	key := regexp.MustCompile(`<g class="lane" data-key="([^"]+)"`)
	pods, rs := []string{"pods/shop/web-new-a", "pods/shop/web-new-b"}, "replicasets.apps/shop/web-new"
	for _, tc := range []struct {
		name, filter string
		want         []string
	}{
		{"a part of the name", "new-", pods},
		{"a part, in other case", "WEB-NEW", append(slices.Clone(pods), rs)},
		{"a prefix", "web-new*", append(slices.Clone(pods), rs)},
		{"a regular expression", "~^web-n.w-", pods},
		{"the exact name", "=web-new", []string{rs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, w.lanesPath(0, 120000, "&name="+url.QueryEscape(tc.filter)))
			var got []string
			for _, m := range key.FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
			if code != 200 || !slices.Equal(got, tc.want) {
				t.Errorf("name=%s: %d, lanes %v, want %v", tc.filter, code, got, tc.want)
			}
		})
	}
	if code, body := get(t, srv, w.lanesPath(0, 120000, "&name="+url.QueryEscape("~web-(new"))); code != 400 || !strings.Contains(body, "invalid regular expression") {
		t.Errorf("an invalid regular expression: %d, want 400 naming it", code)
	}
}
