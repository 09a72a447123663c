package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Target is one resource to stream (one scope of it), as the source answers for it: the
// one thing the pipeline asks of the source. The source implements it per configured
// target (source.Feed); the pipeline's tests with small fixtures.
type Target interface {
	// Resource is the resource as resolved at start; the pipeline asks once, in New. It
	// names the target in logs, metrics and Relist.
	Resource() change.Resource
	// Resolve is called before each stream of the target starts (at start, and again after
	// a Fault) to learn the resource as the server serves it now: a CRD created after the
	// start, or recreated with other versions. While the server does not serve it, Resolve
	// returns a Fault and the target is degraded; any other error stops the pipeline. Its
	// answer (same group, resource and scope) is what that attempt streams and writes.
	Resolve(ctx context.Context) (change.Resource, error)
	// Stream runs a new stream of the target, as resolved now, from RV from (0: relist
	// first) into emit until ctx ends or it fails. It is called once for the shared stream
	// and once more for every sink that is detached from it. A stream that can tell when
	// the server accepts one of its requests (a watch opened) calls accepted then, from any
	// goroutine: a degraded resource is then known to stream again even when nothing in it
	// changes; otherwise the stream's first event tells.
	Stream(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error, accepted func()) error
	// Owns says whether a key a sink holds is this target's to examine after a relist:
	// the keys in its namespaces (every key when it has none), and for one target of each
	// resource also the keys in namespaces no target covers any more (a scope narrowed or
	// removed), so that every held key is examined by some relist.
	Owns(k change.Key) bool
	// Sweeps marks the one target of its resource whose relist also examines keys no
	// target's namespaces cover (see Owns); a sink that holds checkpoints of scopes of the
	// resource that no target has (ScopeKeeper) is relisted by it and then forgets them.
	Sweeps() bool
	// Lookup asks the cluster, once per relist, about the keys the sink holds (and this
	// target owns) that the LIST did not show: what each holds now (change.Presence). The
	// cursor tombstones, with the reason change.Presence.End gives, a key whose held
	// object is gone, out of every scope, or replaced by another uid; a key whose held
	// object exists in some scope (another scope's, or this one's since the LIST) is left
	// to that scope's stream. A nil map (and nil error): every such key is gone.
	Lookup(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error)
	// Current reads the object under a key as the cluster has it now (uid and RV), and
	// whether there is one. With a sink's NewestKeeper it finds, at start, a cluster
	// restored behind the newest version the sink holds (heldAhead).
	Current(ctx context.Context, k change.Key) (change.Entry, bool, error)
	// ServerRV reads the server's current resource version as the target reads it (a
	// LIST of at most one object). Below a sink's checkpoint, the cluster went back in
	// time (findTravels). 0: not known.
	ServerRV(ctx context.Context) (change.RV, error)
	// Resync, when positive, relists the target about this often (±15%) in the
	// background, repairing and counting the drift its sinks show (resync.go, drift.go).
	// 0: only when needed (start, 410) or asked (Relist).
	Resync() time.Duration
}

// Metrics receives the pipeline's measurements. *metrics.Metrics implements it.
type Metrics interface {
	Changes(sink, resource, op string, n int)
	BatchWritten(sink, resource string, size int, d time.Duration)
	Lag(sink, resource string, d time.Duration)
	SinkError(sink, class string)
	Checkpoint(sink, resource string, rv change.RV, at time.Time)
	KeyIndexSize(sink, resource string, n int)
	// Degraded records that a resource (one scope of it) does not stream since `since`,
	// and why: a Fault's reason and its error. An empty reason records that it streams
	// again.
	Degraded(resource, scope, reason, detail string, since time.Time)
}

// Defaults of Options; the config layer reads them too.
const (
	DefaultBatchSize    = 5000 // BatchBytes usually cuts relist batches first
	DefaultBatchBytes   = 4 << 20
	DefaultMaxWait      = 0 // adaptive batching: an idle sink writes at once (cursor.run)
	DefaultBuffer       = 256
	DefaultDetachAfter  = 10 * time.Second
	DefaultFlushTimeout = 10 * time.Second
	// A degraded resource is tried again after 0.5–1 s, then twice as long each time, up
	// to 30–60 s: permissions granted or a CRD created are noticed within a minute.
	DefaultDegradedInitial = time.Second
	DefaultDegradedMax     = time.Minute
)

