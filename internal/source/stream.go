package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Observer is told about the stream's own events, for metrics. Nil-safe callers pass nil.
type Observer interface {
	Relist(resource string)
	Gone(resource string)
	WatchRestart(resource string)
}

// Stream lists and watches one Target.
type Stream struct {
	Clients *Clients
	Target  Target
	// Scopes are every target of the resource (GroupScopes). With them, a watch under a
	// selector tells an object that left this scope for another (nothing to write), one
	// that left every scope (an inferred delete, ReasonOutOfScope) and one deleted from the
	// cluster. Nil: every DELETED event is a delete.
	Scopes    *Scopes
	PageSize  int64 // LIST page size; default DefaultPageSize
	Transform *Transform
	// Backoff spaces retries of failed relists and watches. Its delays are waited on
	// Clock: Backoff.Clock is not used here.
	Backoff  retry.Backoff
	Log      *slog.Logger
	Observer Observer
	// Clock stamps changes' ObservedAt and times every backoff wait; default the real
	// clock. Tests pass a fake one (k8s.io/utils/clock/testing) to step through backoffs.
	Clock clock.Clock
	// WatchTimeout is the timeoutSeconds of each watch request: the apiserver ends the
	// watch cleanly after it, and the stream re-watches from the last RV. Default: a random
	// 5–10 minutes per watch, as client-go's reflector does, so connections recycle.
	WatchTimeout time.Duration
	// ListMode says how relists read the collection (watchlist.go): ListAuto, ListStream
	// or ListPaged. Zero: ListPaged. The daemon's default is ListAuto.
	ListMode ListMode
	// ListModes remembers what ListAuto found per resource, shared by every stream of the
	// process; nil: each stream finds out again at its first relist.
	ListModes *ListModes
	// RelistJitter spreads the relists after 410 Gone (or a time travel): the stream
	// waits a random delay in [0, RelistJitter) on Clock first, so that resources that
	// lose their history together (an apiserver restart) do not all LIST at once. Zero:
	// no wait.
	RelistJitter time.Duration

	typ      objectType // the Target's, set by Run
	reason   string     // why the next relist happens (Relist… in progress.go)
	accepted func()     // see NotifyAccepted
}

// DefaultPageSize is Stream.PageSize's default: the LIST page size.
const DefaultPageSize = 500

// withDefaults fills Stream's defaults (PageSize, Clock, Transform): the one place that
// does. Resolution.Feeds fills its template with it; Run runs on a filled copy, so a
// Stream built by hand works too and is left as it was built.
func (s Stream) withDefaults() Stream {
	if s.PageSize <= 0 {
		s.PageSize = DefaultPageSize
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Transform == nil {
		s.Transform = &Transform{}
	}
	return s
}

// NotifyAccepted has the stream call f each time the apiserver accepts one of its
// watches, from any goroutine: a resource that was degraded is known to stream again
// even when nothing changes in it (a LIST tells by its events). Feed.Stream passes the
// pipeline's callback (pipeline.Target.Stream); call it before Run.
func (s *Stream) NotifyAccepted(f func()) { s.accepted = f }

func (s *Stream) accept() {
	if s.accepted != nil {
		s.accepted()
	}
}

// Run emits events from `from` on: a watch from that RV when it is non-zero, a relist
// first when it is zero or the server no longer has that history. It returns when ctx
// ends (nil), when emit fails, or on an error it does not retry, marked retry.Terminal:
// a Fault of the resource (Forbidden, Unauthorized, not served, a resourceVersion that is
// no integer), which time may heal and the pipeline retries later, or a configuration
// error (a Secret resource to redact without a digest key).
func (s *Stream) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	run := s.withDefaults()
	return run.run(ctx, from, emit)
}

