package source_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func TestA410OnTheLiveWatchRelistsAndTheWatchGoesOn(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.configMap("", "a", nil)
	s := e.stream(e.configMaps())
	r := e.run(s, e.listRV(), nil)
	e.configMap("", "b", nil)
	r.waitFor(e, "b from the live watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })

	// The apiserver restarts with a watch cache that starts at etcd's current revision
	// and etcd compacted: the watch, re-opened from b's RV, is answered 410.
	if err := e.kube.ExpireHistory(e.ctx); err != nil {
		t.Fatal(err)
	}
	evs := r.waitFor(e, "the relist", relistEnded(1))
	if evs[0].Type != change.Changed {
		t.Errorf("first event %s, want b's create (a watch from the given RV, no relist)", evs[0].Type)
	}
	if est := r.waitEstablished(e); est != 0 {
		t.Errorf("established before event %d, want before the first (the watch from the given RV was good)", est)
	}
	if got := count(evs, change.RelistBegin); got != 1 {
		t.Errorf("%d relists, want 1", got)
	}
	begin := slices.IndexFunc(evs, func(ev change.Event) bool { return ev.Type == change.RelistBegin })
	if got := names(evs[begin:], change.Listed); !sameSet(got, []string{"a", "b"}) {
		t.Errorf("relist listed %q, want a and b", got)
	}
	if got := s.Observer.(*observer).goneCount(); got != 1 {
		t.Errorf("observer told of %d 410s, want 1", got)
	}

	e.configMap("", "c", nil)
	e.touch("", "a", "1")
	evs = r.waitFor(e, "a's update after the relist", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "a") })
	end := slices.IndexFunc(evs, func(ev change.Event) bool { return ev.Type == change.RelistEnd })
	if got := keysOps(evs[end:]); !slices.Equal(got, []string{"create c", "update a"}) {
		t.Errorf("after the relist the watch delivered %q, want c's create then a's update", got)
	}
}

func TestAStartFromAResourceVersionThatIsTooOldRelistsFirst(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.configMap("", "a", nil)
	from := e.listRV()
	e.touch("", "a", "1")
	if err := e.kube.ExpireHistory(e.ctx); err != nil {
		t.Fatal(err)
	}
	s := e.stream(e.configMaps())
	r := e.run(s, from, nil)

	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := describe(evs); !strings.HasPrefix(got, "relist-begin; listed "+e.ns+"/a@") || count(evs, change.Listed) != 1 {
		t.Errorf("events %s, want a relist of a alone before anything else", got)
	}
	// The watch from the too-old RV was accepted, then answered 410: the stream was not
	// established by it (issue 24, readiness), only by the watch after the relist.
	end := slices.IndexFunc(evs, func(ev change.Event) bool { return ev.Type == change.RelistEnd })
	est := r.waitEstablished(e)
	if est <= end {
		t.Errorf("established before event %d, want only after the relist's end (event %d): %s", est, end, describe(evs))
	}
	if w := e.requests.watches("configmaps"); len(w) == 0 || w[0].Query.Get("resourceVersion") != from.String() {
		t.Errorf("the stream did not try a watch from RV %d first", from)
	}
	if got := s.Observer.(*observer).goneCount(); got != 1 {
		t.Errorf("observer told of %d 410s, want 1", got)
	}
	e.configMap("", "b", nil)
	r.waitFor(e, "b from the watch after the relist", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })
}