// Options tunes the pipeline. Zero fields take the defaults in their comments.
type Options struct {
	// Cluster is stamped on every change, here and nowhere else (cursor.add), so every
	// sink writes the same name.
	Cluster string
	// ClusterUID is the identity of the cluster read now (the kube-system namespace's
	// uid), stamped on every batch; a sink whose checkpoints carry another one was filled
	// from a cluster since rebuilt under the same name (findTravels). "" when unknown.
	ClusterUID   string
	BatchSize    int           // changes per batch; default DefaultBatchSize
	BatchBytes   int           // object bytes per batch; default DefaultBatchBytes
	MaxWait      time.Duration // longest a batch waits to fill while the sink is idle; default 0: written at once
	Buffer       int           // events queued per sink; default DefaultBuffer
	DetachAfter  time.Duration // a full queue this long detaches its sink (several sinks only); default DefaultDetachAfter
	FlushTimeout time.Duration // final flush after ctx ends; default DefaultFlushTimeout
	// Abandon, given the cause of ctx's end, says whether to drop what is queued and
	// cancel writes in flight at once instead of flushing: a leader that lost its lease
	// must stop writing before its successor starts. Nil: always flush.
	Abandon func(cause error) bool
	Backoff retry.Backoff
	// DegradedBackoff spaces the attempts to stream a degraded resource again (one whose
	// stream or Resolve failed with a Fault); default DefaultDegradedInitial up to
	// DefaultDegradedMax. Its waits are on Clock. A resource that streamed for at least
	// its Max before failing again starts afresh from Initial.
	DegradedBackoff retry.Backoff
	// Nudge, when set, returns a channel that is closed when something changed that may
	// heal a degraded resource (a CRD of a configured resource was created or changed):
	// degraded resources are then tried again at once, their backoff started afresh.
	Nudge   func() <-chan struct{}
	Log     *slog.Logger
	Metrics Metrics // may be nil
	// ProgressInterval spaces the "relisting" lines a relist logs (progress.go); default
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// Clock drives MaxWait, DetachAfter, FlushTimeout, the write backoff and the degraded
	// backoff; default the real clock. Tests pass a fake one (k8s.io/utils/clock/testing).
	Clock clock.WithDelayedExecution
}

func (o *Options) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.DetachAfter <= 0 {
		o.DetachAfter = DefaultDetachAfter
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = DefaultFlushTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Backoff.Clock == nil {
		o.Backoff.Clock = o.Clock
	}
	if o.DegradedBackoff.Initial <= 0 {
		o.DegradedBackoff.Initial = DefaultDegradedInitial
	}
	if o.DegradedBackoff.Max <= 0 {
		o.DegradedBackoff.Max = DefaultDegradedMax
	}
}

// Pipeline streams targets into sinks.
type Pipeline struct {
	opts    Options
	sinks   []Sink
	targets []Target
	states  []*resourceState // one per target

	startTravels startTravels // what findTravels found, for each target's first round

	requests map[*resourceState]*requests // resync.go: relists asked of each resource
	rounds   roundBook                    // resync.go: the relists under way, by number
	synced   syncedLog                    // progress.go: one line when every resource is synced
}

// New returns a pipeline; Run starts it.
func New(opts Options, sinks []Sink, targets []Target) *Pipeline {
	opts.defaults()
	p := &Pipeline{opts: opts, sinks: sinks, targets: targets, requests: map[*resourceState]*requests{}}
	for _, t := range targets {
		res := t.Resource()
		st := &resourceState{t: t, res: res, log: opts.Log.With("resource", res.ID())}
		p.states = append(p.states, st)
		p.requests[st] = newRequests()
	}
	return p
}

// Run streams until ctx ends (then flushes and returns nil) or a terminal error.
func (p *Pipeline) Run(ctx context.Context) error {
	if len(p.sinks) == 0 || len(p.targets) == 0 {
		return errors.New("pipeline: nothing to do (no sinks or no resources)")
	}
	// Writes outlive ctx by FlushTimeout, so a shutdown flushes what was read.
	writeCtx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWrites()
	stop := context.AfterFunc(ctx, func() {
		if p.opts.Abandon != nil && p.opts.Abandon(context.Cause(ctx)) {
			p.opts.Log.Warn("abandoning unwritten changes; they will be read again from the checkpoint", "cause", context.Cause(ctx))
			cancelWrites()
			return
		}
		p.opts.Clock.AfterFunc(p.opts.FlushTimeout, cancelWrites)
	})
	defer stop()

	// A time travel found in any resource of a sink is the cluster's: every resource of
	// that sink relists in a new epoch (travel.go).
	p.findTravels(ctx)

	// A resource's Fault degrades that resource alone (runResource retries it); any other
	// error of a resource stops them all.
	g, gctx := errgroup.WithContext(ctx)
	for _, st := range p.states {
		g.Go(func() error { return p.runResource(gctx, writeCtx, st) })
		if st.t.Resync() > 0 {
			g.Go(func() error { p.resync(gctx, st); return nil })
		}
	}
	return g.Wait()
}

