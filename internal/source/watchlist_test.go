package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// relistObserver is an observer that also records each relist's reason and mode, and
// the last count of objects listed.
type relistObserver struct {
	observer
	mu      sync.Mutex
	started []string // "reason/mode"
	listed  int
}

func (o *relistObserver) RelistStarted(_, reason, mode string) {
	o.mu.Lock()
	o.started = append(o.started, reason+"/"+mode)
	o.mu.Unlock()
}

func (o *relistObserver) RelistListed(_ string, n int) {
	o.mu.Lock()
	o.listed = n
	o.mu.Unlock()
}

func (o *relistObserver) starts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.started)
}

// isStreamingList: a watch that asks for the initial events (WatchList).
func (r *request) isStreamingList(resource string) bool {
	return r.isWatch(resource) && r.Query.Get("sendInitialEvents") == "true"
}

// listed is what a relist showed of each object: key → "uid rv object", the object's
// JSON with its keys sorted (a LIST's items and watch events order apiVersion and kind
// differently; JSON consumers and PostgreSQL's jsonb do not care).
func listed(evs []change.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type == change.Listed {
			c := ev.Change
			var v any
			if err := json.Unmarshal(c.Object, &v); err != nil {
				panic(err)
			}
			sorted, _ := json.Marshal(v)
			out[c.Key.String()] = fmt.Sprintf("%s %d %s", c.UID, c.RV, sorted)
		}
	}
	return out
}

func TestAStreamingRelistListsWhatAPagedOneDoesAndEndsOnlyAtTheInitialEventsEndBookmark(t *testing.T) {
	e := newEnv(t, time.Minute)
	for i := range 25 {
		e.configMap("", fmt.Sprintf("cm-%02d", i), map[string]string{"i": fmt.Sprint(i)})
	}
	e.touch("", "cm-03", "changed")
	if err := e.kube.Clientset().CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "cm-04", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	paged := e.stream(e.configMaps())
	paged.PageSize = 7
	pagedEvs := e.run(paged, 0, nil).waitFor(e, "the paged relist", relistEnded(1))

	s := e.stream(e.configMaps())
	s.ListMode = source.ListStream
	obs := &relistObserver{}
	s.Observer = obs
	r := e.run(s, 0, nil)
	evs := r.waitFor(e, "the streaming relist", relistEnded(1))

	if got, want := listed(evs), listed(pagedEvs); len(got) != 24 || !maps.Equal(got, want) {
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("%s: streamed %s\npaged %s", k, got[k], want[k])
			}
		}
		t.Errorf("the streaming relist listed %d objects, the paged one %d; they differ", len(got), len(want))
	}
	// The checkpoint (RelistEnd) comes once, after every object, at the bookmark's RV:
	// at least every listed object's and the probe's the Listed events carry.
	end := slices.IndexFunc(evs, func(ev change.Event) bool { return ev.Type == change.RelistEnd })
	if evs[0].Type != change.RelistBegin || count(evs, change.RelistEnd) != 1 || count(evs[end:], change.Listed) != 0 || count(evs, change.Progress) != 0 {
		t.Fatalf("events %s, want RelistBegin, the objects, then one RelistEnd", describe(evs))
	}
	for _, ev := range evs[:end] {
		if c := ev.Change; ev.Type == change.Listed && (c.RV > evs[end].RV || c.ListRV == 0 || c.ListRV > evs[end].RV || !c.Snapshot || ev.ListTotal < 24) {
			t.Errorf("%s at %d (list RV %d, snapshot %v, total %d) with the relist ending at %d", c.Key, c.RV, c.ListRV, c.Snapshot, ev.ListTotal, evs[end].RV)
		}
	}
	if got := e.requests.matching(func(r *request) bool { return r.isStreamingList("configmaps") }); len(got) != 1 ||
		got[0].Query.Get("resourceVersionMatch") != "NotOlderThan" || got[0].Query.Get("allowWatchBookmarks") != "true" {
		t.Errorf("%d streaming watches, want one with resourceVersionMatch=NotOlderThan and bookmarks", len(got))
	}
	if got := obs.starts(); !slices.Contains(got, "start/stream") {
		t.Errorf("relists observed %q, want start/stream", got)
	}

	// After the bookmark the stream watches on from the bookmark's RV.
	e.configMap("", "late", nil)
	e.touch("", "cm-00", "changed")
	evs = r.waitFor(e, "the watch after the streaming list", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "cm-00") })
	if got := keysOps(evs[end:]); !slices.Equal(got, []string{"create late", "update cm-00"}) {
		t.Errorf("after the streaming list the watch delivered %q, want late's create then cm-00's update", got)
	}
}

func TestAutoStreamsWhereTheServerCanAndRemembersItPerResource(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.configMap("", "a", nil)
	modes := &source.ListModes{}
	s := e.stream(e.configMaps())
	s.ListMode, s.ListModes = source.ListAuto, modes
	e.run(s, 0, nil).waitFor(e, "the relist", relistEnded(1))
	if got := modes.Mode("configmaps"); got != source.ListStream {
		t.Errorf("auto found %q, want %q", got, source.ListStream)
	}
	if n := len(e.requests.lists("configmaps")); n != 0 {
		t.Errorf("%d paged LISTs, want none: the server streams lists", n)
	}
}