func TestEtcdCompactionPastAWatchTheServerEndedRelistsWithoutAnAPIServerRestart(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.podTemplate("a")
	// podtemplates are watched straight from etcd (no watch cache, no bookmarks): a watch
	// the server ends is re-opened from the last event's RV, which compaction expires.
	s := e.stream(e.target(source.Spec{Name: "podtemplates", Namespaces: []string{e.ns}}))
	s.WatchTimeout = 2 * time.Second
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	e.podTemplate("b")
	r.waitFor(e, "b from the watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })
	// Twice, so the compacted revision is at least two past b's RV: etcd still serves a
	// watch that starts exactly at the compacted revision.
	for range 2 {
		if _, err := e.kube.CompactEtcd(e.ctx); err != nil {
			t.Fatal(err)
		}
	}

	evs := r.waitFor(e, "the second relist", relistEnded(2))
	if got := s.Observer.(*observer).goneCount(); got != 1 {
		t.Errorf("observer told of %d 410s, want 1", got)
	}
	begin := slices.IndexFunc(evs[1:], func(ev change.Event) bool { return ev.Type == change.RelistBegin }) + 1
	if got := names(evs[begin:], change.Listed); !sameSet(got, []string{"a", "b"}) {
		t.Errorf("the second relist listed %q, want a and b", got)
	}
	e.podTemplate("c")
	r.waitFor(e, "c from the watch after the relist", func(evs []change.Event) bool { return has(evs, change.OpCreate, "c") })
}

func TestBookmarksBecomeProgressPastChangesTheStreamDoesNotSee(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	other := e.namespace()
	e.configMap(other, "elsewhere", nil)
	s := e.stream(e.configMaps())
	// The apiserver sends a bookmark 2 s before a watch's timeout (and otherwise once a
	// minute), and only when the resource's RV has moved past the watch's since it began:
	// a 3 s watch with a change elsewhere brings one a second after it opens.
	s.WatchTimeout = 3 * time.Second
	r := e.run(s, 0, nil)
	evs := r.waitFor(e, "the relist", relistEnded(1))
	end, _ := last(evs, change.RelistEnd)

	// A change in another namespace moves the resource's RV past anything this stream
	// sees. Make one in each watch, once the server has accepted it (and so registered
	// it): the bookmark carries the stream past that change.
	var elsewhere change.RV
	touched := 0
	e.eventually("a progress event past the other namespace's change", func() bool {
		if p, ok := last(r.snapshot(), change.Progress); ok && elsewhere > 0 && p.RV >= elsewhere {
			return true
		}
		if w := e.requests.watches("configmaps"); len(w) > touched && w[len(w)-1].Status() == http.StatusOK {
			touched = len(w)
			rv := e.touch(other, "elsewhere", strconv.Itoa(touched))
			if elsewhere == 0 {
				elsewhere = rv
			}
		}
		return false
	})
	prev := end.RV
	for _, ev := range r.snapshot() {
		switch ev.Type {
		case change.Progress:
			if ev.RV < prev {
				t.Errorf("progress to RV %d after RV %d", ev.RV, prev)
			}
			prev = ev.RV
		case change.Changed, change.Listed:
			if ev.Change.Key.Namespace != e.ns {
				t.Errorf("delivered %s from outside the stream's namespace", ev.Change.Key)
			}
		}
	}
	// The next watch resumes from the bookmark.
	p, _ := last(r.snapshot(), change.Progress)
	e.eventually("a watch from the bookmark's RV", func() bool {
		for _, w := range e.requests.watches("configmaps") {
			if w.Query.Get("resourceVersion") == p.RV.String() {
				return true
			}
		}
		return false
	})
}

func TestAWatchTheServerClosesResumesFromTheLastResourceVersionWithoutARelist(t *testing.T) {
	e := newEnv(t, time.Minute)
	s := e.stream(e.configMaps())
	s.WatchTimeout = 3 * time.Second
	// A fake clock: were a clean close taken for a failure, the stream would wait a
	// backoff on it before re-opening, and never re-open.
	clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	s.Clock = clk
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))

	// Two quiet watches (nothing changes, so no bookmark either), then one change per
	// watch: create, wait for the server to end that watch and the stream to open the
	// next one, update, and so on.
	watchCount := func() int { return len(e.requests.watches("configmaps")) }
	next := func() {
		n := watchCount()
		e.eventually("the server to end the watch and the stream to open another", func() bool { return watchCount() > n })
	}
	next()
	next()
	e.configMap("", "x", nil)
	next()
	e.touch("", "x", "1")
	next()
	if err := e.kube.Clientset().CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := r.waitFor(e, "x's delete", func(evs []change.Event) bool { return has(evs, change.OpDelete, "x") })

	if got := keysOps(evs); !slices.Equal(got, []string{"create x", "update x", "delete x"}) {
		t.Errorf("delivered %q, want x's create, update and delete once each", got)
	}
	if got := count(evs, change.RelistBegin); got != 1 {
		t.Errorf("%d relists, want only the first: %s", got, describe(evs))
	}
	if got := len(e.requests.lists("configmaps")); got != 1 {
		t.Errorf("%d LIST requests, want the first relist's 1", got)
	}
	if clk.HasWaiters() {
		t.Errorf("the stream waits on its clock, as after a failure")
	}
	// Every watch but the last ended cleanly, and the next one resumed from the RV of the
	// last event the stream had emitted by then (a change, a bookmark or the relist's end).
	delivered := map[string]bool{}
	for _, ev := range evs {
		switch ev.Type {
		case change.Changed:
			delivered[ev.Change.RV.String()] = true
		case change.RelistEnd, change.Progress:
			delivered[ev.RV.String()] = true
		}
	}
	watches := e.requests.watches("configmaps")
	for i, w := range watches[:len(watches)-1] {
		if !w.closedCleanly() {
			t.Errorf("watch %d did not end with a clean EOF", i)
		}
		if rv := w.Query.Get("resourceVersion"); !delivered[rv] {
			t.Errorf("watch %d from RV %s, which is no RV the stream emitted", i, rv)
		}
	}
	for i := 1; i < len(watches); i++ {
		prev, _ := change.ParseRV(watches[i-1].Query.Get("resourceVersion"))
		cur, _ := change.ParseRV(watches[i].Query.Get("resourceVersion"))
		if cur < prev {
			t.Errorf("watch %d from RV %d, before watch %d's RV %d", i, cur, i-1, prev)
		}
	}
	// Each re-open counts as a restart, quiet or not.
	if got, want := s.Observer.(*observer).restarts(), len(watches)-1; got != want {
		t.Errorf("observer told of %d watch restarts, want %d (one per re-open)", got, want)
	}
}