// Ready reports nil once every resource's stream into every sink is live and the last
// write of each succeeded: its watch was accepted from the point the stream started
// (the checkpoint it resumed, or the LIST's RV once its relist was written) and what the
// stream emitted before that is committed. Otherwise it names every degraded resource
// with its reason, or else the first resource not live yet.
func (p *Pipeline) Ready() error {
	var degraded []string
	var notReady error
	for _, st := range p.states {
		st.mu.Lock()
		switch {
		case st.reason != "":
			degraded = append(degraded, fmt.Sprintf("resource %s degraded (%s): %s", st.name(), st.reason, st.detail))
		case notReady != nil:
		case len(st.cursors) < len(p.sinks):
			notReady = errors.New("starting")
		default:
			for _, c := range st.cursors {
				if !c.ready.synced.Load() {
					notReady = fmt.Errorf("sink %s: %s not synced yet", c.sink.Name(), c.res.ID())
					break
				}
				if !c.ready.live.Load() {
					notReady = fmt.Errorf("sink %s: %s: the stream has not resumed from its checkpoint yet", c.sink.Name(), c.res.ID())
					break
				}
				if err := c.ready.lastErr.Load(); err != nil {
					notReady = fmt.Errorf("sink %s: %s: %v", c.sink.Name(), c.res.ID(), *err)
					break
				}
			}
		}
		st.mu.Unlock()
	}
	if len(degraded) > 0 {
		return errors.New(strings.Join(degraded, "; "))
	}
	return notReady
}

