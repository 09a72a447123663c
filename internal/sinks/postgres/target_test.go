package postgres

import (
	"context"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// streamTarget is a pipeline.Target that streams one source.Target alone, as these tests
// always have: the keys in its namespaces are its own, every key a relist lacks is gone
// (no lookup), and nothing is probed for time travel. The daemon's targets are
// source.Feeds, which look up keys across the scopes of a resource.
type streamTarget struct {
	t         source.Target
	newStream func() *source.Stream
}

func targetOf(t source.Target, newStream func() *source.Stream) pipeline.Target {
	return streamTarget{t: t, newStream: newStream}
}

func (s streamTarget) Resource() change.Resource { return s.t.Resource }

func (s streamTarget) Resolve(context.Context) (change.Resource, error) { return s.t.Resource, nil }

func (s streamTarget) Stream(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error, accepted func()) error {
	st := s.newStream()
	st.NotifyAccepted(accepted)
	return st.Run(ctx, from, emit)
}

func (s streamTarget) Owns(k change.Key) bool {
	owns := s.t.Owns()
	return owns == nil || owns(k)
}

func (s streamTarget) Sweeps() bool { return false }

func (s streamTarget) Lookup(context.Context, map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	return nil, nil
}

func (s streamTarget) Current(context.Context, change.Key) (change.Entry, bool, error) {
	return change.Entry{}, false, nil
}

func (s streamTarget) ServerRV(context.Context) (change.RV, error) { return 0, nil }

func (s streamTarget) Resync() time.Duration { return 0 }
