package ui_test

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// whyUser and whyAgent are who edits checkout-config: the audit event the test stores
// for the edit, as the audit receiver would.
const (
	whyUser  = "dev-c@example.com"
	whyAgent = "kubectl/v1.36.5 (linux/amd64) kubernetes/0123abc"
)

// The demo's story in the shared servers: dev-c edits the ConfigMap a pod reads, and the
// pod crash-loops (its status written as a kubelet would). From the pod's page, which
// says it is failed, a person follows "what changed before it broke" and reads the
// ConfigMap's edit, who made it with which client, and its diff; the user agent is beside
// the user on the ConfigMap's own page too.
func TestInABrowserBeforeItBrokeNamesTheConfigMapEditItsUserAndClientWithADiff(t *testing.T) {
	browser := chromium(t)
	ns := namespace(t, "ui-why")
	cs := kube.Clientset()
	ctx := testCtx(t)
	cfg, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "checkout-config"},
		Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "checkout"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "checkout"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "checkout-1", Labels: map[string]string{"app": "checkout"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "checkout:1",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cfg.Name}}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An unrelated ConfigMap edited in the same window: not on the page.
	other, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cs.CoreV1().ConfigMaps(ns).Patch(ctx, cfg.Name, types.MergePatchType, []byte(`{"data":{"mode":"broken"}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "checkout:1", RestartCount: 3,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	if pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	recorded(t, "configmaps", ns, cfg.Name, cfg.ResourceVersion)
	recorded(t, "configmaps", ns, other.Name, other.ResourceVersion)
	recorded(t, "services", ns, svc.Name, svc.ResourceVersion)
	recorded(t, "pods", ns, pod.Name, pod.ResourceVersion)
	// dev-c's audit event of the edit, as the receiver stores it (exact: the response's RV).
	execSQL(t, `INSERT INTO kube_cdc.audit_events (audit_id, cluster, verb, api_group, resource, namespace, name,
			response_rv, response_uid, username, user_agent, code, request_at, stage_at)
		SELECT 'ui-why-' || id, cluster, 'patch', api_group, resource, namespace, name, resource_version, uid,
		       '`+whyUser+`', '`+whyAgent+`', 200, observed_at, observed_at
		  FROM kube_cdc.changes WHERE cluster = '`+cluster+`' AND namespace = '`+ns+`' AND name = 'checkout-config' AND op = 'update'`)
	t.Cleanup(func() { execSQL(t, `DELETE FROM kube_cdc.audit_events WHERE audit_id LIKE 'ui-why-%'`) })
	var brokeAt time.Time
	if err := pool.QueryRow(ctx, `SELECT observed_at FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2 AND name = $3 AND resource_version = $4::bigint`,
		cluster, ns, pod.Name, pod.ResourceVersion).Scan(&brokeAt); err != nil {
		t.Fatal(err)
	}

	srv := newServer(t, nil)
	tb := tab(t, browser)
	if err := chromedp.Do(tb, chromedp.EmulateViewport(1280, 860)); err != nil {
		t.Fatal(err)
	}
	// The pod's page says it is broken, and links the page of what changed before.
	if err := chromedp.Do(tb, chromedp.Navigate(srv.URL+"/object?resource=pods&ns="+ns+"&name="+pod.Name), chromedp.WaitVisible(chromedp.CSS("#object-broken"))); err != nil {
		t.Fatal(err)
	}
	if state := run(t, tb, "the pod's health", chromedp.Text(chromedp.CSS("#object-broken .health"))); state != "failed: CrashLoopBackOff: container app, 3 restarts" {
		t.Errorf("the crash-looping pod's page says %q, want failed: CrashLoopBackOff: container app, 3 restarts", state)
	}
	if err := chromedp.Do(tb, chromedp.Click(chromedp.CSS("#why-link")), chromedp.WaitVisible(chromedp.CSS("#why-range"))); err != nil {
		t.Fatal(err)
	}
	loc, err := url.Parse(run(t, tb, "location", chromedp.Location()))
	if err != nil {
		t.Fatal(err)
	}
	if at, err := time.Parse(time.RFC3339Nano, loc.Query().Get("at")); err != nil || !at.Equal(brokeAt) {
		t.Errorf("the link leads to %s: want at the moment the pod turned failed, %s", loc, brokeAt.UTC().Format(time.RFC3339Nano))
	}

	// Each change as drawn: relation, object, op, user, client, field manager.
	type drawn struct {
		Relation, Object, Op, User, Agent, AgentTitle, By string
		Added, Removed                                    []string
		Open                                              bool
	}
	changes := run(t, tb, "the changes", chromedp.Evaluate[[]drawn](`Array.from(document.querySelectorAll('article.why')).map(a => {
		const text = s => { const e = a.querySelector(s); return e ? e.textContent.trim() : '' };
		const agent = a.querySelector('.user .agent');
		return {Relation: text('.relation'), Object: text('a.object'), Op: text('.op'), User: text('.user'),
			Agent: text('.user .agent'), AgentTitle: agent ? agent.title : '', By: text('.by'),
			Added: Array.from(a.querySelectorAll('pre.diff span.add')).filter(s => s.checkVisibility()).map(s => s.textContent),
			Removed: Array.from(a.querySelectorAll('pre.diff span.del')).filter(s => s.checkVisibility()).map(s => s.textContent),
			Open: a.querySelector('details.diff').open};
	})`))
	var edit *drawn
	var seen []string
	for i, c := range changes {
		seen = append(seen, c.Relation+" "+c.Object+" "+c.Op)
		if c.Relation == "configmap" && c.Object == "configmaps "+ns+"/checkout-config" && c.Op == "update" {
			edit = &changes[i]
		}
		if strings.Contains(c.Object, "unrelated") {
			t.Errorf("the page shows %s %s, which the pod does not depend on", c.Object, c.Op)
		}
	}
	all := strings.Join(seen, "\n  ")
	if edit == nil {
		t.Fatalf("before %s broke the page shows\n  %s\nwant the update of configmaps %s/checkout-config", pod.Name, all, ns)
	}
	if !strings.HasPrefix(edit.User, "user "+whyUser) || edit.Agent != "kubectl/v1.36.5" || edit.AgentTitle != "the audit event's user agent: "+whyAgent {
		t.Errorf("the ConfigMap's edit reads %q, client %q (title %q): want user %s beside its client kubectl/v1.36.5, the whole user agent in the title",
			edit.User, edit.Agent, edit.AgentTitle, whyUser)
	}
	if edit.By != "by kubectl-edit/Update (field manager)" {
		t.Errorf("the ConfigMap's edit names the field manager as %q, want kubectl-edit/Update marked as the field manager", edit.By)
	}
	if !edit.Open || strings.Join(edit.Removed, "|") != "-  mode: fast" || strings.Join(edit.Added, "|") != "+  mode: broken" {
		t.Errorf("the ConfigMap's edit shows the diff (open %v) -%q +%q, want -  mode: fast and +  mode: broken", edit.Open, edit.Removed, edit.Added)
	}
	for _, want := range []string{"self pods " + ns + "/" + pod.Name + " update", "service services " + ns + "/checkout create"} {
		if !strings.Contains("\n  "+all+"\n", "\n  "+want+"\n") {
			t.Errorf("before %s broke the page shows\n  %s\nwant %s among them", pod.Name, all, want)
		}
	}
	if h := run(t, tb, "the health", chromedp.Text(chromedp.CSS("#why-health"))); !strings.HasPrefix(h, "failed: CrashLoopBackOff") {
		t.Errorf("the why page says the pod was %q then, want failed: CrashLoopBackOff…", h)
	}
	if size := run(t, tb, "the page's width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); size[0] > size[1] {
		t.Errorf("the why page is %d px wide in a %d px window", size[0], size[1])
	}
	if os.Getenv(screenshotsToDocs) != "" {
		b := run(t, tb, "screenshot", chromedp.CaptureScreenshot())
		dst := filepath.Join(testenv.RepoRoot(), "docs", "img", "why.png")
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("copied %s", dst)
	}

	// The ConfigMap's own page names the client beside the user too.
	if err := chromedp.Do(tb, chromedp.Click(chromedp.CSS(`article.why[data-relation="configmap"] a.object`)), chromedp.WaitVisible(chromedp.CSS("article.version"))); err != nil {
		t.Fatal(err)
	}
	if got := run(t, tb, "the versions' users", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('article.version .user')).map(u => u.textContent.trim().replace(/\s+/g, ' '))`)); len(got) != 1 || got[0] != "user "+whyUser+" kubectl/v1.36.5" {
		t.Errorf("checkout-config's page shows the users %q, want one: user %s kubectl/v1.36.5", got, whyUser)
	}
}

