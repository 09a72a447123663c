package ui_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/read/ui"
)

// What a person reads off the pages at a glance (issue 31), in the shared browser.

// chartDrawn waits until the timeline's chart is drawn.
var chartDrawn = chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`))

// legendColours is a JavaScript expression: each legend entry's label and swatch colour.
const legendColours = `Object.fromEntries(Array.from(document.querySelectorAll('#chart .u-legend .u-series')).slice(1).map(s => [s.querySelector('.u-label').textContent, getComputedStyle(s.querySelector('.u-marker')).backgroundColor]))`

// ticks reads the tick labels the chart's axis drew (timeline.js keeps them on #chart).
func ticks(t *testing.T, ctx context.Context, attr string) []string {
	t.Helper()
	raw := run(t, ctx, "the chart's "+attr, chromedp.Evaluate[string](`document.getElementById('chart').dataset.`+attr+` || ""`))
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil || len(out) == 0 {
		t.Fatalf("the chart's %s: %q (%v), want the tick labels drawn", attr, raw, err)
	}
	return out
}

func TestInABrowserAResourceKeepsItsColourAcrossRangesAndTheChartCountsInWholeNumbers(t *testing.T) {
	browser := chromium(t)
	w := theWorld(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	colours := func(path string) map[string]string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path), chartDrawn); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return run(t, ctx, "the legend", chromedp.Evaluate[map[string]string](legendColours))
	}
	// Ranked by count, configmaps would be the second resource here (secrets are fewer and
	// drawn first) and the only one in the second view.
	both := colours("/?range=1h&ns=" + w.ns)
	alone := colours("/?range=6h&resource=configmaps")
	if both["configmaps"] == "" || both["configmaps"] != alone["configmaps"] {
		t.Errorf("configmaps are drawn in %q over an hour of %s and in %q over 6 hours alone: want one colour", both["configmaps"], w.ns, alone["configmaps"])
	}
	if both["secrets"] == both["configmaps"] {
		t.Errorf("secrets and configmaps share the colour %s", both["secrets"])
	}
	for _, legend := range []map[string]string{both, alone} {
		if legend["deletes"] != "rgb(214, 39, 40)" || legend["inferred deletes"] != "rgb(255, 127, 14)" {
			t.Errorf("the deletes are drawn in %q and the inferred deletes in %q, want red and orange whatever the view", legend["deletes"], legend["inferred deletes"])
		}
	}
	// One secret in the namespace: a count of 1 is the axis' top, and no tick is a fraction.
	colours("/?range=1h&resource=secrets&ns=" + w.ns)
	y := ticks(t, ctx, "yticks")
	for _, tick := range y {
		if !regexp.MustCompile(`^\d+$`).MatchString(tick) {
			t.Errorf("the count axis shows %q (all: %v), want whole numbers", tick, y)
		}
	}
}

// setZone makes the tab's browser live in a time zone, as a person's does.
func setZone(id string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: id})
		return chromedp.Void{}, err
	}
}

func TestInABrowserTimesAreUTCUntilTheLocalToggleShowsTheBrowsersZone(t *testing.T) {
	browser := chromium(t)
	w := theWorld(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	// An absolute hour up to now, so both views have the same ticks to compare.
	now := time.Now().UTC().Add(time.Minute).Truncate(time.Minute)
	path := "/?ns=" + w.ns + "&from=" + now.Add(-time.Hour).Format(time.RFC3339) + "&to=" + now.Format(time.RFC3339)
	if err := chromedp.Do(ctx, setZone("Asia/Kolkata"), chromedp.Navigate(srv.URL+path), chartDrawn); err != nil {
		t.Fatal(err)
	}
	firstTime := `document.querySelector('#feed tbody tr[data-id] td.t').textContent.trim()`
	utcTime := run(t, ctx, "the feed's time", chromedp.Evaluate[string](firstTime))
	utcTicks := ticks(t, ctx, "xticks")
	if zone := run(t, ctx, "the zone", chromedp.Text(chromedp.CSS("#tz-name"))); zone != "UTC" || !strings.HasSuffix(utcTime, " UTC") {
		t.Errorf("by default the page says its times are in %q and the feed shows %q: want UTC, said", zone, utcTime)
	}
	for _, tick := range utcTicks {
		if !regexp.MustCompile(`^(\d\d-\d\d )?\d\d:\d\d$`).MatchString(tick) {
			t.Errorf("the time axis shows %q (all: %v), want 24-hour HH:MM", tick, utcTicks)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tz-local")),
		chromedp.WaitVisible(chromedp.CSS(`#tz-local.on`)), chartDrawn); err != nil {
		t.Fatal(err)
	}
	// Chromium names the zone by ICU's canonical id (Asia/Calcutta).
	browserZone := run(t, ctx, "the browser's zone", chromedp.Evaluate[string](`Intl.DateTimeFormat().resolvedOptions().timeZone`))
	if zone := run(t, ctx, "the zone", chromedp.Text(chromedp.CSS("#tz-name"))); zone != browserZone || zone == "UTC" {
		t.Errorf("after the local toggle the page says its times are in %q, want the browser's %s", zone, browserZone)
	}
	localTime := run(t, ctx, "the feed's time", chromedp.Evaluate[string](firstTime))
	u, errU := time.Parse("2006-01-02 15:04:05.000 MST", utcTime)
	l, errL := time.Parse("2006-01-02 15:04:05.000", strings.TrimSuffix(localTime, " IST"))
	if errU != nil || errL != nil || !strings.HasSuffix(localTime, " IST") || !l.Equal(u.Add(5*time.Hour+30*time.Minute)) {
		t.Errorf("the same change reads %q in UTC and %q after the local toggle: want it 5:30 later, marked IST", utcTime, localTime)
	}
	localTicks := ticks(t, ctx, "xticks")
	shift := func(tick string) string { // "HH:MM" (after any date) moved by +5:30
		hm, err := time.Parse("15:04", tick[len(tick)-5:])
		if err != nil {
			return "?" + tick
		}
		return hm.Add(5*time.Hour + 30*time.Minute).Format("15:04")
	}
	var want, got []string
	for _, tick := range utcTicks {
		want = append(want, shift(tick))
	}
	for _, tick := range localTicks {
		got = append(got, tick[len(tick)-5:])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the time axis reads %v in UTC and %v in Asia/Kolkata: want every label 5:30 later", utcTicks, localTicks)
	}
}

