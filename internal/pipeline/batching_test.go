package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// batchSizes lists the changes per written batch, with each batch's checkpoint.
func batchSizes(s *memSink) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batches {
		out = append(out, fmt.Sprintf("%d@%d", len(b.Changes), b.Checkpoint))
	}
	return fmt.Sprint(out)
}

// At the default settings a change that reaches an idle sink (no write in flight, nothing
// queued behind it) is written at once: it does not wait on the clock for company. The
// fake clock never moves here, so any wait for MaxWait would never end.
func TestAnIdleSinkWritesALoneChangeAtOnceWithoutWaitingForItsBatchToFill(t *testing.T) {
	s := newMemSink("pg")
	clk := clocktesting.NewFakeClock(time.Now())
	done := make(chan struct{})
	p := newP(Options{Clock: clk}, []Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer {
		return &script{done: done, events: func(change.RV) []change.Event {
			return []change.Event{watched(change.OpCreate, obj("a", "u", 6))}
		}}
	}}})
	stop := startRun(p)
	<-done
	waitFor(t, func() bool { log, ckpt := s.snapshot(); return len(log) == 1 && ckpt == 6 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := batchSizes(s), "[1@6]"; got != want {
		t.Errorf("batches = %s, want %s", got, want)
	}
}

// Under load the changes that arrive while a write is in flight are grouped (group
// commit): they wait in the cursor's queue during the write, and go out as one batch as
// soon as that write completes, not one write each, and again without waiting on the
// clock. The cursor is driven directly through its queue, buffered as the pipeline's.
func TestChangesArrivingWhileAWriteIsInFlightAreWrittenAsOneBatchWhenItCompletes(t *testing.T) {
	s, q, unblock, errc := blockedCursor(t, DefaultBuffer)
	send := func(ev change.Event) {
		t.Helper()
		select {
		case q <- ev:
		case <-time.After(10 * time.Second):
			t.Fatalf("could not queue %s@%d within 10s", ev.Change.Key.Name, ev.Change.RV)
		}
	}
	send(watched(change.OpCreate, obj("a", "u1", 6)))
	select { // the lone first change is written at once, and its write blocks
	case <-s.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the first change was not written within 10s")
	}
	send(watched(change.OpCreate, obj("b", "u2", 7)))
	send(watched(change.OpUpdate, obj("a", "u1", 8)))
	send(watched(change.OpCreate, obj("c", "u3", 9)))
	unblock()
	waitFor(t, func() bool { log, ckpt := s.snapshot(); return len(log) == 4 && ckpt == 9 })
	close(q)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got, want := batchSizes(s), "[1@6 3@9]"; got != want {
		t.Errorf("batches = %s, want %s: one for the lone change, one for all that came during its write", got, want)
	}
	log, _ := s.snapshot()
	var order []string
	for _, ch := range log {
		order = append(order, fmt.Sprintf("%s@%d", ch.Key.Name, ch.RV))
	}
	if got, want := fmt.Sprint(order), "[a@6 b@7 a@8 c@9]"; got != want {
		t.Errorf("written %s, want watch order %s", got, want)
	}
}

// A relist's first batch goes to the idle sink after a LIST page's worth of changes, not
// when it is full, so the sink's writes start while the LIST goes on; the changes listed
// during that write form the next batch, however many.
func TestARelistsFirstBatchGoesToTheIdleSinkAfterAPageAndTheNextGrowWhileItWrites(t *testing.T) {
	s, q, unblock, errc := blockedCursor(t, 4*relistEagerBatch)
	const listed = 3 * relistEagerBatch
	q <- change.Event{Type: change.RelistBegin}
	for i := range listed {
		q <- listedAt(100, obj(fmt.Sprintf("cm-%04d", i), fmt.Sprintf("u%d", i), change.RV(10+i)))
		if i == relistEagerBatch-1 {
			select { // the first write starts with one page's worth, and blocks
			case <-s.writing:
			case <-time.After(10 * time.Second):
				t.Fatal("no write started after a page's worth of listed objects")
			}
		}
	}
	q <- change.Event{Type: change.RelistEnd, RV: 100}
	// The cursor has taken every event (it waits for the first write to flush at
	// RelistEnd) before that write ends: the rest is one batch.
	waitFor(t, func() bool { return len(q) == 0 })
	unblock()
	waitFor(t, func() bool { log, ckpt := s.snapshot(); return len(log) == listed && ckpt == 100 })
	close(q)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got, want := batchSizes(s), fmt.Sprintf("[%d@0 %d@100]", relistEagerBatch, listed-relistEagerBatch); got != want {
		t.Errorf("batches = %s, want %s: a page's worth at once, then all listed during its write", got, want)
	}
}

// blockedCursor runs a cursor of cms on a memSink whose writes block until unblock (each
// write's start is signalled on s.writing), fed through a queue of the given capacity
// as the pipeline feeds it; the run's result comes on errc. The fake clock never moves.
func blockedCursor(t *testing.T, buffer int) (s *memSink, q chan change.Event, unblock func(), errc chan error) {
	t.Helper()
	s = newMemSink("pg")
	s.block = make(chan struct{})
	s.writing = make(chan struct{}, 8)
	unblock = sync.OnceFunc(func() { close(s.block) })
	clk := clocktesting.NewFakeClock(time.Now())
	p := newP(Options{Clock: clk}, []Sink{s}, []Fixture{{Resource: cms}})
	ctx, cancel := context.WithCancel(context.Background())
	c := newCursor(p, s, Fixture{Resource: cms}.Target(), cms, 0, ctx)
	q = make(chan change.Event, buffer)
	errc = make(chan error, 1)
	go func() { errc <- c.run(q) }()
	t.Cleanup(func() {
		unblock()
		cancel()
	})
	return s, q, unblock, errc
}
