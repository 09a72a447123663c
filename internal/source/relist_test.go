package source_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func TestRelistPagesThroughEveryObjectOnceAtTheFirstPagesResourceVersion(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	var want []string
	var maxRV change.RV
	for i := range 7 {
		cm := e.configMap("", fmt.Sprintf("cm-%d", i), nil)
		want = append(want, cm.Name)
		maxRV = max(maxRV, parseRV(t, cm.ResourceVersion))
	}
	s := e.stream(e.configMaps())
	s.PageSize = 2

	// Hold the stream on its first Listed event, between the first and second pages, and
	// create an object then: pages are read at the first page's RV, so the relist must not
	// list it; the watch from the relist's RV delivers it instead.
	release := make(chan struct{})
	var once sync.Once
	r := e.run(s, 0, &recorder{onEmit: func(ev change.Event) {
		if ev.Type == change.Listed {
			once.Do(func() { <-release })
		}
	}})
	r.waitFor(e, "the first listed object", func(evs []change.Event) bool { return count(evs, change.Listed) > 0 })
	late := e.configMap("", "late", nil)
	close(release)

	evs := r.waitFor(e, "the late object from the watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "late") })
	if evs[0].Type != change.RelistBegin {
		t.Errorf("first event %s, want relist-begin", evs[0].Type)
	}
	if got := count(evs, change.RelistBegin); got != 1 {
		t.Errorf("%d relists, want 1: %s", got, describe(evs))
	}
	listed := names(evs, change.Listed)
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("listed %q, want each of %q once", listed, want)
	}
	end, _ := last(evs, change.RelistEnd)
	if lateRV := parseRV(t, late.ResourceVersion); end.RV < maxRV || end.RV >= lateRV {
		t.Errorf("relist ended at RV %d, want the first page's RV: at least %d (the newest listed object), below %d (created after the first page)", end.RV, maxRV, lateRV)
	}
	for _, ev := range evs {
		if ev.Type == change.Listed && (!ev.Change.Snapshot || ev.Change.RV == 0 || ev.Change.UID == "") {
			t.Errorf("listed %s: snapshot %v, RV %d, UID %q; want a snapshot with RV and UID", ev.Change.Key, ev.Change.Snapshot, ev.Change.RV, ev.Change.UID)
		}
	}
	if got := names(evs, change.Changed); !slices.Equal(got, []string{"late"}) {
		t.Errorf("watch delivered %q, want just the late object", got)
	}

	// The server really paged: four LISTs of at most two, the later three continuing the
	// first; then one watch from the relist's RV.
	lists := e.requests.lists("configmaps")
	if len(lists) != 4 {
		t.Fatalf("%d LIST requests, want 4 pages of 2 for 7 objects", len(lists))
	}
	for i, l := range lists {
		if l.Query.Get("limit") != "2" || (l.Query.Get("continue") != "") != (i > 0) || l.Status() != 200 {
			t.Errorf("LIST %d: limit %q, continue %q, status %d; want limit 2, a continue token on all but the first, 200",
				i, l.Query.Get("limit"), l.Query.Get("continue"), l.Status())
		}
	}
	if w := e.requests.watches("configmaps"); len(w) == 0 || w[0].Query.Get("resourceVersion") != end.RV.String() {
		t.Errorf("no watch from the relist's RV %d first", end.RV)
	}
}

func TestALabelSelectorFiltersTheRelistAndTheWatch(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	x, y := map[string]string{"team": "x"}, map[string]string{"team": "y"}
	e.configMap("", "a", x)
	e.configMap("", "b", y)
	e.configMap("", "c", x)
	e.configMap("", "d", nil)
	s := e.stream(e.target(source.Spec{Name: "configmaps", Namespaces: []string{e.ns}, LabelSelector: "team=x"}))
	r := e.run(s, 0, nil)

	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := names(evs, change.Listed); !sameSet(got, []string{"a", "c"}) {
		t.Errorf("listed %q, want a and c (team=x)", got)
	}
	// The watch delivers changes in RV order, so once a's update (made last) is here, any
	// of the others that passed the selector would be too.
	e.touch("", "b", "1")
	e.touch("", "d", "1")
	e.touch("", "c", "1")
	e.configMap("", "e", y)
	e.touch("", "a", "1")
	evs = r.waitFor(e, "a's update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "a") })
	if got := names(evs, change.Changed); !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf("watch delivered %q, want c then a (team=x)", got)
	}
	for _, l := range e.requests.matching(func(r *request) bool { return r.isList("configmaps") || r.isWatch("configmaps") }) {
		if l.Query.Get("labelSelector") != "team=x" {
			t.Errorf("%s %s?%s without the label selector", l.Method, l.Path, l.Query.Encode())
		}
	}
}