// widest is a JavaScript expression: the outermost elements reaching past the window's
// right edge, as tag#id.class and their right edge.
const widest = `Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 1)).slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right))`

func TestInABrowserNoPageIsWiderThanA1400PixelWindow(t *testing.T) {
	browser := chromium(t)
	w := theWorld(t)
	ns := namespace(t, "ui-wide")
	// A name of four 63-letter labels (no place to break it) and an annotation of 3,000
	// characters without a space: the widest values a page shows.
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 60)
	cm, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(testCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: long,
		Annotations: map[string]string{"long": strings.Repeat("x", 3000)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded(t, "configmaps", ns, long, cm.ResourceVersion)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ path, ready string }{
		{"/?ns=" + ns, `#chart[data-drawn="true"] canvas`},
		{"/?ns=" + w.ns, `#chart[data-drawn="true"] canvas`},
		{"/object?resource=configmaps&ns=" + ns + "&name=" + long, "article.version"},
		{"/object?resource=configmaps&ns=" + w.ns + "&name=" + w.xssName, "article.version"},
		{"/asof?resource=configmaps&ns=" + ns + "&at=now", "#asof"},
		{"/asof?resource=configmaps&at=now", "#asof"},
		{"/status", "#status-table"},
		{"/object?resource=configmaps", "#error"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready))); err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		size := run(t, ctx, "the page's width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if size[1] != 1400 || size[0] > size[1] {
			wide := run(t, ctx, "what sticks out", chromedp.Evaluate[[]string](widest))
			t.Errorf("%s is %d px wide in a %d px window, want no wider than 1400; sticking out: %v", p.path, size[0], size[1], wide)
		}
	}
}