// The feed's rows carry the audit event's user agent beside the user (store.Feed, read
// by the timeline), and nothing where no actor is known.
func TestTheFeedReadsTheAuditUserAgentBesideTheUser(t *testing.T) {
	w := theWorld(t)
	withActors(t)
	fp, err := st.Feed(testCtx(t), store.Filter{Cluster: cluster, From: time.Now().Add(-24 * time.Hour), Namespace: w.ns, Actors: true}, 50)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range fp.Rows {
		if r.Name == w.appID || r.Name == "parent" {
			got = append(got, r.Name+" "+r.Op+" "+r.User+" "+r.UserAgent)
		}
	}
	want := []string{"parent create  ", "app-config update alice@example.com kubectl/v1.36.5", "app-config create alice@example.com kubectl/v1.36.5"}
	if !slices.Equal(got, want) {
		t.Errorf("the feed of %s reads\n  %q\nwant\n  %q", w.ns, got, want)
	}
	// The timeline shows the client beside the user (the whole user agent as its title).
	_, body := get(t, newServer(t, nil), "/?ns="+w.ns+"&name=="+w.appID)
	rows := feedRows(t, body)
	if len(rows) != 2 {
		t.Errorf("the timeline of %s's exact name shows %d rows, want its 2 versions", w.appID, len(rows))
	}
	for _, r := range rows {
		if r.user != "alice@example.com" || r.client != "kubectl/v1.36.5" {
			t.Errorf("the timeline's row %+v: want user alice@example.com, client kubectl/v1.36.5", r)
		}
	}
}

