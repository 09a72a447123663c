package source

import (
	"context"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Feed is one target of a Resolution as the pipeline streams it: it implements
// pipeline.Target (declared there, by its consumer). Every answer reads the target as
// resolved at the time of the call, so after a CRD was recreated with another version,
// streams, lookups and probes read through the version served now.
type Feed struct {
	r      *Resolution
	i      int
	stream Stream // the template of its streams
	start  Target // as resolved at start
	owns   func(change.Key) bool
	sweeps bool
}

// Feeds returns the Feed of every target, in order. Each stream of a target is a copy
// of stream (its Clients, PageSize, Transform, Log, …) with its defaults filled
// (Stream.withDefaults) and the target and the Scopes of its resource as resolved when
// it starts.
func (r *Resolution) Feeds(stream Stream) []*Feed {
	out := make([]*Feed, len(r.targets))
	for i := range out {
		// Which keys a target examines and whether it sweeps depend on the namespaces of
		// its resource's targets, which a resolution anew does not change.
		t, s := r.target(i)
		out[i] = &Feed{r: r, i: i, stream: stream.withDefaults(), start: t, owns: s.Owns(t), sweeps: s.Sweeps(t)}
	}
	return out
}

// Target returns the target as resolved now and the Scopes of its resource: what a
// stream of it reads.
func (f *Feed) Target() (Target, *Scopes) { return f.r.target(f.i) }

// Resource is the target's resource as resolved at start.
func (f *Feed) Resource() change.Resource { return f.start.Resource }

// Resolve is the resource as the server serves it now (see Resolution).
func (f *Feed) Resolve(ctx context.Context) (change.Resource, error) { return f.r.resolve(ctx, f.i) }

// Stream runs a new stream of the target as resolved now (a copy of the Feeds
// template), from RV from, calling accepted each time the apiserver accepts one of its
// watches (Stream.NotifyAccepted).
func (f *Feed) Stream(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error, accepted func()) error {
	s := f.stream
	s.Target, s.Scopes = f.r.target(f.i)
	s.NotifyAccepted(accepted)
	return s.Run(ctx, from, emit)
}

// Owns is Scopes.Owns of the target: nil there means every key.
func (f *Feed) Owns(k change.Key) bool { return f.owns == nil || f.owns(k) }

// Sweeps is Scopes.Sweeps of the target.
func (f *Feed) Sweeps() bool { return f.sweeps }

// Lookup is Scopes.Lookup of the target's resource as resolved now.
func (f *Feed) Lookup(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	t, s := f.r.target(f.i)
	return s.Lookup(ctx, t, held)
}

// Current is Scopes.Current of the target's resource as resolved now.
func (f *Feed) Current(ctx context.Context, k change.Key) (change.Entry, bool, error) {
	_, s := f.r.target(f.i)
	return s.Current(ctx, k)
}

// ServerRV is the server's resource version as the target reads it now (serverRV).
func (f *Feed) ServerRV(ctx context.Context) (change.RV, error) {
	t, _ := f.r.target(f.i)
	ns := ""
	if len(t.Namespaces) == 1 {
		ns = t.Namespaces[0]
	}
	return serverRV(ctx, f.r.clients, t, ns, f.r.log)
}

// Resync is the target's Spec.Resync.
func (f *Feed) Resync() time.Duration { return f.start.Resync }
