package ui_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// screenshotsToDocs, set to any value, makes the browser test copy its timeline and
// object screenshots into docs/img/ (docs/reading.md's pictures).
const screenshotsToDocs = "KUBE_CDC_UI_SCREENSHOTS_TO_DOCS"

// chromium finds a Chromium or Chrome binary; the test fails, saying how to install
// one, when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBE_CDC_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the browser test needs headless Chromium, and none is on PATH: install it with " +
		"`apt-get update && apt-get install -y chromium` (Debian's package; .ci/run does this), " +
		"or point KUBE_CDC_CHROMIUM at a Chromium or Chrome binary")
	return ""
}

// The package's browser tests share one headless Chromium (started by the first, closed
// by TestMain), each in a tab of its own.
var sharedBrowser struct {
	sync.Mutex
	ctx    context.Context // the browser's; a tab is a chromedp context derived from it
	cancel func()
}

// tab opens a tab of the shared browser, closed when the test ends; its actions fail
// after 2 minutes.
func tab(t *testing.T, browser string) context.Context {
	t.Helper()
	sharedBrowser.Lock()
	defer sharedBrowser.Unlock()
	if sharedBrowser.ctx == nil {
		opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(browser),
			chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 900))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil { // starts the browser, which lives as long as bctx
			cancelBrowser()
			cancelAlloc()
			t.Fatalf("start %s: %v", browser, err)
		}
		sharedBrowser.ctx, sharedBrowser.cancel = bctx, func() { cancelBrowser(); cancelAlloc() }
	}
	tctx, cancelTab := chromedp.NewContext(sharedBrowser.ctx)
	ctx, cancel := context.WithTimeout(tctx, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab() })
	return ctx
}

// closeBrowser stops the shared browser, if a test started it.
func closeBrowser() {
	sharedBrowser.Lock()
	defer sharedBrowser.Unlock()
	if sharedBrowser.cancel != nil {
		sharedBrowser.cancel()
		sharedBrowser.ctx, sharedBrowser.cancel = nil, nil
	}
}

// rowTexts is a JavaScript expression: the feed's cells in column col, one per row.
func rowTexts(col int) string {
	return `Array.from(document.querySelectorAll('#feed tbody tr[data-id]')).map(tr => tr.cells[` + string(rune('0'+col)) + `].textContent.trim())`
}