func TestInABrowserAsOf15mShowsTheObjectAsItWas15MinutesAgo(t *testing.T) {
	browser := chromium(t)
	ns := namespace(t, "ui-asof-then")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(testCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "then-and-now"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv1 := cm.ResourceVersion
	recorded(t, "configmaps", ns, cm.Name, rv1)
	cm.Data["v"] = "2"
	if cm, err = cms.Update(testCtx(t), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rv2 := cm.ResourceVersion
	recorded(t, "configmaps", ns, cm.Name, rv2)
	var t1, t2 time.Time
	if err := pool.QueryRow(testCtx(t), `SELECT min(observed_at), max(observed_at) FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2 AND name = $3`, cluster, ns, cm.Name).Scan(&t1, &t2); err != nil {
		t.Fatal(err)
	}
	// The UI's clock stands 15 minutes after a moment between the two versions.
	then := t1.Add(t2.Sub(t1) / 2).Truncate(time.Microsecond)
	srv := newServer(t, func(o *ui.Options) { o.Now = func() time.Time { return then.Add(15 * time.Minute) } })
	ctx := tab(t, browser)
	rvShown := `Array.from(document.querySelectorAll('#asof thead th')).findIndex(th => th.textContent === 'rv')`
	read := func(path string) (rv, parsed, count, input string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS("#asof"))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rv = run(t, ctx, "the rv", chromedp.Evaluate[string](`(i => Array.from(document.querySelectorAll('#asof tbody tr')).map(tr => tr.cells[i] ? tr.cells[i].textContent : '').join(','))(`+rvShown+`)`))
		parsed = run(t, ctx, "the moment", chromedp.AttributeValue(chromedp.CSS("#asof-parsed"), "datetime")).Value
		count = run(t, ctx, "the count", chromedp.Text(chromedp.CSS("#asof-count")))
		input = run(t, ctx, "the at field", chromedp.Evaluate[string](`document.getElementById('asof-at-input').value`))
		return
	}
	rv, parsed, count, _ := read("/asof?resource=configmaps&ns=" + ns + "&at=15m")
	if rv != rv1 || parsed != then.Format(time.RFC3339Nano) || count != "1 object" {
		t.Errorf("at=15m shows rv %q as of %s (%q), want the first version (rv %s) as of %s", rv, parsed, count, rv1, then.Format(time.RFC3339Nano))
	}
	// The name links the version shown then, on the object's page.
	var id1 string
	if err := pool.QueryRow(testCtx(t), `SELECT id::text FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2 AND name = $3 AND resource_version = $4::bigint`,
		cluster, ns, cm.Name, rv1).Scan(&id1); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#asof tbody a")), chromedp.WaitVisible(chromedp.CSS("article.version"))); err != nil {
		t.Fatal(err)
	}
	if target := run(t, ctx, "the linked version", chromedp.Evaluate[string](`(a => a && a.checkVisibility() ? a.id : "none").call(null, document.querySelector(':target'))`)); target != "v"+id1 {
		t.Errorf("the name as of 15m ago links the version %q, want v%s (rv %s)", target, id1, rv1)
	}
	rv, parsed, _, input := read("/asof?resource=configmaps&ns=" + ns)
	if rv != rv2 || input != "now" || parsed != then.Add(15*time.Minute).Format(time.RFC3339Nano) {
		t.Errorf("without at the page shows rv %q as of %s with at %q, want now: rv %s", rv, parsed, input, rv2)
	}
}

func TestInABrowserTheFaviconIsServedAndTheErrorPageKeepsTheHeader(t *testing.T) {
	browser := chromium(t)
	theWorld(t)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/object?resource=configmaps"), chromedp.WaitVisible(chromedp.CSS("#error"))); err != nil {
		t.Fatal(err)
	}
	if got := run(t, ctx, "the header's cluster", chromedp.Text(chromedp.CSS("header .cluster"))); got != "cluster "+cluster {
		t.Errorf("the error page's header says %q, want cluster %s", got, cluster)
	}
	if n := run(t, ctx, "the As-of link", chromedp.Evaluate[int](`document.querySelectorAll('header nav a[href^="/asof?cluster=`+cluster+`"]').length`)); n != 1 {
		t.Errorf("the error page's header has %d As-of links, want 1", n)
	}
	for _, expr := range []string{`document.querySelector('link[rel="icon"]').href`, `"/favicon.ico"`} {
		got := run(t, ctx, "fetch the icon", chromedp.Evaluate[[]string](`fetch(`+expr+`).then(r => r.text().then(b => [String(r.status), r.headers.get('content-type'), b.slice(0, 4)]))`, chromedp.EvalAwaitPromise))
		if len(got) != 3 || got[0] != "200" || got[1] != "image/svg+xml" || got[2] != "<svg" {
			t.Errorf("the icon at %s: %v, want 200 image/svg+xml <svg…", expr, got)
		}
	}
}

