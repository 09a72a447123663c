package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Streamer is what the pipeline needs of a source stream.
type Streamer interface {
	Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error
}

// Target is one resource to stream. NewStream is called once for the shared stream and
// once more for every sink that is detached from it.
type Target struct {
	Resource  change.Resource
	NewStream func() Streamer
	// Owns says whether a key a sink holds is this target's to examine after a relist:
	// the keys in its namespaces, and for one target of each resource also the keys in
	// namespaces no target covers any more (a scope narrowed or removed), so that every
	// held key is examined by some relist. Nil: every key of the resource.
	Owns func(change.Key) bool
	// Lookup asks the cluster, once per relist, about the keys the sink holds (and this
	// target owns) that the LIST did not show. It returns the keys to tombstone, each
	// with its reason: change.ReasonGone (no object with the held uid) or
	// change.ReasonOutOfScope (the object exists, but no configured scope of the resource
	// covers it). A key it leaves out exists in some scope (another scope's, or this one's
	// since the LIST) and is left to that scope's stream. Nil: every such key is gone
	// (right for a resource configured once, without selectors).
	Lookup func(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]string, error)
	// Sweeps marks the one target of its resource whose relist also examines keys no
	// target's namespaces cover (see Owns); a sink that holds checkpoints of scopes of the
	// resource that no target has (ScopeKeeper) is relisted by it and then forgets them.
	Sweeps bool
}

// Metrics receives the pipeline's measurements. *metrics.Metrics implements it.
type Metrics interface {
	Changes(sink, resource, op string, n int)
	BatchWritten(sink, resource string, size int, d time.Duration)
	Lag(sink, resource string, d time.Duration)
	SinkError(sink, class string)
	Checkpoint(sink, resource string, rv change.RV, at time.Time)
	KeyIndexSize(sink, resource string, n int)
}

// Defaults of Options; the config layer reads them too.
const (
	DefaultBatchSize    = 5000 // BatchBytes usually cuts relist batches first
	DefaultBatchBytes   = 4 << 20
	DefaultMaxWait      = 10 * time.Millisecond
	DefaultBuffer       = 256
	DefaultDetachAfter  = 10 * time.Second
	DefaultFlushTimeout = 10 * time.Second
)

// Options tunes the pipeline. Zero fields take the defaults in their comments.
type Options struct {
	// Cluster is stamped on every change, here and nowhere else (cursor.add), so every
	// sink writes the same name.
	Cluster      string
	BatchSize    int           // changes per batch; default DefaultBatchSize
	BatchBytes   int           // object bytes per batch; default DefaultBatchBytes
	MaxWait      time.Duration // longest a change waits for its batch to fill; default DefaultMaxWait
	Buffer       int           // events queued per sink; default DefaultBuffer
	DetachAfter  time.Duration // a full queue this long detaches its sink (several sinks only); default DefaultDetachAfter
	FlushTimeout time.Duration // final flush after ctx ends; default DefaultFlushTimeout
	// Abandon, given the cause of ctx's end, says whether to drop what is queued and
	// cancel writes in flight at once instead of flushing: a leader that lost its lease
	// must stop writing before its successor starts. Nil: always flush.
	Abandon func(cause error) bool
	Backoff retry.Backoff
	Log     *slog.Logger
	Metrics Metrics // may be nil
	// Clock drives MaxWait, DetachAfter, FlushTimeout and the write backoff; default the
	// real clock. Tests pass a fake one (k8s.io/utils/clock/testing).
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
}

// Pipeline streams targets into sinks.
type Pipeline struct {
	opts    Options
	sinks   []Sink
	targets []Target

	mu      sync.Mutex
	cursors []*cursor
}

// New returns a pipeline; Run starts it.
func New(opts Options, sinks []Sink, targets []Target) *Pipeline {
	opts.defaults()
	return &Pipeline{opts: opts, sinks: sinks, targets: targets}
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

	g, gctx := errgroup.WithContext(ctx)
	for _, t := range p.targets {
		g.Go(func() error { return p.runResource(gctx, writeCtx, t) })
	}
	return g.Wait()
}

// Ready reports nil once every resource has been synced into every sink and the last
// write of each succeeded.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cursors) < len(p.sinks)*len(p.targets) {
		return errors.New("starting")
	}
	for _, c := range p.cursors {
		if !c.synced.Load() {
			return fmt.Errorf("sink %s: %s not synced yet", c.sink.Name(), c.res.ID())
		}
		if err := c.lastErr.Load(); err != nil {
			return fmt.Errorf("sink %s: %s: %v", c.sink.Name(), c.res.ID(), *err)
		}
	}
	return nil
}