func TestForbiddenIsTerminalForTheResource(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		verbs      []string
		verb       string // the request refused
	}{
		{"without list", "cm-getter", []string{"get"}, "list"},
		{"without watch", "cm-lister", []string{"get", "list"}, "watch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 30*time.Second)
			e.configMap("", "a", nil)
			cfg, _, err := e.kube.RestrictedUser(e.ctx, tc.user, []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: tc.verbs,
			}})
			if err != nil {
				t.Fatal(err)
			}
			s := e.stream(e.configMaps())
			s.Clients = e.clientsFor(cfg, e.requests)
			r := e.run(s, 0, nil)
			err = r.wait(e)
			if !retry.IsTerminal(err) {
				t.Fatalf("Run returned %v, want a terminal error", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "resource configmaps: "+tc.verb) || !strings.Contains(msg, "forbidden") {
				t.Errorf("error %q does not say that %s of configmaps is forbidden", msg, tc.verb)
			}
			evs := r.snapshot()
			if tc.verb == "watch" && count(evs, change.RelistEnd) != 1 {
				t.Errorf("events %s, want a complete relist before the watch was refused", describe(evs))
			}
			var n int
			if tc.verb == "list" {
				n = len(e.requests.lists("configmaps"))
			} else {
				n = len(e.requests.watches("configmaps"))
			}
			if n != 1 {
				t.Errorf("%d %s requests, want 1: a refusal is not retried", n, tc.verb)
			}
		})
	}
}

func TestBackoffsWaitOnTheStreamsClock(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.configMap("", "a", nil)
	start := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	// The first LIST and the first watch fail with a 500 (retried); the backoffs are an
	// hour, which only a fake clock gets through in a test.
	log := &requestLog{}
	log.fail = func(r *request) int {
		if len(log.lists("configmaps")) == 1 && r.isList("configmaps") || len(log.watches("configmaps")) == 1 && r.isWatch("configmaps") {
			return http.StatusInternalServerError
		}
		return 0
	}
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(e.kube.Config, log)
	s.Clock = clk
	s.Backoff = retry.Backoff{Initial: time.Hour, Max: time.Hour} // each wait 30–60 min
	r := e.run(s, 0, nil)

	e.eventually("the stream to wait after the failed LIST", clk.HasWaiters)
	clk.Step(29 * time.Minute)
	if !clk.HasWaiters() {
		t.Fatal("the relist backoff ended before 30 minutes on the clock")
	}
	if n := len(log.lists("configmaps")); n != 1 {
		t.Fatalf("%d LIST requests before the backoff ended, want 1", n)
	}
	clk.Step(31 * time.Minute)
	evs := r.waitFor(e, "the relist after the backoff", relistEnded(1))
	listedAt := clk.Now()
	if p, _ := last(evs, change.Listed); !p.Change.ObservedAt.Equal(listedAt) {
		t.Errorf("listed a observed at %s, want the fake clock's %s", p.Change.ObservedAt, listedAt)
	}

	// The failed watch is re-opened (after the stream's 1 s pacing of re-opens, on the
	// real clock) only once its backoff has passed on the stream's clock.
	e.eventually("the stream to wait after the failed watch", clk.HasWaiters)
	if n := len(log.watches("configmaps")); n != 1 {
		t.Fatalf("%d watch requests before the backoff ended, want 1", n)
	}
	clk.Step(time.Hour)
	e.eventually("the watch to open", func() bool {
		w := log.watches("configmaps")
		return len(w) == 2 && w[1].Status() == http.StatusOK
	})
	clk.Step(time.Minute)
	e.touch("", "a", "1")
	evs = r.waitFor(e, "a's update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "a") })
	if c, _ := last(evs, change.Changed); !c.Change.ObservedAt.Equal(clk.Now()) {
		t.Errorf("a's update observed at %s, want the fake clock's %s", c.Change.ObservedAt, clk.Now())
	}
}

// keysOps lists "op name" of the Changed events, in order.
func keysOps(evs []change.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == change.Changed {
			out = append(out, string(ev.Change.Op)+" "+ev.Change.Key.Name)
		}
	}
	return out
}
