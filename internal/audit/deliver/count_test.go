package deliver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/audit"
)

type statsStore struct {
	mu     sync.Mutex
	since  []time.Time
	failed bool // the first count fails
}

func (s *statsStore) JoinStats(_ context.Context, since time.Time) (audit.JoinStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = append(s.since, since)
	if s.failed && len(s.since) == 1 {
		return audit.JoinStats{}, errors.New("connection refused")
	}
	return audit.JoinStats{Events: int64(len(s.since)), Changes: 10, Exact: 7, Nearest: 2, UnmatchedChanges: 1, UnmatchedEvents: 3}, nil
}

func (s *statsStore) counted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.since)
}

type joinObserver struct{ counts chan map[string]int64 }

func (o joinObserver) AuditJoin(c map[string]int64) { o.counts <- c }

func TestJoinCounterCountsTheWindowAtOnceThenEveryIntervalAndOutlivesAFailedCount(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	store := &statsStore{failed: true}
	obs := joinObserver{make(chan map[string]int64, 4)}
	j := &JoinCounter{Store: store, Interval: time.Minute, Window: 5 * time.Minute, Observer: obs, Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { j.Run(ctx); close(stopped) }()

	// The first count fails (logged, nothing observed); the next tick counts again.
	for tick := 1; tick <= 2; tick++ {
		// Step only once the count before has been made, so each is at a known time.
		deadline := time.Now().Add(10 * time.Second)
		for store.counted() < tick && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling a condition, bounded by the deadline
		}
		clk.Step(time.Minute)
		select {
		case c := <-obs.counts:
			want := map[string]int64{"events": int64(tick + 1), "changes": 10, "exact": 7, "nearest": 2, "unmatched_changes": 1, "unmatched_events": 3}
			for k, v := range want {
				if c[k] != v {
					t.Errorf("tick %d: %s = %d, want %d (%v)", tick, k, c[k], v, c)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tick %d: no counts within 10 s", tick)
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of ctx ending")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	for i, since := range store.since {
		if want := t0.Add(time.Duration(i)*time.Minute - 5*time.Minute); !since.Equal(want) {
			t.Errorf("count %d over the window since %v, want %v (now − Window)", i, since, want)
		}
	}
}