func TestInABrowserTheObjectPageCollapsesOldVersionsAndLinksBackToTheSameRange(t *testing.T) {
	browser := chromium(t)
	ns := namespace(t, "ui-versions")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(testCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Data: map[string]string{"n": "0"}},
		metav1.CreateOptions{FieldManager: "busy-writer"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 7; i++ { // 7 versions
		cm.Data["n"] = strings.Repeat("i", i)
		if cm, err = cms.Update(testCtx(t), cm, metav1.UpdateOptions{FieldManager: "busy-writer"}); err != nil {
			t.Fatal(err)
		}
	}
	recorded(t, "configmaps", ns, cm.Name, cm.ResourceVersion)
	srv := newServer(t, nil)
	ctx := tab(t, browser)
	// The click waits for the chart: drawn, its legend moves the feed down.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?range=6h&tz=Europe/Berlin&ns="+ns), chromedp.WaitVisible(chromedp.CSS("#feed")), chartDrawn,
		chromedp.Click(`//table[@id="feed"]//a[text()="busy"]`, chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS("article.version"))); err != nil {
		t.Fatal(err)
	}
	visible := `Array.from(document.querySelectorAll('article.version')).filter(a => a.checkVisibility()).length`
	if n := run(t, ctx, "the versions shown", chromedp.Evaluate[int](visible)); n != 5 {
		t.Errorf("the object page shows %d of busy's 7 versions before show all, want the newest 5", n)
	}
	if !run(t, ctx, "show all", chromedp.Evaluate[bool](`document.querySelector('#older-versions summary') !== null`)) {
		t.Fatal("the object page of busy's 7 versions has no show all")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#older-versions summary"))); err != nil {
		t.Fatal(err)
	}
	if n := run(t, ctx, "the versions shown", chromedp.Evaluate[int](visible)); n != 7 {
		t.Errorf("after show all the page shows %d versions, want 7", n)
	}
	hint := run(t, ctx, "the field manager's hint", chromedp.AttributeValue(chromedp.CSS("article.version .by"), "title"))
	if by := run(t, ctx, "changed by", chromedp.Text(chromedp.CSS("article.version .by"))); !strings.Contains(by, "busy-writer") || !strings.Contains(by, "field manager") || !strings.Contains(hint.Value, "managedFields") || !strings.Contains(hint.Value, "not the authenticated user") {
		t.Errorf("a version reads %q with the hint %q: want busy-writer marked as the field manager, the hint saying what that is", by, hint.Value)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`main p a[href^="/?"]`)), chromedp.WaitVisible(chromedp.CSS("#feed"))); err != nil {
		t.Fatal(err)
	}
	if cur := run(t, ctx, "the range", chromedp.Text(chromedp.CSS("section.range a.current"))); cur != "6h" {
		t.Errorf("the object's timeline link led to the range %q, want the 6h the feed showed", cur)
	}
	if zone := run(t, ctx, "the zone", chromedp.Text(chromedp.CSS("#tz-name"))); zone != "Europe/Berlin" {
		t.Errorf("the object's timeline link shows times in %q, want the Europe/Berlin the feed showed", zone)
	}
	// A link to an old version (the as-of page's) opens it where it is collapsed.
	var oldest string
	if err := pool.QueryRow(testCtx(t), `SELECT min(id)::text FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2 AND name = 'busy'`, cluster, ns).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/object?resource=configmaps&ns="+ns+"&name=busy#v"+oldest), chromedp.WaitVisible(chromedp.CSS("article.version"))); err != nil {
		t.Fatal(err)
	}
	if target := run(t, ctx, "the linked version", chromedp.Evaluate[string](`(a => a && a.checkVisibility() ? a.id : "none").call(null, document.querySelector(':target'))`)); target != "v"+oldest {
		t.Errorf("a link to busy's first version shows %q, want v%s opened", target, oldest)
	}
}
