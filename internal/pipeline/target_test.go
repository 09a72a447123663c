package pipeline

import (
	"context"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Streamer is a scripted stream of a Fixture: what Target.Stream runs.
type Streamer interface {
	Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error
}

// Fixture is a test's Target: its answers are the funcs it holds, and a nil func answers
// as for a resource configured once, without selectors (every key owned, every key the
// LIST lacks gone, nothing read from the cluster). A Streamer that has a
// NotifyAccepted(func()) method is told the accepted callback before it runs.
type Fixture struct {
	Resource  change.Resource
	NewStream func() Streamer
	Owns      func(change.Key) bool
	Lookup    func(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error)
	Sweeps    bool
	Resolve   func(ctx context.Context) (change.Resource, error)
	Current   func(ctx context.Context, k change.Key) (change.Entry, bool, error)
	ServerRV  func(ctx context.Context) (change.RV, error)
	Resync    time.Duration
}

// Target is f as a Target.
func (f Fixture) Target() Target { return fixtureTarget{f} }

// Targets are fs as Targets.
func Targets(fs ...Fixture) []Target {
	out := make([]Target, len(fs))
	for i, f := range fs {
		out[i] = f.Target()
	}
	return out
}

// newP is New with its targets given as fixtures.
func newP(opts Options, sinks []Sink, fs []Fixture) *Pipeline {
	return New(opts, sinks, Targets(fs...))
}

type fixtureTarget struct{ f Fixture }

func (t fixtureTarget) Resource() change.Resource { return t.f.Resource }

func (t fixtureTarget) Resolve(ctx context.Context) (change.Resource, error) {
	if t.f.Resolve == nil {
		return t.f.Resource, nil
	}
	return t.f.Resolve(ctx)
}

func (t fixtureTarget) Stream(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error, accepted func()) error {
	s := t.f.NewStream()
	if n, ok := s.(interface{ NotifyAccepted(func()) }); ok {
		n.NotifyAccepted(accepted)
	}
	return s.Run(ctx, from, emit)
}

func (t fixtureTarget) Owns(k change.Key) bool { return t.f.Owns == nil || t.f.Owns(k) }

func (t fixtureTarget) Sweeps() bool { return t.f.Sweeps }

func (t fixtureTarget) Lookup(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	if t.f.Lookup == nil {
		return nil, nil
	}
	return t.f.Lookup(ctx, held)
}

func (t fixtureTarget) Current(ctx context.Context, k change.Key) (change.Entry, bool, error) {
	if t.f.Current == nil {
		return change.Entry{}, false, nil
	}
	return t.f.Current(ctx, k)
}

func (t fixtureTarget) ServerRV(ctx context.Context) (change.RV, error) {
	if t.f.ServerRV == nil {
		return 0, nil
	}
	return t.f.ServerRV(ctx)
}

func (t fixtureTarget) Resync() time.Duration { return t.f.Resync }
