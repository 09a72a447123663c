package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// memSink is an in-memory Sink for these narrow unit tests; the end-to-end tests run
// against real servers.
type memSink struct {
	name    string
	mu      sync.Mutex
	ckpt    change.RV
	objects map[change.Key]change.Entry
	log     []change.Change
	batches []change.Batch
	block   chan struct{} // while non-nil and open, Write blocks
	writing chan struct{} // when non-nil, told (without blocking) that a Write began
}

func newMemSink(name string) *memSink {
	return &memSink{name: name, objects: map[change.Key]change.Entry{}}
}

func (s *memSink) Name() string { return s.name }
func (s *memSink) Checkpoint(context.Context, change.Resource) (change.RV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ckpt, nil
}
func (s *memSink) KeyIndex(_ context.Context, _ change.Resource, fn func(change.Key, change.Entry) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.objects {
		if err := fn(k, e); err != nil {
			return err
		}
	}
	return nil
}
func (s *memSink) Write(ctx context.Context, b change.Batch) error {
	if s.writing != nil {
		select {
		case s.writing <- struct{}{}:
		default:
		}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	for _, c := range b.Changes {
		s.log = append(s.log, c)
		if c.Op == change.OpDelete {
			delete(s.objects, c.Key)
		} else {
			s.objects[c.Key] = change.Entry{UID: c.UID, RV: c.RV}
		}
	}
	s.ckpt = max(s.ckpt, b.Checkpoint)
	return nil
}
func (s *memSink) Close() error { return nil }
func (s *memSink) snapshot() ([]change.Change, change.RV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]change.Change(nil), s.log...), s.ckpt
}

// script is a Streamer that emits fixed events, says it is established (as a watch that
// went on), then waits for ctx.
type script struct {
	events func(from change.RV) []change.Event
	done   chan struct{}
}

func (s *script) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	for _, ev := range append(s.events(from), change.Event{Type: change.Established, RV: from}) {
		if err := emit(ctx, ev); err != nil {
			return nil
		}
	}
	if s.done != nil {
		close(s.done)
	}
	<-ctx.Done()
	return nil
}

var cms = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func obj(name, uid string, rv change.RV) change.Change {
	return change.Change{Resource: cms, Key: change.Key{Namespace: "ns", Name: name}, UID: uid, RV: rv, Object: []byte(`{}`), ObservedAt: time.Now()}
}

func listed(c change.Change) change.Event {
	c.Snapshot = true
	return change.Event{Type: change.Listed, Change: c}
}

func watched(op change.Op, c change.Change) change.Event {
	c.Op = op
	return change.Event{Type: change.Changed, Change: c}
}

func run(t *testing.T, sinks []Sink, events func(change.RV) []change.Event) {
	t.Helper()
	runWith(t, sinks, Options{MaxWait: time.Millisecond}, events)
}

