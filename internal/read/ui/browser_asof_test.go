package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kube-cdc/kube-cdc/internal/read/ui"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// rollout is the checkout Deployment of a namespace caught mid-rollout: three pods of
// v1 ready on node-a, one of v2 whose container is being created on node-b; then the
// rollout goes on (the v2 pod ready, one v1 pod gone).
type rollout struct {
	ns      string
	mid     time.Time            // a moment when the rollout was half way
	created map[string]time.Time // each pod's creationTimestamp
}

func podOf(name, image, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "checkout"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: image}}}}
}

func running(p *corev1.Pod, restarts int32) {
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: p.Spec.Containers[0].Image, Ready: true, RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
}

// writeRollout writes the rollout through the apiserver (statuses as kubelets and the
// deployment controller would write them) and waits until the daemon recorded it.
func writeRollout(t *testing.T) rollout {
	t.Helper()
	ctx := testCtx(t)
	r := rollout{ns: namespace(t, "ui-rollout"), created: map[string]time.Time{}}
	pods := kube.Clientset().CoreV1().Pods(r.ns)
	deps := kube.Clientset().AppsV1().Deployments(r.ns)
	three := int32(3)
	dep, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "checkout"},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "checkout"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "shop/checkout:v1"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(replicas, updated, ready, available int32) {
		t.Helper()
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: available}
		if dep, err = deps.UpdateStatus(ctx, dep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(p *corev1.Pod, status func(*corev1.Pod)) *corev1.Pod {
		t.Helper()
		p, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status(p)
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.created[p.Name] = p.CreationTimestamp.Time
		return p
	}
	for i, name := range []string{"checkout-v1-a", "checkout-v1-b", "checkout-v1-c"} {
		create(podOf(name, "shop/checkout:v1", "node-a"), func(p *corev1.Pod) { running(p, int32(i)) })
	}
	setStatus(3, 3, 3, 3)
	// The rollout starts: v2 in the template, one new pod creating.
	dep.Spec.Template.Spec.Containers[0].Image = "shop/checkout:v2"
	if dep, err = deps.Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setStatus(4, 1, 3, 3)
	creating := create(podOf("checkout-v2-a", "shop/checkout:v2", "node-b"), func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "shop/checkout:v2",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	})
	recorded(t, "pods", r.ns, creating.Name, creating.ResourceVersion)
	recorded(t, "deployments", r.ns, dep.Name, dep.ResourceVersion)
	if err := pool.QueryRow(ctx, `SELECT max(observed_at) FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2`, cluster, r.ns).Scan(&r.mid); err != nil {
		t.Fatal(err)
	}
	// Later: the v2 pod ready, a v1 pod gone.
	running(creating, 0)
	if creating, err = pods.UpdateStatus(ctx, creating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "checkout-v1-c", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	recorded(t, "pods", r.ns, creating.Name, creating.ResourceVersion)
	waitDeleted(t, r.ns, "checkout-v1-c")
	return r
}

// asOfTable is a JavaScript expression: the as-of table's headers, then each row's cells.
const asOfTable = `[Array.from(document.querySelectorAll('#asof thead th')).map(th => th.textContent.trim())].concat(
	Array.from(document.querySelectorAll('#asof tbody tr')).map(tr => Array.from(tr.cells).map(td => td.textContent.trim())))`