func TestAFieldSelectorFiltersTheRelistAndTheWatch(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	for _, n := range []string{"a", "b", "c"} {
		e.configMap("", n, nil)
	}
	s := e.stream(e.target(source.Spec{Name: "configmaps", Namespaces: []string{e.ns}, FieldSelector: "metadata.name=b"}))
	r := e.run(s, 0, nil)

	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := names(evs, change.Listed); !slices.Equal(got, []string{"b"}) {
		t.Errorf("listed %q, want just b", got)
	}
	e.touch("", "a", "1")
	e.touch("", "c", "1")
	e.touch("", "b", "1")
	evs = r.waitFor(e, "b's update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "b") })
	if got := names(evs, change.Changed); !slices.Equal(got, []string{"b"}) {
		t.Errorf("watch delivered %q, want just b", got)
	}
}

func TestOneNamespaceIsReadThroughItsOwnPathAndSeesNothingElse(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	other := e.namespace()
	e.configMap("", "mine", nil)
	e.configMap(other, "theirs", nil)
	r := e.run(e.stream(e.configMaps()), 0, nil)

	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := keys(evs, change.Listed); !slices.Equal(got, []string{e.ns + "/mine"}) {
		t.Errorf("listed %q, want only %s/mine", got, e.ns)
	}
	e.touch(other, "theirs", "1")
	e.touch("", "mine", "1")
	evs = r.waitFor(e, "mine's update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "mine") })
	if got := keys(evs, change.Changed); !slices.Equal(got, []string{e.ns + "/mine"}) {
		t.Errorf("watch delivered %q, want only %s/mine", got, e.ns)
	}
	// Through the namespaced path, so a Role in that namespace suffices.
	path := "/api/v1/namespaces/" + e.ns + "/configmaps"
	for _, l := range e.requests.matching(func(r *request) bool { return r.isList("configmaps") || r.isWatch("configmaps") }) {
		if l.Path != path {
			t.Errorf("request to %s, want %s", l.Path, path)
		}
	}
}

// Several namespaces resolve to one target per namespace, each read through its own
// namespaced path with its own scope (so its own checkpoint): RoleBindings in those
// namespaces suffice, and a namespace outside them is never read.
func TestSeveralNamespacesBecomeOneNamespacedTargetEach(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	second, outside := e.namespace(), e.namespace()
	e.configMap("", "one", nil)
	e.configMap(second, "two", nil)
	e.configMap(outside, "out", nil)
	targets, err := source.Resolve(e.clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: []string{e.ns, second, e.ns}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 2 || !slices.Equal(targets[0].Namespaces, []string{e.ns}) || !slices.Equal(targets[1].Namespaces, []string{second}) ||
		targets[0].Resource.Scope == targets[1].Resource.Scope || targets[0].Resource.Scope == "" {
		t.Fatalf("targets %+v, want one per namespace with distinct scopes", targets)
	}
	if single := e.configMaps(); single.Resource.Scope != targets[0].Resource.Scope {
		t.Errorf("the target of namespace %s has scope %q, but configured alone %q: its checkpoints would be lost", e.ns, targets[0].Resource.Scope, single.Resource.Scope)
	}
	for i, tg := range targets {
		ns, name := []string{e.ns, second}[i], []string{"one", "two"}[i]
		r := e.run(e.stream(tg), 0, nil)
		evs := r.waitFor(e, "the relist of "+ns, relistEnded(1))
		if got := keys(evs, change.Listed); !slices.Equal(got, []string{ns + "/" + name}) {
			t.Errorf("target %d listed %q, want only %s/%s", i, got, ns, name)
		}
	}
	for _, l := range e.requests.matching(func(r *request) bool { return r.isList("configmaps") || r.isWatch("configmaps") }) {
		if l.Path != "/api/v1/namespaces/"+e.ns+"/configmaps" && l.Path != "/api/v1/namespaces/"+second+"/configmaps" {
			t.Errorf("request to %s, want only the two namespaced paths", l.Path)
		}
	}
}

// relistHeldAtFirstObject relists three podtemplates one per page, and holds the emit
// of the first listed object until release is closed. podtemplates are read from etcd
// (no watch cache), so compacting etcd expires a continue token without restarting the
// apiserver.
func relistHeldAtFirstObject(t *testing.T) (e *env, r *recorder, release chan struct{}, want []string) {
	e = newEnv(t, 30*time.Second)
	want = []string{"p0", "p1", "p2"}
	for _, n := range want {
		e.podTemplate(n)
	}
	s := e.stream(e.target(source.Spec{Name: "podtemplates", Namespaces: []string{e.ns}}))
	s.PageSize = 1
	release = make(chan struct{})
	var once sync.Once
	r = e.run(s, 0, &recorder{onEmit: func(ev change.Event) {
		if ev.Type == change.Listed {
			once.Do(func() { <-release })
		}
	}})
	return e, r, release, want
}

func TestAContinueTokenThatExpiresMidListStartsTheRelistOverAndLosesNothing(t *testing.T) {
	e, r, release, want := relistHeldAtFirstObject(t)
	r.waitFor(e, "the first page", func(evs []change.Event) bool { return count(evs, change.Listed) > 0 })
	if _, err := e.kube.CompactEtcd(e.ctx); err != nil {
		t.Fatal(err)
	}
	close(release)

	evs := r.waitFor(e, "a complete relist", relistEnded(1))
	if got := count(evs, change.RelistBegin); got != 2 {
		t.Fatalf("%d relist-begin events, want 2 (the expired one, then the one that completed): %s", got, describe(evs))
	}
	// Everything after the second RelistBegin is one whole relist.
	second := slices.IndexFunc(evs[1:], func(ev change.Event) bool { return ev.Type == change.RelistBegin }) + 1
	if got := names(evs[second:], change.Listed); !sameSet(got, want) {
		t.Errorf("the restarted relist listed %q, want each of %q once", got, want)
	}
	// The page after the first is asked for while the first is emitted, before the
	// compaction: the expiry cuts the relist at the second or third page.
	if got := count(evs[:second], change.Listed); got < 1 || got >= len(want) {
		t.Errorf("the expired relist listed %d objects, want some but not all %d", got, len(want))
	}
	// What the server said to the second page.
	var expired bool
	for _, l := range e.requests.lists("podtemplates") {
		expired = expired || (l.Query.Get("continue") != "" && l.Status() == 410)
	}
	if !expired {
		t.Errorf("no LIST with a continue token was answered 410 Gone; the test no longer expires the token")
	}
}

func TestAPagedRelistAsksForTheNextPageWhileItEmitsTheCurrentOne(t *testing.T) {
	e, r, release, want := relistHeldAtFirstObject(t)
	// The first page's object is held in emit: the second page must be asked for anyway
	// (the apiserver serves it while the first is processed).
	deadline := time.Now().Add(20 * time.Second)
	for {
		var cont int
		for _, l := range e.requests.lists("podtemplates") {
			if l.Query.Get("continue") != "" {
				cont++
			}
		}
		if cont > 0 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("no LIST of the second page while the first page's object was being emitted: the pages are read one after another")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := names(evs, change.Listed); !sameSet(got, want) {
		t.Errorf("the relist listed %q, want each of %q once", got, want)
	}
}

// podTemplate creates a podtemplate in the test's namespace.
func (e *env) podTemplate(name string) *corev1.PodTemplate {
	e.t.Helper()
	pt, err := e.kube.Clientset().CoreV1().PodTemplates(e.ns).Create(e.ctx, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create podtemplate %s: %v", name, err)
	}
	return pt
}

// keys lists "namespace/name" of the events of type typ, in order.
func keys(evs []change.Event, typ change.EventType) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev.Change.Key.String())
		}
	}
	return out
}

// sameSet reports whether got holds exactly the elements of want, each once.
func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