func runWith(t *testing.T, sinks []Sink, opts Options, events func(change.RV) []change.Event) {
	t.Helper()
	done := make(chan struct{})
	p := newP(opts, sinks, []Fixture{{Resource: cms, NewStream: func() Streamer {
		return &script{events: events, done: done}
	}}})
	stop := startRun(p)
	<-done
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestReconcileDiffEmitsOnlyWhatTheSinkDoesNotHold(t *testing.T) {
	s := newMemSink("pg")
	s.objects[change.Key{Namespace: "ns", Name: "same"}] = change.Entry{UID: "u1", RV: 10}
	s.objects[change.Key{Namespace: "ns", Name: "changed"}] = change.Entry{UID: "u2", RV: 11}
	s.objects[change.Key{Namespace: "ns", Name: "gone"}] = change.Entry{UID: "u3", RV: 12}
	s.objects[change.Key{Namespace: "ns", Name: "recreated"}] = change.Entry{UID: "old", RV: 13}
	run(t, []Sink{s}, func(change.RV) []change.Event {
		return []change.Event{
			{Type: change.RelistBegin},
			listed(obj("same", "u1", 10)),
			listed(obj("changed", "u2", 20)),
			listed(obj("recreated", "new", 21)),
			listed(obj("fresh", "u4", 22)),
			{Type: change.RelistEnd, RV: 30},
		}
	})
	log, ck := s.snapshot()
	got := map[string]string{}
	for _, c := range log {
		got[c.Key.Name+" "+c.UID] = fmt.Sprintf("%s inferred=%v snapshot=%v rv=%d", c.Op, c.Inferred, c.Snapshot, c.RV)
	}
	want := map[string]string{
		"changed u2":    "update inferred=false snapshot=true rv=20",
		"recreated old": "delete inferred=true snapshot=false rv=20", // recreate_test.go
		"recreated new": "create inferred=false snapshot=true rv=21",
		"fresh u4":      "create inferred=false snapshot=true rv=22",
		"gone u3":       "delete inferred=true snapshot=false rv=30",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(log) != len(want) {
		t.Errorf("changes = %v\nwant %v", got, want)
	}
	if ck != 30 {
		t.Errorf("checkpoint = %d, want the LIST's RV 30", ck)
	}
}

func TestWatchChangesAreWrittenInOrderAndBookmarksAdvanceTheCheckpoint(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 5
	run(t, []Sink{s}, func(from change.RV) []change.Event {
		if from != 5 {
			t.Errorf("stream started from %d, want the checkpoint 5", from)
		}
		return []change.Event{
			watched(change.OpCreate, obj("a", "u", 6)),
			watched(change.OpUpdate, obj("a", "u", 7)),
			watched(change.OpDelete, obj("a", "u", 8)),
			{Type: change.Progress, RV: 50},
		}
	})
	log, ck := s.snapshot()
	var ops []string
	for _, c := range log {
		ops = append(ops, fmt.Sprintf("%s@%d", c.Op, c.RV))
	}
	if fmt.Sprint(ops) != "[create@6 update@7 delete@8]" || ck != 50 {
		t.Errorf("ops = %v, checkpoint %d; want [create@6 update@7 delete@8] and 50", ops, ck)
	}
}

func TestASinkAheadOfTheSharedStreamSkipsWhatItHas(t *testing.T) {
	behind, ahead := newMemSink("behind"), newMemSink("ahead")
	behind.ckpt, ahead.ckpt = 5, 7
	run(t, []Sink{behind, ahead}, func(from change.RV) []change.Event {
		if from != 5 {
			t.Errorf("stream started from %d, want the oldest checkpoint 5", from)
		}
		return []change.Event{
			watched(change.OpCreate, obj("a", "u", 6)),
			watched(change.OpUpdate, obj("a", "u", 7)),
			watched(change.OpUpdate, obj("a", "u", 8)),
		}
	})
	bl, _ := behind.snapshot()
	al, _ := ahead.snapshot()
	if len(bl) != 3 || len(al) != 1 || al[0].RV != 8 {
		t.Errorf("behind got %d changes (want 3), ahead got %v (want only rv 8)", len(bl), al)
	}
}

func TestAStalledSinkIsDetachedAndCatchesUpFromItsOwnCheckpoint(t *testing.T) {
	fast, slow := newMemSink("fast"), newMemSink("slow")
	slow.block = make(chan struct{})
	const n = 50
	var mu sync.Mutex
	var starts []change.RV
	done := make(chan struct{})
	clk := clocktesting.NewFakeClock(time.Now())
	// BatchSize 1 cuts every batch at once, so only DetachAfter waits on the clock.
	p := newP(Options{Buffer: 4, DetachAfter: time.Minute, BatchSize: 1, Clock: clk},
		[]Sink{fast, slow}, []Fixture{{Resource: cms, NewStream: func() Streamer {
			return &script{events: func(from change.RV) []change.Event {
				mu.Lock()
				starts = append(starts, from)
				mu.Unlock()
				var evs []change.Event
				for i := change.RV(1); i <= n; i++ {
					if i > from {
						evs = append(evs, watched(change.OpUpdate, obj("a", "u", i)))
					}
				}
				return evs
			}}
		}}})
	stop := startRun(p)
	// The fast sink is held back by the stalled one until a minute passes on the clock.
	// The stream waits on the slow sink once it holds one change in its blocked Write and
	// Buffer in its queue: the fast sink then has Buffer+2. A timer alone may be the fast
	// sink's, its queue full for a moment under load: stepped then, it detached the fast
	// sink (seen with two make tests at once).
	waitFor(t, func() bool { l, _ := fast.snapshot(); return clk.HasWaiters() && len(l) >= 4+2 })
	if l, _ := fast.snapshot(); len(l) == n {
		t.Fatal("the fast sink got everything before DetachAfter passed")
	}
	clk.Step(time.Minute)
	waitFor(t, func() bool { l, _ := fast.snapshot(); return len(l) == n })
	close(slow.block) // the broker is back
	waitFor(t, func() bool { _, ck := slow.snapshot(); return ck == n })
	close(done)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	sl, _ := slow.snapshot()
	seen := map[change.RV]bool{}
	for _, c := range sl {
		if seen[c.RV] {
			t.Errorf("slow sink got rv %d twice", c.RV)
		}
		seen[c.RV] = true
	}
	if len(seen) != n {
		t.Errorf("slow sink got %d distinct changes, want %d", len(seen), n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || starts[1] == 0 {
		t.Errorf("stream starts = %v, want the shared one and one from the slow sink's own checkpoint", starts)
	}
}

func TestATerminalSinkErrorStopsThePipeline(t *testing.T) {
	s := &failSink{memSink: newMemSink("pg")}
	p := newP(Options{MaxWait: time.Millisecond}, []Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer {
		return &script{events: func(change.RV) []change.Event {
			return []change.Event{watched(change.OpCreate, obj("a", "u", 6))}
		}}
	}}})
	err := p.Run(context.Background())
	if err == nil || !errors.Is(err, errAuth) {
		t.Fatalf("Run = %v, want the terminal sink error", err)
	}
}

var errAuth = errors.New("password authentication failed")

type failSink struct{ *memSink }

func (s *failSink) Write(context.Context, change.Batch) error { return terminal(errAuth) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // generous: CI may share the machine
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func terminal(err error) error { return retry.Terminal(err) }

func TestTheReconcileDiffOfOneScopeNeverDeletesAnotherScopesObjects(t *testing.T) {
	s := newMemSink("pg")
	s.objects[change.Key{Namespace: "ns", Name: "gone"}] = change.Entry{UID: "u1", RV: 10}
	s.objects[change.Key{Namespace: "other", Name: "kept"}] = change.Entry{UID: "u2", RV: 11}
	done := make(chan struct{})
	p := newP(Options{MaxWait: time.Millisecond}, []Sink{s}, []Fixture{{
		Resource: cms,
		Owns:     func(k change.Key) bool { return k.Namespace == "ns" },
		NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{{Type: change.RelistBegin}, {Type: change.RelistEnd, RV: 20}}
			}}
		},
	}})
	stop := startRun(p)
	<-done
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	log, _ := s.snapshot()
	if len(log) != 1 || log[0].Key.Name != "gone" || !log[0].Inferred {
		t.Errorf("changes = %+v, want only an inferred delete of ns/gone", log)
	}
}