// staleScopes checks whether sink s holds checkpoints of scopes of t's resource that no
// target has. If so, it returns checkpoint 0 (t relists into s, and the reconcile diff,
// which examines the keys no target covers, tombstones what those scopes left) and the
// call that forgets them once the relist is committed; else ck and nil.
func (p *Pipeline) staleScopes(ctx context.Context, s Sink, t Target, ck change.RV) (change.RV, func(context.Context) error, error) {
	keeper, ok := s.(ScopeKeeper)
	if !ok {
		return ck, nil, nil
	}
	var held []string
	err := retry.Do(ctx, p.opts.Backoff, p.opts.Log, "read scopes of "+s.Name(), func(ctx context.Context) (err error) {
		held, err = keeper.Scopes(ctx, t.Resource)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("sink %s: read scopes of %s: %w", s.Name(), t.Resource.ID(), err)
	}
	var keep, stale []string
	for _, o := range p.targets {
		if o.Resource.Group == t.Resource.Group && o.Resource.Resource == t.Resource.Resource {
			keep = append(keep, o.Resource.Scope)
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
		"sink", s.Name(), "resource", t.Resource.ID(), "stale", stale)
	return 0, func(ctx context.Context) error { return keeper.ForgetScopes(ctx, t.Resource, keep) }, nil
}

// subscriber is one cursor's place in a stream's fan-out.
type subscriber struct {
	c        *cursor
	q        chan change.Event
	detached atomic.Bool
}

func (p *Pipeline) runResource(ctx, writeCtx context.Context, t Target) error {
	g, gctx := errgroup.WithContext(ctx)
	subs := make([]*subscriber, len(p.sinks))
	var from change.RV
	for i, s := range p.sinks {
		var ck change.RV
		err := retry.Do(ctx, p.opts.Backoff, p.opts.Log, "read checkpoint of "+s.Name(), func(ctx context.Context) (err error) {
			ck, err = s.Checkpoint(ctx, t.Resource)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sink %s: read checkpoint of %s: %w", s.Name(), t.Resource.ID(), err)
		}
		var forget func(context.Context) error
		if t.Sweeps {
			if ck, forget, err = p.staleScopes(ctx, s, t, ck); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		c := newCursor(p, s, t, ck, writeCtx)
		c.forget = forget
		p.mu.Lock()
		p.cursors = append(p.cursors, c)
		p.mu.Unlock()
		subs[i] = &subscriber{c: c, q: make(chan change.Event, p.opts.Buffer)}
		if i == 0 || ck < from {
			from = ck
		}
	}
	for _, sub := range subs {
		g.Go(func() error {
			if err := sub.c.run(sub.q); err != nil {
				return err
			}
			if sub.detached.Load() && gctx.Err() == nil {
				return p.runAlone(gctx, t, sub.c)
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
		return t.NewStream().Run(gctx, from, p.fanOut(t.Resource, subs))
	})
	return g.Wait()
}

// fanOut hands each event to every attached subscriber. With one subscriber it only
// blocks (backpressure); with several, a subscriber that cannot take an event for
// DetachAfter is detached so that it does not stall the others.
func (p *Pipeline) fanOut(res change.Resource, subs []*subscriber) func(context.Context, change.Event) error {
	var timer clock.Timer
	return func(ctx context.Context, ev change.Event) error {
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

// runAlone streams t into one cursor that was detached from the shared stream, from
// the cursor's own checkpoint, until ctx ends.
func (p *Pipeline) runAlone(ctx context.Context, t Target, c *cursor) error {
	q := make(chan change.Event, p.opts.Buffer)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.run(q) })
	g.Go(func() error {
		defer close(q)
		sub := &subscriber{c: c, q: q}
		return t.NewStream().Run(gctx, c.committed, p.fanOut(t.Resource, []*subscriber{sub}))
	})
	return g.Wait()
}

type nopMetrics struct{}

func (nopMetrics) Changes(string, string, string, int)             {}
func (nopMetrics) BatchWritten(string, string, int, time.Duration) {}
func (nopMetrics) Lag(string, string, time.Duration)               {}
func (nopMetrics) SinkError(string, string)                        {}
func (nopMetrics) Checkpoint(string, string, change.RV, time.Time) {}
func (nopMetrics) KeyIndexSize(string, string, int)                {}