// staleScopes checks whether sink s holds checkpoints of scopes of resource res that no
// target has. If so, it returns checkpoint 0 (t relists into s, and the reconcile diff,
// which examines the keys no target covers, tombstones what those scopes left) and the
// call that forgets them once the relist is committed; else ck and nil.
func (p *Pipeline) staleScopes(ctx context.Context, s Sink, res change.Resource, ck change.RV) (change.RV, func(context.Context) error, error) {
	keeper, ok := s.(ScopeKeeper)
	if !ok {
		return ck, nil, nil
	}
	var held []string
	err := retry.Do(ctx, p.opts.Backoff, p.opts.Log, "read scopes of "+s.Name(), func(ctx context.Context) (err error) {
		held, err = keeper.Scopes(ctx, res)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("sink %s: read scopes of %s: %w", s.Name(), res.ID(), err)
	}
	var keep, stale []string
	for _, o := range p.states {
		if o.res.Group == res.Group && o.res.Resource == res.Resource {
			keep = append(keep, o.res.Scope)
		}
	}
	for _, h := range held {
		if !slices.Contains(keep, h) {
			stale = append(stale, h)
		}
	}
	if len(stale) == 0 {
		return ck, nil, nil
	}
	p.opts.Log.Info("the sink holds scopes no longer configured; relisting to tombstone what they left",
		"sink", s.Name(), "resource", res.ID(), "stale", stale)
	return 0, func(ctx context.Context) error { return keeper.ForgetScopes(ctx, res, keep) }, nil
}

// subscriber is one cursor's place in a stream's fan-out.
type subscriber struct {
	c        *cursor
	q        chan change.Event
	detached atomic.Bool
}

// runResource streams one target until ctx ends or an error that is not a Fault. A
// Fault (Forbidden, a CRD deleted or not yet created, an RV that is no integer)
// degrades the target alone: what its cursors received is written, and after a capped
// backoff (or a Nudge) it is resolved and streamed again from its sinks' checkpoints —
// a watch while the history lasts, else a relist and reconcile diff — so nothing is lost.
func (p *Pipeline) runResource(ctx, writeCtx context.Context, st *resourceState) error {
	failures := 0
	for {
		err := p.attempt(ctx, writeCtx, st)
		f, isFault := faultOf(err)
		switch {
		case isFault && ctx.Err() != nil:
			return nil
		case !isFault:
			return err
		}
		if st.streamedFor(p.opts.Clock) >= p.opts.DegradedBackoff.Max {
			failures = 0 // it streamed a good while: a new failure, not the same one again
		}
		d := p.opts.DegradedBackoff.Delay(failures)
		failures++
		p.degrade(st, f, d)
		timer := p.opts.Clock.NewTimer(d)
		var nudge <-chan struct{}
		if p.opts.Nudge != nil {
			nudge = p.opts.Nudge()
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-nudge:
			timer.Stop()
			failures = 0
			st.log.Debug("something changed that may heal the degraded resource; trying it now")
		case <-timer.C():
		}
	}
}

// attempt resolves the target, reads its sinks' checkpoints and streams it into one
// cursor per sink until ctx ends, the stream fails, or a cursor does. It returns what
// ended it: nil when ctx ended, a Fault of the stream (or of Resolve) after every cursor
// wrote what it had received, or another error, which stops the pipeline.
func (p *Pipeline) attempt(ctx, writeCtx context.Context, st *resourceState) error {
	t := st.t
	res, err := t.Resolve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	st.begin()
	subs := make([]*subscriber, len(p.sinks))
	cursors := make([]*cursor, len(p.sinks))
	var from change.RV
	for i, s := range p.sinks {
		var ck change.RV
		err := retry.Do(ctx, p.opts.Backoff, p.opts.Log, "read checkpoint of "+s.Name(), func(ctx context.Context) (err error) {
			ck, err = s.Checkpoint(ctx, res)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sink %s: read checkpoint of %s: %w", s.Name(), res.ID(), err)
		}
		var forget func(context.Context) error
		if t.Sweeps() {
			if ck, forget, err = p.staleScopes(ctx, s, res, ck); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		var travel *change.TimeTravel
		if ck > 0 {
			tt, checked := p.startTravels.take(st, s.Name())
			if !checked {
				tt = p.heldAhead(ctx, s, t, res)
			}
			if travel = tt; travel != nil {
				travel.Checkpoint, ck = ck, 0 // relist, in a new epoch
			}
		}
		c := newCursor(p, s, t, res, ck, writeCtx)
		c.forget = forget
		c.diff.atStart = travel
		cursors[i] = c
		subs[i] = &subscriber{c: c, q: make(chan change.Event, p.opts.Buffer)}
		if i == 0 || ck < from {
			from = ck
		}
	}
	st.setCursors(cursors)
	g := newGroup(ctx)
	for _, sub := range subs {
		g.Go(func() error {
			if err := sub.c.run(sub.q); err != nil {
				return err
			}
			if sub.detached.Load() && g.ctx.Err() == nil {
				return p.runAlone(g.ctx, st, sub.c)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer func() {
			for _, s := range subs {
				if !s.detached.Load() {
					close(s.q)
				}
			}
		}()
		return p.streamLoop(g.ctx, st, from, subs) // run, cut and relisted on request (resync.go)
	})
	return g.Wait()
}

// stream runs a new stream of st's target from RV from into emit; it tells st when the
// server accepts it.
func (p *Pipeline) stream(ctx context.Context, st *resourceState, from change.RV, emit func(context.Context, change.Event) error) error {
	return st.t.Stream(ctx, from, emit, func() { st.streaming(p) })
}

// fanOut hands each event to every attached subscriber. With one subscriber it only
// blocks (backpressure); with several, a subscriber that cannot take an event for
// DetachAfter is detached so that it does not stall the others.
// Any event but a RelistBegin (emitted before the LIST is sent) tells that the resource
// streams.
func (p *Pipeline) fanOut(st *resourceState, subs []*subscriber) func(context.Context, change.Event) error {
	res := st.res
	var timer clock.Timer
	return func(ctx context.Context, ev change.Event) error {
		if ev.Type != change.RelistBegin {
			st.streaming(p)
		}
		attached := 0
		for _, s := range subs {
			if !s.detached.Load() {
				attached++
			}
		}
		for _, s := range subs {
			if s.detached.Load() {
				continue
			}
			select {
			case s.q <- ev:
				continue
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			if attached == 1 {
				select {
				case s.q <- ev:
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
			if timer == nil {
				timer = p.opts.Clock.NewTimer(p.opts.DetachAfter)
			} else {
				timer.Reset(p.opts.DetachAfter)
			}
			select {
			case s.q <- ev:
				timer.Stop()
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C():
				p.opts.Log.Warn("sink is not keeping up; detaching it from the shared stream until it catches up from its own checkpoint",
					"sink", s.c.sink.Name(), "resource", res.ID(), "after", p.opts.DetachAfter.String())
				s.detached.Store(true)
				close(s.q)
				attached--
			}
		}
		return nil
	}
}

// runAlone streams st's target into one cursor that was detached from the shared stream,
// from the cursor's own checkpoint, until ctx ends or the stream fails.
func (p *Pipeline) runAlone(ctx context.Context, st *resourceState, c *cursor) error {
	q := make(chan change.Event, p.opts.Buffer)
	g := newGroup(ctx)
	g.Go(func() error { return c.run(q) })
	g.Go(func() error {
		defer close(q)
		sub := &subscriber{c: c, q: q}
		return p.stream(g.ctx, st, c.committed, p.fanOut(st, []*subscriber{sub}))
	})
	return g.Wait()
}

type nopMetrics struct{}

func (nopMetrics) Changes(string, string, string, int)                {}
func (nopMetrics) BatchWritten(string, string, int, time.Duration)    {}
func (nopMetrics) Lag(string, string, time.Duration)                  {}
func (nopMetrics) SinkError(string, string)                           {}
func (nopMetrics) Checkpoint(string, string, change.RV, time.Time)    {}
func (nopMetrics) KeyIndexSize(string, string, int)                   {}
func (nopMetrics) Degraded(string, string, string, string, time.Time) {}