// watchListOff is a second control plane whose apiserver has the WatchList feature off.
func watchListOff(t *testing.T) (*testenv.Kube, string) {
	k := testenv.NewKube(t, testenv.KubeOptions{FeatureGates: "WatchList=false"})
	ns, err := k.Clientset().CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wl-off-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns.Name}}
		if _, err := k.Clientset().CoreV1().ConfigMaps(ns.Name).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return k, ns.Name
}

func TestAutoFallsBackToPagedListsWhenTheServerHasWatchListOffAndAsksOnlyOnce(t *testing.T) {
	e := newEnv(t, 3*time.Minute)
	k, ns := watchListOff(t)
	log := &requestLog{}
	clients := e.clientsFor(k.Config, log)
	targets, err := source.Resolve(clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: []string{ns}}})
	if err != nil {
		t.Fatal(err)
	}
	modes := &source.ListModes{}
	newStream := func(mode source.ListMode) *source.Stream {
		s := e.stream(targets[0])
		s.Clients, s.ListMode, s.ListModes = clients, mode, modes
		s.Observer = &relistObserver{}
		return s
	}

	s := newStream(source.ListAuto)
	evs := e.run(s, 0, nil).waitFor(e, "the relist", relistEnded(1))
	if got := names(evs, change.Listed); len(got) != 5 {
		t.Errorf("listed %q, want the 5 configmaps", got)
	}
	if got := modes.Mode("configmaps"); got != source.ListPaged {
		t.Errorf("auto found %q, want %q", got, source.ListPaged)
	}
	refused := log.matching(func(r *request) bool { return r.isStreamingList("configmaps") })
	if len(refused) != 1 || refused[0].Status() != http.StatusUnprocessableEntity {
		t.Fatalf("%d streaming watches, want one, refused 422 by the server with WatchList off", len(refused))
	}
	if got := s.Observer.(*relistObserver).starts(); !slices.Equal(got, []string{"start/paged"}) {
		t.Errorf("relists observed %q, want one start/paged", got)
	}

	// Another stream of the resource (a sink detached, a resource restarted) lists pages
	// at once.
	e.run(newStream(source.ListAuto), 0, nil).waitFor(e, "the second relist", relistEnded(1))
	if got := log.matching(func(r *request) bool { return r.isStreamingList("configmaps") }); len(got) != 1 {
		t.Errorf("%d streaming watches after the second relist, want still 1", len(got))
	}

	// listMode stream on that server is an error that says so.
	err = e.run(newStream(source.ListStream), 0, nil).wait(e)
	if !retry.IsTerminal(err) || !strings.Contains(err.Error(), "listMode is stream") || !strings.Contains(err.Error(), "WatchList") {
		t.Errorf("listMode stream on a server without WatchList: %v, want a terminal error naming the key", err)
	}
}

func TestA410RelistWaitsAJitteredDelayOnTheStreamsClockAndIsCountedAsGone(t *testing.T) {
	e := newEnv(t, 2*time.Minute)
	e.configMap("", "a", nil)
	clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	s := e.stream(e.configMaps())
	s.Clock = clk
	s.RelistJitter = time.Hour
	// The watch's re-opens while the apiserver restarts back off on the fake clock too:
	// by a millisecond, which the test steps through until the 410.
	s.Backoff = retry.Backoff{Initial: time.Millisecond, Max: time.Millisecond}
	s.ListMode = source.ListStream
	obs := &relistObserver{}
	s.Observer = obs
	r := e.run(s, e.listRV(), nil)
	e.configMap("", "b", nil)
	r.waitFor(e, "b from the live watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })

	if err := e.kube.ExpireHistory(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.eventually("the stream to wait before relisting", func() bool {
		if obs.goneCount() == 0 && clk.HasWaiters() {
			clk.Step(time.Millisecond)
		}
		return obs.goneCount() == 1 && clk.HasWaiters()
	})
	// However long the real clock runs, the relist waits for the stream's clock.
	e.configMap("", "c", nil)
	if got := count(r.snapshot(), change.RelistBegin); got != 0 || len(obs.starts()) != 0 {
		t.Fatalf("%d relists began (observed %q) before the jitter passed on the stream's clock", got, obs.starts())
	}
	clk.Step(time.Hour)
	evs := r.waitFor(e, "the relist after the jitter", relistEnded(1))
	if got := names(evs, change.Listed); !sameSet(got, []string{"a", "b", "c"}) {
		t.Errorf("relist listed %q, want a, b and c", got)
	}
	if got := obs.starts(); !slices.Equal(got, []string{"gone/stream"}) {
		t.Errorf("relists observed %q, want one gone/stream", got)
	}
}
