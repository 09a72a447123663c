package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
	batches int
	block   chan struct{} // while non-nil and open, Write blocks
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
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
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

// script is a Streamer that emits fixed events, then waits for ctx.
type script struct {
	events func(from change.RV) []change.Event
	done   chan struct{}
}

func (s *script) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	for _, ev := range s.events(from) {
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
	done := make(chan struct{})
	p := New(Options{MaxWait: time.Millisecond}, sinks, []Target{{Resource: cms, NewStream: func() Streamer {
		return &script{events: events, done: done}
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	<-done
	cancel()
	if err := <-errc; err != nil {
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
		got[c.Key.Name] = fmt.Sprintf("%s inferred=%v snapshot=%v rv=%d", c.Op, c.Inferred, c.Snapshot, c.RV)
	}
	want := map[string]string{
		"changed":   "update inferred=false snapshot=true rv=20",
		"recreated": "create inferred=false snapshot=true rv=21",
		"fresh":     "create inferred=false snapshot=true rv=22",
		"gone":      "delete inferred=true snapshot=false rv=30",
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
	p := New(Options{MaxWait: time.Millisecond, Buffer: 4, DetachAfter: 20 * time.Millisecond, BatchSize: 5},
		[]Sink{fast, slow}, []Target{{Resource: cms, NewStream: func() Streamer {
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
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	waitFor(t, func() bool { l, _ := fast.snapshot(); return len(l) == n })
	close(slow.block) // the broker is back
	waitFor(t, func() bool { _, ck := slow.snapshot(); return ck == n })
	close(done)
	cancel()
	if err := <-errc; err != nil {
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
	p := New(Options{MaxWait: time.Millisecond}, []Sink{s}, []Target{{Resource: cms, NewStream: func() Streamer {
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
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
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
	p := New(Options{MaxWait: time.Millisecond}, []Sink{s}, []Target{{
		Resource: cms,
		Owns:     func(k change.Key) bool { return k.Namespace == "ns" },
		NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{{Type: change.RelistBegin}, {Type: change.RelistEnd, RV: 20}}
			}}
		},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	<-done
	cancel()
	if err := <-errc; err != nil {
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
	errLost := errors.New("lost the lease")
	done := make(chan struct{})
	p := New(Options{MaxWait: time.Millisecond, FlushTimeout: time.Minute,
		Abandon: func(cause error) bool { return errors.Is(cause, errLost) }},
		[]Sink{s}, []Target{{Resource: cms, NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{watched(change.OpCreate, obj("a", "u", 6)), watched(change.OpCreate, obj("b", "u", 7))}
			}}
		}}})
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	<-done
	time.Sleep(20 * time.Millisecond) // let the first batch reach the hanging Write
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