func TestALostLeaseAbandonsQueuedChangesInsteadOfFlushingThem(t *testing.T) {
	s := newMemSink("pg")
	s.block = make(chan struct{}) // the first write hangs, as on a stalled connection
	s.writing = make(chan struct{}, 1)
	errLost := errors.New("lost the lease")
	done := make(chan struct{})
	p := newP(Options{MaxWait: time.Millisecond, FlushTimeout: time.Minute,
		Abandon: func(cause error) bool { return errors.Is(cause, errLost) }},
		[]Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{watched(change.OpCreate, obj("a", "u", 6)), watched(change.OpCreate, obj("b", "u", 7))}
			}}
		}}})
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	<-done
	<-s.writing // the first batch reached the hanging Write
	cancel(errLost)
	select {
	case <-errc:
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept writing after the lease was lost (it waits for FlushTimeout, 1m)")
	}
	if log, ck := s.snapshot(); len(log) != 0 || ck != 0 {
		t.Errorf("wrote %d changes and checkpoint %d after losing the lease, want nothing", len(log), ck)
	}
}

// The rule a crash relies on: while a relist runs, its batches carry the checkpoint from
// before it, so a crash part-way relists again. Were LIST events to advance it, a restart
// would watch from an RV past objects not yet listed (LIST order is key order, not RV
// order) and never see them.
func TestARelistsBatchesKeepTheOldCheckpointUntilTheRelistEnds(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 5
	runWith(t, []Sink{s}, Options{MaxWait: time.Millisecond, BatchSize: 2}, func(change.RV) []change.Event {
		return []change.Event{
			{Type: change.RelistBegin},
			listed(obj("a", "u1", 90)),
			listed(obj("b", "u2", 80)),
			listed(obj("c", "u3", 70)),
			listed(obj("d", "u4", 60)),
			listed(obj("e", "u5", 50)),
			{Type: change.RelistEnd, RV: 100},
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []string
	for _, b := range s.batches {
		got = append(got, fmt.Sprintf("%d changes@%d", len(b.Changes), b.Checkpoint))
	}
	if want := "[2 changes@5 2 changes@5 1 changes@100]"; fmt.Sprint(got) != want {
		t.Errorf("batches = %v, want %s", got, want)
	}
}

// MaxWait is measured on the pipeline's clock: a lone change waits for its batch to fill
// until MaxWait passes, and is written then.
func TestALoneChangeIsWrittenWhenMaxWaitPassesOnTheClock(t *testing.T) {
	s := newMemSink("pg")
	clk := clocktesting.NewFakeClock(time.Now())
	done := make(chan struct{})
	p := newP(Options{MaxWait: time.Second, Clock: clk}, []Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer {
		return &script{done: done, events: func(change.RV) []change.Event {
			return []change.Event{watched(change.OpCreate, obj("a", "u", 6))}
		}}
	}}})
	stop := startRun(p)
	<-done
	waitFor(t, clk.HasWaiters) // the cursor holds the change and waits on the clock
	if log, _ := s.snapshot(); len(log) != 0 {
		t.Fatalf("written before MaxWait passed: %v", log)
	}
	clk.Step(time.Second)
	waitFor(t, func() bool { log, _ := s.snapshot(); return len(log) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A retryable write failure is retried after a backoff measured on the pipeline's clock.
func TestAFailedWriteIsRetriedAfterABackoffOnTheClock(t *testing.T) {
	s := &flakySink{memSink: newMemSink("pg"), failures: 1}
	clk := clocktesting.NewFakeClock(time.Now())
	done := make(chan struct{})
	p := newP(Options{BatchSize: 1, Clock: clk, Backoff: retry.Backoff{Initial: time.Hour, Max: time.Hour}}, []Sink{s},
		[]Fixture{{Resource: cms, NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{watched(change.OpCreate, obj("a", "u", 6))}
			}}
		}}})
	stop := startRun(p)
	<-done
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.failures == 0 })
	waitFor(t, clk.HasWaiters) // the retry waits on the clock, not in real time
	if log, _ := s.snapshot(); len(log) != 0 {
		t.Fatalf("retried before the backoff passed: %v", log)
	}
	clk.Step(time.Hour)
	waitFor(t, func() bool { log, _ := s.snapshot(); return len(log) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// flakySink fails its first `failures` writes with a retryable error.
type flakySink struct {
	*memSink
	failures int
}

func (s *flakySink) Write(ctx context.Context, b change.Batch) error {
	s.mu.Lock()
	if s.failures > 0 {
		s.failures--
		s.mu.Unlock()
		return errors.New("connection reset")
	}
	s.mu.Unlock()
	return s.memSink.Write(ctx, b)
}

func TestTheReconcileDiffTombstonesOnlyWhatTheLookupSaysIsGoneOrOutOfScope(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(fmt.Sprintf("lookup fails %v", failing), func(t *testing.T) {
			s := newMemSink("pg")
			for i, n := range []string{"gone", "out", "elsewhere"} {
				s.objects[change.Key{Namespace: "ns", Name: n}] = change.Entry{UID: "u-" + n, RV: change.RV(10 + i)}
			}
			done := make(chan struct{})
			var asked []string
			p := newP(Options{MaxWait: time.Millisecond, Backoff: retry.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}, []Sink{s}, []Fixture{{
				Resource: cms,
				Lookup: func(_ context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
					for k := range held {
						asked = append(asked, k.Name)
					}
					if failing {
						return nil, errors.New("apiserver unavailable")
					}
					return map[change.Key]change.Presence{{Namespace: "ns", Name: "gone"}: {},
						{Namespace: "ns", Name: "out"}:       {UID: "u-out"},
						{Namespace: "ns", Name: "elsewhere"}: {UID: "u-elsewhere", InScope: true}}, nil
				},
				NewStream: func() Streamer {
					return &script{done: done, events: func(change.RV) []change.Event {
						return []change.Event{{Type: change.RelistBegin}, {Type: change.RelistEnd, RV: 20}}
					}}
				},
			}})
			stop := startRun(p)
			<-done
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			log, ck := s.snapshot()
			got := map[string]string{}
			for _, c := range log {
				if c.Op != change.OpDelete || !c.Inferred || c.RV != 20 {
					t.Errorf("change %+v, want an inferred delete at the LIST's RV", c)
				}
				got[c.Key.Name] = c.Reason
			}
			want := map[string]string{"gone": change.ReasonGone, "out": change.ReasonOutOfScope}
			if failing {
				want = map[string]string{}
			}
			if !maps.Equal(got, want) {
				t.Errorf("tombstones %v, want %v", got, want)
			}
			if ck != 20 {
				t.Errorf("checkpoint %v, want the LIST's 20", ck)
			}
			slices.Sort(asked)
			if !failing && !slices.Equal(asked, []string{"elsewhere", "gone", "out"}) {
				t.Errorf("looked up %v, want every held key the LIST lacked", asked)
			}
		})
	}
}

// startRun runs p until the returned stop is called; stop returns Run's error.
func startRun(p *Pipeline) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	return func() error {
		cancel()
		return <-errc
	}
}
