package deliver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// scriptedStore answers ExactActors from a script of answers, one a read, repeating the
// last; it counts the reads.
type scriptedStore struct {
	mu      sync.Mutex
	answers [][]*change.Actor
	err     error
	reads   int
}

func (s *scriptedStore) ExactActors(_ context.Context, b change.Batch) ([]*change.Actor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	a := s.answers[min(s.reads, len(s.answers))-1]
	if len(a) != len(b.Changes) {
		panic("the script's answer does not fit the batch")
	}
	return a, nil
}

func (s *scriptedStore) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func batchOf(cs ...change.Change) change.Batch {
	return change.Batch{Resource: change.Resource{Resource: "configmaps", Version: "v1", Kind: "ConfigMap"}, Changes: cs}
}

type lookupResult struct {
	actors []*change.Actor
	err    error
}

// startLookup runs l.Actors(b) in the background.
func startLookup(l *Lookup, b change.Batch) <-chan lookupResult {
	done := make(chan lookupResult, 1)
	go func() {
		a, err := l.Actors(context.Background(), b)
		done <- lookupResult{a, err}
	}()
	return done
}

// stepWhenWaiting steps clk by d once the lookup waits on it, failing the test when it
// neither waits nor returns within 10 s.
func stepWhenWaiting(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, done <-chan lookupResult) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		select {
		case r := <-done:
			t.Fatalf("the lookup returned %v, %v instead of waiting", r.actors, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the lookup did not wait on the clock within 10 s")
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded by the deadline above
	}
	clk.Step(d)
}

func result(t *testing.T, done <-chan lookupResult) lookupResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup did not return within 10 s")
		return lookupResult{}
	}
}

func TestLookupWaitsForAnActorWhoseEventArrivesAfterTheChange(t *testing.T) {
	alice := &change.Actor{Username: "alice", Match: change.MatchExact}
	store := &scriptedStore{answers: [][]*change.Actor{{nil}, {nil}, {alice}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &Lookup{Store: store, Wait: time.Second, Poll: 100 * time.Millisecond, Clock: clk}
	done := startLookup(l, batchOf(change.Change{Op: change.OpUpdate, RV: 7}))
	stepWhenWaiting(t, clk, 100*time.Millisecond, done)
	stepWhenWaiting(t, clk, 100*time.Millisecond, done)
	r := result(t, done)
	if r.err != nil || len(r.actors) != 1 || r.actors[0] != alice {
		t.Fatalf("Actors = %v, %v; want alice, found at the third read", r.actors, r.err)
	}
	if n := store.readCount(); n != 3 {
		t.Errorf("the store was read %d times, want 3 (two misses, then alice)", n)
	}
}

func TestLookupGivesUpAtTheWaitAndReturnsWhatItFound(t *testing.T) {
	bob := &change.Actor{Username: "bob", Match: change.MatchExact}
	// The second change's event never comes.
	store := &scriptedStore{answers: [][]*change.Actor{{bob, nil}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &Lookup{Store: store, Wait: 250 * time.Millisecond, Poll: 100 * time.Millisecond, Clock: clk}
	done := startLookup(l, batchOf(change.Change{Op: change.OpCreate, RV: 1}, change.Change{Op: change.OpUpdate, RV: 2}))
	// 100 ms, 100 ms, then the last 50 ms: never past the deadline.
	for _, d := range []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond} {
		stepWhenWaiting(t, clk, d, done)
	}
	r := result(t, done)
	if r.err != nil || len(r.actors) != 2 || r.actors[0] != bob || r.actors[1] != nil {
		t.Fatalf("Actors = %v, %v; want [bob <nil>] once the wait is over", r.actors, r.err)
	}
	if n := store.readCount(); n != 4 {
		t.Errorf("the store was read %d times in a wait of 250 ms polled every 100 ms, want 4 (at 0, 100, 200, 250 ms)", n)
	}
}

func TestLookupDoesNotWaitForSnapshotsOrInferredDeletes(t *testing.T) {
	store := &scriptedStore{answers: [][]*change.Actor{{nil, nil}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &Lookup{Store: store, Wait: time.Hour, Clock: clk}
	r := result(t, startLookup(l, batchOf(
		change.Change{Op: change.OpCreate, RV: 1, Snapshot: true},
		change.Change{Op: change.OpDelete, RV: 2, Inferred: true, Reason: change.ReasonGone})))
	if r.err != nil || len(r.actors) != 2 || r.actors[0] != nil || r.actors[1] != nil {
		t.Fatalf("Actors = %v, %v; want two unknown actors at once", r.actors, r.err)
	}
	if n := store.readCount(); n != 1 {
		t.Errorf("the store was read %d times, want 1: a snapshot and an inferred delete have no event to wait for", n)
	}
}

func TestLookupReturnsTheStoresErrorAndNoActors(t *testing.T) {
	boom := errors.New("connection refused")
	l := &Lookup{Store: &scriptedStore{err: boom}, Wait: time.Hour, Clock: clocktesting.NewFakeClock(time.Now())}
	a, err := l.Actors(context.Background(), batchOf(change.Change{Op: change.OpUpdate, RV: 1}))
	if !errors.Is(err, boom) || a != nil {
		t.Fatalf("Actors = %v, %v; want nil, %v", a, err, boom)
	}
}

func TestLookupStopsWaitingWhenTheContextEnds(t *testing.T) {
	store := &scriptedStore{answers: [][]*change.Actor{{nil}}}
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan lookupResult, 1)
	go func() {
		a, err := (&Lookup{Store: store, Wait: time.Hour, Clock: clk}).Actors(ctx, batchOf(change.Change{Op: change.OpUpdate, RV: 1}))
		done <- lookupResult{a, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a condition, bounded by the deadline
	}
	cancel()
	r := result(t, done)
	if r.err != nil || len(r.actors) != 1 || r.actors[0] != nil {
		t.Fatalf("Actors = %v, %v; want [<nil>] and no error once ctx ends", r.actors, r.err)
	}
}
