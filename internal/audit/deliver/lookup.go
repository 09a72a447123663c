package deliver

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ExactStore is the audit store as Lookup reads it: the actors audit events name exactly,
// one entry per change of b, nil where none is stored yet.
type ExactStore interface {
	ExactActors(ctx context.Context, b change.Batch) ([]*change.Actor, error)
}

// DefaultPoll is how often Lookup asks the store again while it waits.
const DefaultPoll = 50 * time.Millisecond

// Lookup finds the exact actors of a batch (envelope.Actors), waiting for late events.
type Lookup struct {
	Store ExactStore
	Wait  time.Duration // audit.wait: how long a batch may wait for its actors; 0: not at all
	Poll  time.Duration // between reads while waiting; 0: DefaultPoll
	Clock clock.Clock   // nil: the real clock
}

// Actors returns the actors of b's changes, one entry per change, nil where none is
// known: it reads the store until every change that can have an event (neither a
// snapshot nor an inferred delete) has its actor, Wait has passed, or ctx ends.
func (l *Lookup) Actors(ctx context.Context, b change.Batch) ([]*change.Actor, error) {
	clk := l.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	poll := l.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	deadline := clk.Now().Add(l.Wait)
	for {
		found, err := l.Store.ExactActors(ctx, b)
		if err != nil {
			return nil, err
		}
		left := deadline.Sub(clk.Now())
		if !awaited(b, found) || left <= 0 {
			return found, nil
		}
		select {
		case <-ctx.Done():
			return found, nil
		case <-clk.After(min(poll, left)):
		}
	}
}

// awaited says whether a change of b that can have an audit event has no actor in found.
func awaited(b change.Batch, found []*change.Actor) bool {
	for i, a := range found {
		if c := &b.Changes[i]; a == nil && !c.Snapshot && !c.Inferred {
			return true
		}
	}
	return false
}