// Without an object the why page is its form (the header's link); a missing name, a
// moment or a window it cannot read is a 400 that says which parameter and what it wants.
func TestTheWhyPageAsksForAnObjectAndRefusesAMomentOrWindowItCannotRead(t *testing.T) {
	srv := newServer(t, nil)
	if code, body := get(t, srv, "/why"); code != 200 || !strings.Contains(body, `id="why-form"`) || strings.Contains(body, `id="why-range"`) {
		t.Errorf("/why: %d, want 200 with the form alone\n%s", code, body)
	}
	if _, body := get(t, srv, "/"); !strings.Contains(body, `<a href="/why?cluster=`+cluster+`"`) {
		t.Error("the header does not link the why page")
	}
	for path, want := range map[string]string{
		"/why?resource=pods":                                 "resource and name are required",
		"/why?resource=pods&ns=a&name=b&at=yesterday":        "at &#34;yesterday&#34;: want an RFC 3339 time",
		"/why?resource=pods&ns=a&name=b&window=-5m":          "window &#34;-5m&#34;: want a positive duration",
		"/why?resource=pods&ns=a&name=b&window=half+an+hour": "window &#34;half an hour&#34;: want a positive duration",
	} {
		if code, body := get(t, srv, path); code != 400 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 400 saying %q\n%s", path, code, want, body)
		}
	}
	if code, body := get(t, srv, "/why?resource=pods&ns=nowhere&name=nothing&window=2h"); code != 200 || !strings.Contains(body, `id="why-none"`) || !strings.Contains(body, `value="2h"`) {
		t.Errorf("why of an object the sink does not hold: %d, want 200 saying nothing changed, the window kept\n%s", code, body)
	}
}
