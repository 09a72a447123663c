package integration

import (
	"context"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// streamer is a stream of a fixture: what Target.Stream runs (a *source.Stream here).
type streamer interface {
	Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error
}

// fixture is a test's pipeline.Target, as internal/pipeline's own tests have it
// (pipeline.Fixture lives in its test files, out of reach from here): its answers are the
// funcs it holds, and a nil func answers as for a resource configured once, without
// selectors (every key owned, every key the LIST lacks gone, nothing read from the
// cluster). A streamer that has a NotifyAccepted(func()) method is told the accepted
// callback before it runs. The daemon's targets are source.Feeds, which look up keys
// across the scopes of a resource.
type fixture struct {
	Resource  change.Resource
	NewStream func() streamer
	Owns      func(change.Key) bool
	Lookup    func(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error)
	Sweeps    bool
}

// Target is f as a pipeline.Target.
func (f fixture) Target() pipeline.Target { return fixtureTarget{f} }

// asTargets are fs as pipeline.Targets.
func asTargets(fs ...fixture) []pipeline.Target {
	out := make([]pipeline.Target, len(fs))
	for i, f := range fs {
		out[i] = f.Target()
	}
	return out
}

// targetOf is a pipeline.Target that streams one source.Target alone: the keys in its
// namespaces are its own, every key a relist lacks is gone (no lookup), and nothing is
// probed for time travel.
func targetOf(t source.Target, newStream func() *source.Stream) pipeline.Target {
	return fixture{Resource: t.Resource, Owns: t.Owns(), NewStream: func() streamer { return newStream() }}.Target()
}

type fixtureTarget struct{ f fixture }

func (t fixtureTarget) Resource() change.Resource { return t.f.Resource }

func (t fixtureTarget) Resolve(context.Context) (change.Resource, error) { return t.f.Resource, nil }

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

func (t fixtureTarget) Current(context.Context, change.Key) (change.Entry, bool, error) {
	return change.Entry{}, false, nil
}

func (t fixtureTarget) ServerRV(context.Context) (change.RV, error) { return 0, nil }

func (t fixtureTarget) Resync() time.Duration { return 0 }