// run is Run on a Stream whose defaults are filled.
func (s *Stream) run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	id := s.Target.Resource.ID()
	if s.Target.Waiting {
		return fault(s.Target.Resource, ReasonNotServed, fmt.Errorf("resource %s: the server does not serve it (yet)", id))
	}
	s.typ = typeOf(s.Target.Resource)
	if err := s.Transform.check(s.typ); err != nil {
		return retry.Terminal(fmt.Errorf("resource %s: %w", id, err))
	}
	log := s.Log.With("resource", id)
	rv := from
	failures := 0
	s.reason = RelistStart
	for ctx.Err() == nil {
		if rv == 0 {
			s.observe(func(o Observer) { o.Relist(id) })
			listRV, err := s.relist(ctx, emit)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if retry.IsTerminal(err) || errors.Is(err, errEmit) {
					return invalidRVFault(s.Target.Resource, err)
				}
				d := s.Backoff.Delay(failures)
				failures++
				log.Warn("relist failed; retrying", "in", d.Round(time.Millisecond).String(), "error", err)
				s.sleep(ctx, d)
				continue
			}
			failures = 0
			rv = listRV
			log.Info("relisted", "resourceVersion", rv.String())
		}
		next, err := s.watch(ctx, rv, emit)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, new(*errBehind)):
			// The cursors see the LIST below their checkpoints and start a new epoch.
			d := s.jitter()
			log.Warn("the server is behind this stream's resource version (time travel: an etcd restore, "+
				"or a cluster rebuilt under the same name); relisting", "in", d.Round(time.Millisecond).String(), "error", err)
			if d > 0 {
				s.sleep(ctx, d)
			}
			rv, s.reason = 0, RelistTimeTravel
		case errors.Is(err, errGone):
			s.observe(func(o Observer) { o.Gone(id) })
			d := s.jitter()
			log.Info("watch history expired (410 Gone); relisting", "in", d.Round(time.Millisecond).String(), "resourceVersion", next.String())
			if d > 0 {
				s.sleep(ctx, d)
			}
			rv, s.reason = 0, RelistGone
		case retry.IsTerminal(err) || errors.Is(err, errEmit):
			return err
		case err != nil:
			// Anything else the watch reports heals by itself: watch again from where it
			// stopped, after a backoff.
			d := s.Backoff.Delay(failures)
			failures++
			log.Warn("watch failed; retrying", "in", d.Round(time.Millisecond).String(), "error", err)
			s.sleep(ctx, d)
			rv = next
		default:
			failures = 0
			rv = next
		}
	}
	return nil
}

func (s *Stream) observe(f func(Observer)) {
	if s.Observer != nil {
		f(s.Observer)
	}
}

// namespace is the namespace to LIST and WATCH through: one configured namespace is
// listed through its namespaced path (so namespaced RBAC suffices). Resolve gives every
// configured namespace a target of its own; a Target built by hand with several is read
// cluster-wide and filtered here.
func (s *Stream) namespace() string {
	if len(s.Target.Namespaces) == 1 {
		return s.Target.Namespaces[0]
	}
	return ""
}

func (s *Stream) wanted(ns string) bool {
	return len(s.Target.Namespaces) <= 1 || slices.Contains(s.Target.Namespaces, ns)
}

// toChange reads and transforms one object. The Op is left for the caller.
func (s *Stream) toChange(data []byte, now time.Time) (change.Change, error) {
	res := s.Target.Resource
	obj, m, err := s.Transform.apply(data, s.typ)
	if err != nil {
		err = fmt.Errorf("resource %s: transform %s/%s: %w", res.ID(), m.namespace, m.name, err)
		if errors.Is(err, errNoDigestKey) {
			err = retry.Terminal(err)
		}
		return change.Change{}, err
	}
	rv, err := change.ParseRV(m.rv)
	if err != nil {
		return change.Change{}, fault(res, ReasonInvalidRV, fmt.Errorf("resource %s: object %s/%s: %w", res.ID(), m.namespace, m.name, err))
	}
	return change.Change{
		Resource:   res,
		Key:        change.Key{Namespace: m.namespace, Name: m.name},
		UID:        m.uid,
		RV:         rv,
		Object:     obj,
		Labels:     m.labels,
		ChangedBy:  m.changedBy,
		Time:       m.time,
		ObservedAt: now,
	}, nil
}

// invalidRVFault makes a terminal error that only says a resourceVersion is no integer (a
// LIST's own RV, relist.go) a Fault of r: the server may be fixed, and the other
// resources must not stop for it. Any other error is returned as it is.
func invalidRVFault(r change.Resource, err error) error {
	var f *Fault
	var num *strconv.NumError
	if !retry.IsTerminal(err) || errors.As(err, &f) || !errors.As(err, &num) {
		return err
	}
	return fault(r, ReasonInvalidRV, err)
}

// jitter is a random delay in [0, RelistJitter): how long to wait before a relist that
// other resources may need at the same moment.
func (s *Stream) jitter() time.Duration {
	if s.RelistJitter <= 0 {
		return 0
	}
	return rand.N(s.RelistJitter)
}

// sleep waits d on the stream's clock, or until ctx ends.
func (s *Stream) sleep(ctx context.Context, d time.Duration) {
	t := s.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}
