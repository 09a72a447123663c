package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// relistScript is a Streamer that watches quietly from a checkpoint and, from 0, lists
// the objects list returns; it counts its relists.
type relistScript struct {
	list    func() []change.Change
	listRV  change.RV
	relists *atomic.Int32
}

func (s *relistScript) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	if from == 0 {
		s.relists.Add(1)
		evs := []change.Event{{Type: change.RelistBegin}}
		for _, c := range s.list() {
			evs = append(evs, listed(c))
		}
		evs = append(evs, change.Event{Type: change.RelistEnd, RV: s.listRV})
		for _, ev := range evs {
			if err := emit(ctx, ev); err != nil {
				return nil
			}
		}
	}
	<-ctx.Done()
	return nil
}

// driftMetrics records what DriftObserver is told.
type driftMetrics struct {
	nopMetrics
	mu    sync.Mutex
	drift map[string]int // kind → n
}

func (m *driftMetrics) Drift(sink, resource, kind string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drift == nil {
		m.drift = map[string]int{}
	}
	m.drift[kind] += n
}

func key(name string) change.Key { return change.Key{Namespace: "ns", Name: name} }

// A sink at checkpoint 100 that holds a as listed, b as listed but edited by hand, c at
// an older version than the one listed (below the checkpoint), d which the cluster no
// longer has, and lacks e (listed below the checkpoint) and f (created after it).
func driftedSink() *memSink {
	s := newMemSink("pg")
	s.ckpt = 100
	s.objects[key("a")] = change.Entry{UID: "ua", RV: 10}
	s.objects[key("b")] = change.Entry{UID: "ub", RV: 20, Drifted: true}
	s.objects[key("c")] = change.Entry{UID: "uc", RV: 25}
	s.objects[key("d")] = change.Entry{UID: "ud", RV: 40}
	return s
}

func driftedList() []change.Change {
	return []change.Change{obj("a", "ua", 10), obj("b", "ub", 20), obj("c", "uc", 30), obj("e", "ue", 50), obj("f", "uf", 150)}
}

func startRelistPipeline(t *testing.T, s Sink, opts Options, tg Fixture, list func() []change.Change) (*Pipeline, *atomic.Int32) {
	t.Helper()
	relists := &atomic.Int32{}
	tg.Resource = cms
	tg.NewStream = func() Streamer { return &relistScript{list: list, listRV: 200, relists: relists} }
	p := newP(opts, []Sink{s}, []Fixture{tg})
	stop := startRun(p)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p, relists
}