// One headless Chromium over the UI served in-process: what a person does during an
// incident, page by page, with a screenshot of each. The owners link is followed on the
// owners view of migration 013.
func TestInABrowserTheTimelineFiltersObjectsOwnersAndSharedLinksWork(t *testing.T) {
	browser := chromium(t)
	w := theWorld(t)
	withActors(t)
	srv := newServer(t, nil)
	shots, err := os.MkdirTemp("", "kube-cdc-ui-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of every page: %s", shots)
	shot := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(shots, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx := tab(t, browser)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("size the window as the screenshots were taken", chromedp.EmulateViewport(1280, 860))
	strs := func(what, expr string) []string {
		t.Helper()
		return run(t, ctx, what, chromedp.Evaluate[[]string](expr))
	}
	noScript := func(where string) {
		t.Helper()
		if ran := run(t, ctx, "check for scripts", chromedp.Evaluate[bool](`window.__xss !== undefined`)); ran {
			t.Errorf("a script from the cluster's data ran on %s", where)
		}
	}
	screenshot := func(name string) { t.Helper(); shot(name, run(t, ctx, "screenshot", chromedp.CaptureScreenshot())) }

	// The timeline, then a change made now appears after a reload.
	ns := namespace(t, "ui-browser")
	do("load the timeline", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#feed")),
		chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`)))
	cm, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(testCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "made-during-the-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded(t, "configmaps", ns, cm.Name, cm.ResourceVersion)
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#feed")), chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`)))
	if texts := strs("the feed's names", rowTexts(4)); !slices.Contains(texts, cm.Name) {
		t.Errorf("after a reload the feed shows %v, not %s", texts, cm.Name)
	}
	screenshot("timeline")

	// Filter by namespace, then by resource, through the form.
	// Each filtered page is waited on until its chart is drawn: the chart sits above the
	// form and its legend grows it, so a click on the form before it is drawn can land
	// where the button was (CI once hung on the next step's page).
	do("filter by namespace", chromedp.SetValue(chromedp.CSS("#f-ns"), w.ns), chromedp.Click(chromedp.CSS("#f-apply")),
		chromedp.WaitVisible(chromedp.CSS(`#f-ns[value="`+w.ns+`"]`)), chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`)))
	if texts := strs("the feed's namespaces", rowTexts(3)); len(texts) == 0 || slices.ContainsFunc(texts, func(s string) bool { return s != w.ns }) {
		t.Errorf("filtered by namespace %s, the feed's namespaces are %v", w.ns, texts)
	}
	do("filter by resource", chromedp.SetValue(chromedp.CSS("#f-resource"), "secrets"), chromedp.Click(chromedp.CSS("#f-apply")),
		chromedp.WaitReady(chromedp.CSS(`#f-resource option[value="secrets"][selected]`)), chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`)))
	if texts := strs("the feed's resources", rowTexts(2)); !slices.Equal(texts, []string{"secrets"}) {
		t.Errorf("filtered by resource secrets, the feed's resources are %v", texts)
	}
	if location := run(t, ctx, "location", chromedp.Location()); !strings.Contains(location, "ns="+w.ns) || !strings.Contains(location, "resource=secrets") {
		t.Errorf("the filters are not in the URL: %s", location)
	}
	do("the whole namespace again", chromedp.SetValue(chromedp.CSS("#f-resource"), ""), chromedp.Click(chromedp.CSS("#f-apply")),
		chromedp.WaitReady(chromedp.CSS(`#f-resource option[value=""][selected]`)), chromedp.WaitVisible(chromedp.CSS(`#chart[data-drawn="true"] canvas`)))
	noScript("the timeline")
	screenshot("timeline-filtered")

	// Zoom: dragging across the last tenth of the chart shows that range, filters kept.
	box := run(t, ctx, "the chart's area", chromedp.Evaluate[[]float64](`(r => [r.left, r.top, r.width, r.height])(document.querySelector('#chart .u-over').getBoundingClientRect())`))
	y := box[1] + box[3]/2
	x1, x2 := box[0]+box[2]*0.9, box[0]+box[2]-2
	do("drag across the chart", chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x1, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (x1+x2)/2, y, chromedp.ButtonLeft), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x2, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x2, y, chromedp.ButtonLeft),
		chromedp.WaitReady(chromedp.CSS(`section.range:not(:has(a.current)) #permalink`)), chromedp.WaitVisible(chromedp.CSS("#feed")))
	zoomed, err := url.Parse(run(t, ctx, "location", chromedp.Location()))
	if err != nil {
		t.Fatal(err)
	}
	from, errFrom := time.Parse(time.RFC3339, zoomed.Query().Get("from"))
	to, errTo := time.Parse(time.RFC3339, zoomed.Query().Get("to"))
	if errFrom != nil || errTo != nil || zoomed.Query().Get("ns") != w.ns || to.Sub(from) > 10*time.Minute || !to.After(time.Now().Add(-2*time.Minute)) {
		t.Errorf("dragging across the last tenth of the hour led to %s, want from/to spanning about 6 minutes up to now, with ns=%s", zoomed, w.ns)
	}
	if texts := strs("the zoomed feed's names", rowTexts(4)); !slices.Contains(texts, w.appID) {
		t.Errorf("the zoomed range shows %v, want the namespace's recent changes", texts)
	}

	// Share: the link to this view shows the same rows in a fresh tab.
	permalink := run(t, ctx, "read the permalink", chromedp.AttributeValue(chromedp.CSS("#permalink"), "href")).Value
	before := strs("the feed's names", rowTexts(4))
	tab, cancelTab := chromedp.NewContext(ctx)
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+permalink), chromedp.WaitVisible(chromedp.CSS("#feed"))); err != nil {
		t.Fatalf("open the shared link: %v", err)
	}
	after := run(t, tab, "the shared view's names", chromedp.Evaluate[[]string](rowTexts(4)))
	cancelTab()
	if len(before) == 0 || !slices.Equal(before, after) {
		t.Errorf("the shared link %s shows %v, the view showed %v", permalink, after, before)
	}

	// Open an object: its diff has the changed line, highlighted.
	do("open app-config", chromedp.Click(`//table[@id="feed"]//a[text()="app-config"]`), chromedp.WaitVisible(chromedp.CSS("article.version")))
	if added := strs("the added lines", `Array.from(document.querySelectorAll('pre.diff span.add')).map(s => s.textContent)`); !slices.Contains(added, "+  color: blue") {
		t.Errorf("the object page's added lines are %q, want the changed line +  color: blue", added)
	}
	if bg := run(t, ctx, "the added line's background", chromedp.Evaluate[string](`getComputedStyle(document.querySelector('pre.diff span.add')).backgroundColor`)); bg == "" || bg == "rgba(0, 0, 0, 0)" {
		t.Error("the added line is not highlighted")
	}
	screenshot("object")

	// Follow the owner link from the child to its parent.
	do("child then its owner", chromedp.Navigate(srv.URL+"/object?resource=configmaps&ns="+w.ns+"&name=child"),
		chromedp.WaitVisible(chromedp.CSS("a.owner")), chromedp.Click(chromedp.CSS("a.owner")), chromedp.WaitVisible(chromedp.CSS("#children a.child")))
	if title := run(t, ctx, "the title", chromedp.Text(chromedp.CSS("#object-title"))); !strings.Contains(title, "parent") {
		t.Errorf("the owner link led to %q, want parent", title)
	}
	screenshot("owner")

	// The ConfigMap holding markup: shown as text, and nothing ran.
	do("the xss object", chromedp.Navigate(srv.URL+"/object?resource=configmaps&ns="+w.ns+"&name="+w.xssName), chromedp.WaitVisible(chromedp.CSS("article.version")))
	noScript("the object page")
	if diff := run(t, ctx, "the diff", chromedp.Text(chromedp.CSS("pre.diff"))); !strings.Contains(diff, "<script>window.__xss=1</script>") {
		t.Errorf("the markup is not shown as text: %q", diff)
	}
	do("as of now", chromedp.Navigate(srv.URL+"/asof?resource=configmaps&ns="+w.ns+"&at="+time.Now().UTC().Format(time.RFC3339Nano)),
		chromedp.WaitVisible(chromedp.CSS("#asof")))
	noScript("the as-of page")
	screenshot("asof")
	do("status", chromedp.Navigate(srv.URL+"/status"), chromedp.WaitVisible(chromedp.CSS("#status-table")))
	screenshot("status")

	if os.Getenv(screenshotsToDocs) != "" {
		for _, name := range []string{"timeline-filtered", "object"} {
			b, err := os.ReadFile(filepath.Join(shots, name+".png"))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(testenv.RepoRoot(), "docs", "img", "ui-"+name+".png")
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("copied %s", dst)
		}
	}
}

// run runs one action in the browser, failing the test on an error.
func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}