func TestInABrowserTheAsOfPageShowsThePodsOfARolloutAsKubectlGetDidThen(t *testing.T) {
	browser := chromium(t)
	r := writeRollout(t)
	// The UI's clock stands 3 hours after the moment: "3h" ago is mid-rollout, and an AGE
	// counted from now would read 3h.
	srv := newServer(t, func(o *ui.Options) { o.Now = func() time.Time { return r.mid.Add(3 * time.Hour) } })
	ctx := tab(t, browser)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(srv.URL+"/asof?resource=po&ns="+r.ns+"&at=3h"),
		chromedp.WaitVisible(chromedp.CSS("#asof"))); err != nil {
		t.Fatal(err)
	}
	table := run(t, ctx, "the as-of table", chromedp.Evaluate[[][]string](asOfTable))
	wantHead := []string{"name", "ready", "status", "restarts", "age", "node", "image", "rv"}
	if !slices.Equal(table[0], wantHead) {
		t.Fatalf("the pods table's columns are %v, want %v", table[0], wantHead)
	}
	want := map[string][]string{
		"checkout-v1-a": {"1/1", "Running", "0", "", "node-a", "shop/checkout:v1"},
		"checkout-v1-b": {"1/1", "Running", "1", "", "node-a", "shop/checkout:v1"},
		"checkout-v1-c": {"1/1", "Running", "2", "", "node-a", "shop/checkout:v1"},
		"checkout-v2-a": {"0/1", "ContainerCreating", "0", "", "node-b", "shop/checkout:v2"},
	}
	if len(table)-1 != len(want) {
		t.Errorf("mid-rollout the table has %d pods, want %d: %v", len(table)-1, len(want), table[1:])
	}
	for _, row := range table[1:] {
		w, ok := want[row[0]]
		if !ok {
			t.Errorf("mid-rollout the table shows %v, not a pod then", row)
			continue
		}
		w[3] = duration.HumanDuration(r.mid.Sub(r.created[row[0]])) // the age at that moment
		if got := row[1:7]; !slices.Equal(got, w) {
			t.Errorf("%s reads %v, want %v", row[0], got, w)
		}
	}
	if count := run(t, ctx, "the count", chromedp.Text(chromedp.CSS("#asof-count"))); count != "4 objects" {
		t.Errorf("the row count reads %q, want 4 objects", count)
	}
	colours := run(t, ctx, "the rows' health", chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('#asof tbody tr')).map(tr => [tr.dataset.name, tr.className]))`))
	if colours["checkout-v1-a"] != "health-ok" || colours["checkout-v2-a"] != "health-progressing" {
		t.Errorf("the rows are coloured %v, want the ready pods ok and the creating one progressing", colours)
	}
	if os.Getenv(screenshotsToDocs) != "" {
		shot := run(t, ctx, "a screenshot", chromedp.CaptureScreenshot())
		dst := filepath.Join(testenv.RepoRoot(), "docs", "img", "ui-asof.png")
		if err := os.WriteFile(dst, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("copied %s", dst)
	}
	// The deployment then, typed as its kind.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/asof?resource=Deployment&ns="+r.ns+"&at=3h"), chromedp.WaitVisible(chromedp.CSS("#asof"))); err != nil {
		t.Fatal(err)
	}
	table = run(t, ctx, "the deployments table", chromedp.Evaluate[[][]string](asOfTable))
	if len(table) != 2 || !slices.Equal(table[0][:5], []string{"name", "ready", "up-to-date", "available", "age"}) || !slices.Equal(table[1][:4], []string{"checkout", "3/3", "1", "3"}) {
		t.Errorf("the deployment mid-rollout reads %v, want checkout 3/3 ready, 1 up to date, 3 available", table)
	}
	// Now (the daemon's clock): three pods, the new one running.
	now := newServer(t, nil)
	if err := chromedp.Do(ctx, chromedp.Navigate(now.URL+"/asof?resource=pods&ns="+r.ns), chromedp.WaitVisible(chromedp.CSS("#asof"))); err != nil {
		t.Fatal(err)
	}
	table = run(t, ctx, "the pods table now", chromedp.Evaluate[[][]string](asOfTable))
	var rows []string
	for _, row := range table[1:] {
		rows = append(rows, row[0]+" "+row[2])
	}
	if strings.Join(rows, ", ") != "checkout-v1-a Running, checkout-v1-b Running, checkout-v2-a Running" {
		t.Errorf("now the pods read %v, want v1-a, v1-b and v2-a running", rows)
	}
}

// feedNamesShown is a JavaScript expression: the names in the feed, top to bottom.
var feedNamesShown = rowTexts(4)

func TestInABrowserTheFeedFindsAPartOfANameSaysWhatItsFiltersExcludedAndPagesBothWays(t *testing.T) {
	browser := chromium(t)
	ns := namespace(t, "ui-filters")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	var last *corev1.ConfigMap
	for _, name := range []string{"checkout-config", "frontend", "checkout-web", "cart", "payments", "db", "search"} {
		cm, err := cms.Create(testCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm
	}
	recorded(t, "configmaps", ns, last.Name, last.ResourceVersion)
	srv := newServer(t, func(o *ui.Options) { o.PageSize = 3 })
	ctx := tab(t, browser)
	// A person types a part of the name into the filter.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?range=1h&ns="+ns), chromedp.WaitVisible(chromedp.CSS("#feed")),
		chromedp.SendKeys(chromedp.CSS("#f-name"), "checkout"), chromedp.Click(chromedp.CSS("#f-apply")),
		chromedp.WaitVisible(chromedp.CSS(`#f-name[value="checkout"]`))); err != nil {
		t.Fatal(err)
	}
	if got := run(t, ctx, "the names", chromedp.Evaluate[[]string](feedNamesShown)); !slices.Equal(got, []string{"checkout-web", "checkout-config"}) {
		t.Errorf("name=checkout shows %v, want checkout-web and checkout-config", got)
	}
	// A filter that excludes everything says so, with the range's count.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?range=1h&ns="+ns+"&name=nothing-is-called-this"), chromedp.WaitVisible(chromedp.CSS("#feed-empty"))); err != nil {
		t.Fatal(err)
	}
	msg := run(t, ctx, "the message", chromedp.Text(chromedp.CSS("#feed-empty")))
	var n int
	if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM kube_cdc.changes WHERE cluster = $1 AND observed_at >= now() - interval '1 hour'`, cluster).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var shown int
	if _, err := fmt.Sscanf(msg, "The filters excluded all %d changes of this range.", &shown); err != nil || shown < 7 || shown > n {
		t.Errorf("the empty feed says %q, want the filters excluded all N changes of the range (N between 7 and %d)", msg, n)
	}
	// Paging: older twice, then newer returns to each page before.
	page := func() []string { return run(t, ctx, "the page", chromedp.Evaluate[[]string](feedNamesShown)) }
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?range=1h&ns="+ns), chromedp.WaitVisible(chromedp.CSS("#feed"))); err != nil {
		t.Fatal(err)
	}
	p1 := page()
	if run(t, ctx, "a newer link on the newest page", chromedp.Evaluate[bool](`document.getElementById('newer') !== null`)) {
		t.Error("the newest page offers a newer page")
	}
	click := func(id string) []string {
		t.Helper()
		before := run(t, ctx, "the page's address", chromedp.Evaluate[string](`location.href`))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#"+id), chromedp.NodeVisible)); err != nil {
			t.Fatalf("click %s: %v", id, err)
		}
		// The click navigates: wait for the next page to have loaded, not for the old
		// page's #feed (which a busy machine still shows for a while after the click).
		eventually(t, "the page after clicking "+id, func(context.Context) bool {
			loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.href !== `+strconv.Quote(before)+
				` && document.readyState === 'complete' && document.getElementById('feed') !== null`))
			return err == nil && loaded
		})
		return page()
	}
	p2 := click("older")
	p3 := click("older")
	if slices.Equal(p1, p2) || slices.Equal(p2, p3) || len(p3) != 1 {
		t.Fatalf("older pages: %v, %v, %v; want three different pages of 3, 3 and 1", p1, p2, p3)
	}
	if back := click("newer"); !slices.Equal(back, p2) {
		t.Errorf("newer from the third page shows %v, want the second %v", back, p2)
	}
	if back := click("newer"); !slices.Equal(back, p1) {
		t.Errorf("newer from the second page shows %v, want the first %v", back, p1)
	}
}