func TestARequestedRelistRepairsAndCountsEachKindOfDriftAndWritesNothingElse(t *testing.T) {
	s := driftedSink()
	m := &driftMetrics{}
	p, relists := startRelistPipeline(t, s, Options{MaxWait: time.Millisecond, Metrics: m}, Fixture{}, driftedList)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Relist(ctx, []string{"configmaps"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if relists.Load() != 1 {
		t.Errorf("the stream relisted %d times, want once", relists.Load())
	}
	wantDrift := map[string]int{DriftMissing: 1, DriftStale: 1, DriftEdited: 1, DriftExtra: 1}
	want := RelistResult{Sink: "pg", Resource: "configmaps", Listed: 5, Written: 4, Deleted: 1, Drift: wantDrift}
	if len(res) != 1 || !equalResult(res[0], want) {
		t.Fatalf("Relist returned %+v, want [%+v]", res, want)
	}
	log, ck := s.snapshot()
	var written []string
	for _, c := range log {
		written = append(written, c.Key.Name+":"+string(c.Op))
	}
	slices.Sort(written)
	// a is unchanged: nothing. f changed after the checkpoint: written, but no drift.
	if wantW := []string{"b:update", "c:update", "d:delete", "e:create", "f:create"}; !slices.Equal(written, wantW) {
		t.Errorf("the relist wrote %v, want %v", written, wantW)
	}
	if ck != 200 {
		t.Errorf("checkpoint %v after the relist, want the LIST's 200", ck)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !maps.Equal(m.drift, wantDrift) {
		t.Errorf("drift counted %v, want %v", m.drift, wantDrift)
	}
}

func equalResult(a, b RelistResult) bool {
	return a.Sink == b.Sink && a.Resource == b.Resource && a.Scope == b.Scope && a.Listed == b.Listed &&
		a.Written == b.Written && a.Deleted == b.Deleted && a.Skipped == b.Skipped && maps.Equal(a.Drift, b.Drift)
}

func TestAFullRelistWritesEveryListedObjectAgainAsASnapshot(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 100
	s.objects[key("a")] = change.Entry{UID: "ua", RV: 10}
	s.objects[key("b")] = change.Entry{UID: "ub", RV: 20}
	list := func() []change.Change { return []change.Change{obj("a", "ua", 10), obj("b", "ub", 20)} }
	p, _ := startRelistPipeline(t, s, Options{MaxWait: time.Millisecond}, Fixture{}, list)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	res, err := p.Relist(ctx, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if log, _ := s.snapshot(); len(log) != 0 || res[0].Written != 0 {
		t.Fatalf("a relist of an unchanged sink wrote %d changes (reported %d), want none", len(log), res[0].Written)
	}
	res, err = p.Relist(ctx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := s.snapshot()
	if len(log) != 2 || res[0].Written != 2 || res[0].Drift != nil {
		t.Fatalf("a full relist wrote %d changes, reported %+v; want both objects, no drift", len(log), res[0])
	}
	for _, c := range log {
		if !c.Snapshot || c.Op != change.OpUpdate {
			t.Errorf("a full relist wrote %s as %s (snapshot %v), want a snapshot update", c.Key, c.Op, c.Snapshot)
		}
	}
}

func TestRelistNamesTheStreamedResourcesWhenAskedForAnother(t *testing.T) {
	p, _ := startRelistPipeline(t, newMemSink("pg"), Options{}, Fixture{}, func() []change.Change { return nil })
	_, err := p.Relist(context.Background(), []string{"secrets"}, false)
	if err == nil || err.Error() != `resource "secrets" is not streamed; streamed are: configmaps` {
		t.Fatalf("Relist(secrets) = %v, want an error naming configmaps", err)
	}
}

func TestAResyncRelistsOnTheClockAndAnUnchangedResyncWritesNothing(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 100
	s.objects[key("a")] = change.Entry{UID: "ua", RV: 10}
	fc := clocktesting.NewFakeClock(time.Now())
	list := func() []change.Change { return []change.Change{obj("a", "ua", 10)} }
	_, relists := startRelistPipeline(t, s, Options{MaxWait: time.Millisecond, Clock: fc}, Fixture{Resync: time.Minute}, list)
	for want := int32(1); want <= 2; want++ {
		waitFor(t, func() bool {
			if relists.Load() >= want {
				return true
			}
			fc.Step(5 * time.Second) // at most 69 s (+15%) for each resync
			return false
		})
		waitFor(t, func() bool { _, ck := s.snapshot(); return ck == 200 })
	}
	if log, _ := s.snapshot(); len(log) != 0 {
		t.Errorf("unchanged resyncs wrote %d changes, want none: %v", len(log), log)
	}
}

// A requested relist's round is stamped on its stream's RelistBegin events, in their own
// field (change.Event.Round), up to the relist's end; the events' RV stays the stream's.
func TestARequestedRoundIsStampedOnTheRelistsBeginsInItsOwnField(t *testing.T) {
	var got []change.Event
	emit := stampRelist(func(_ context.Context, ev change.Event) error {
		got = append(got, ev)
		return nil
	}, 7, &atomic.Bool{})
	for _, ev := range []change.Event{
		{Type: change.RelistBegin},
		{Type: change.RelistBegin}, // the relist failed part-way and began again
		listed(obj("a", "ua", 10)),
		{Type: change.RelistEnd, RV: 20},
		{Type: change.RelistBegin}, // a later relist (410) answers no request
	} {
		if err := emit(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []uint64{7, 7, 0, 0, 0} {
		if got[i].Round != want {
			t.Errorf("event %d (%s): round %d, want %d", i, got[i].Type, got[i].Round, want)
		}
	}
	if got[0].RV != 0 || got[3].RV != 20 {
		t.Errorf("RVs %d and %d, want the stream's: 0 and 20", got[0].RV, got[3].RV)
	}
}

// oneObjectScript lists object a at RV 10, the LIST at 200.
func oneObjectScript(relists *atomic.Int32) relistScript {
	return relistScript{list: func() []change.Change { return []change.Change{obj("a", "ua", 10)} }, listRV: 200, relists: relists}
}

// startOneObjectPipeline runs stream into a sink at checkpoint 100 that holds a as listed.
func startOneObjectPipeline(t *testing.T, opts Options, stream Streamer) *Pipeline {
	t.Helper()
	s := newMemSink("pg")
	s.ckpt = 100
	s.objects[key("a")] = change.Entry{UID: "ua", RV: 10}
	p := newP(opts, []Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer { return stream }}})
	stop := startRun(p)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// gatedScript is relistScript whose first relist is cut before it begins: it waits
// (probing, opening its list) until its context ends, as a stream cut by a later round
// while the server is slow to answer.
type gatedScript struct {
	relistScript
	reached chan struct{} // closed when the first relist waits
}

func (s *gatedScript) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	if from == 0 && s.relists.Load() == 0 {
		s.relists.Add(1)
		close(s.reached)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.relistScript.Run(ctx, from, emit)
}

// A round whose stream a later round cuts before the relist began (the first stream
// was still opening its list) is answered by the relist of the stream that replaces it,
// with the round that cut it: neither waits in vain (a `kube-cdc resnapshot` asked under
// load got no answer while 2-s resyncs went on).
func TestARoundCutBeforeItsRelistBeganIsAnsweredByTheNextRelist(t *testing.T) {
	relists := &atomic.Int32{}
	gs := &gatedScript{relistScript: oneObjectScript(relists), reached: make(chan struct{})}
	p := startOneObjectPipeline(t, Options{MaxWait: time.Millisecond}, gs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		res, err := p.Relist(ctx, nil, true)
		if err == nil && (len(res) != 1 || res[0].Written != 1) {
			err = fmt.Errorf("the full round's relist reported %+v, want a written", res)
		}
		first <- err
	}()
	select {
	case <-gs.reached:
	case <-ctx.Done():
		t.Fatal("the first round's stream never began to relist")
	}
	if _, err := p.Relist(ctx, nil, false); err != nil {
		t.Fatalf("the round that cut the first: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the round cut before its relist began: %v", err)
	}
	if n := relists.Load(); n != 2 {
		t.Errorf("the stream relisted %d times, want 2 (the cut one and the one answering both)", n)
	}
}

// faultFirst is relistScript whose first relist fails before it begins, with a Fault
// (the apiserver refused the list): the resource is degraded and streamed again.
type faultFirst struct {
	relistScript
	failed atomic.Bool
}

func (s *faultFirst) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	if from == 0 && s.failed.CompareAndSwap(false, true) {
		return faultErr("forbidden")
	}
	return s.relistScript.Run(ctx, from, emit)
}

// A round whose stream fails before its relist began goes back to the queue: the
// resource's next stream, once it is no longer degraded, relists and answers it.
func TestARoundWhoseStreamFailsBeforeItsRelistBeganIsAnsweredWhenTheResourceStreamsAgain(t *testing.T) {
	fs := &faultFirst{relistScript: oneObjectScript(&atomic.Int32{})}
	opts := Options{MaxWait: time.Millisecond, DegradedBackoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}}
	p := startOneObjectPipeline(t, opts, fs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Relist(ctx, nil, true)
	if err != nil {
		t.Fatalf("the round whose stream failed before its relist began: %v", err)
	}
	if !fs.failed.Load() || len(res) != 1 || res[0].Written != 1 || res[0].Skipped != "" {
		t.Errorf("failed first: %v; the round's relist reported %+v, want one sink with a written", fs.failed.Load(), res)
	}
}
