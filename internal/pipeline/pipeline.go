package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// Streamer is what the pipeline needs of a source stream.
type Streamer interface {
	Run(ctx context.Context, from change.RV, emit func(context.Context, source.Event) error) error
}

// Target is one resource to stream. NewStream is called once for the shared stream and
// once more for every sink that is detached from it.
type Target struct {
	Resource  change.Resource
	NewStream func() Streamer
	// Owns says whether a key a sink holds belongs to this target's scope (its
	// namespaces), so that the reconcile diff of one scope never infers deletes of
	// another's objects. Nil: every key of the resource.
	Owns func(change.Key) bool
}

// Metrics receives the pipeline's measurements. *metrics.Metrics implements it.
type Metrics interface {
	Changes(sink, resource, op string, n int)
	BatchWritten(sink, resource string, size int, d time.Duration)
	Lag(sink, resource string, d time.Duration)
	SinkError(sink, class string)
	Checkpoint(sink, resource string, rv uint64, at time.Time)
	KeyIndexSize(sink, resource string, n int)
}

// Options tunes the pipeline. Zero fields take the defaults in their comments.
type Options struct {
	Cluster      string        // stamped on the changes the pipeline makes (inferred deletes)
	BatchSize    int           // changes per batch; default 5000 (BatchBytes usually cuts relist batches first)
	BatchBytes   int           // object bytes per batch; default 4 MiB
	MaxWait      time.Duration // longest a change waits for its batch to fill; default 10ms
	Buffer       int           // events queued per sink; default 256
	DetachAfter  time.Duration // a full queue this long detaches its sink (several sinks only); default 10s
	FlushTimeout time.Duration // final flush after ctx ends; default 10s
	// Abandon, given the cause of ctx's end, says whether to drop what is queued and
	// cancel writes in flight at once instead of flushing: a leader that lost its lease
	// must stop writing before its successor starts. Nil: always flush.
	Abandon func(cause error) bool
	Backoff retry.Backoff
	Log     *slog.Logger
	Metrics Metrics // may be nil
}

func (o *Options) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 5000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 10 * time.Millisecond
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	if o.DetachAfter <= 0 {
		o.DetachAfter = 10 * time.Second
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
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
		time.AfterFunc(p.opts.FlushTimeout, cancelWrites)
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

// subscriber is one cursor's place in a stream's fan-out.
type subscriber struct {
	c        *cursor
	q        chan source.Event
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
		c := newCursor(p, s, t, ck, writeCtx)
		p.mu.Lock()
		p.cursors = append(p.cursors, c)
		p.mu.Unlock()
		subs[i] = &subscriber{c: c, q: make(chan source.Event, p.opts.Buffer)}
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
func (p *Pipeline) fanOut(res change.Resource, subs []*subscriber) func(context.Context, source.Event) error {
	var timer *time.Timer
	return func(ctx context.Context, ev source.Event) error {
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
				timer = time.NewTimer(p.opts.DetachAfter)
			} else {
				timer.Reset(p.opts.DetachAfter)
			}
			select {
			case s.q <- ev:
				timer.Stop()
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
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
	q := make(chan source.Event, p.opts.Buffer)
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
func (nopMetrics) Checkpoint(string, string, uint64, time.Time)    {}
func (nopMetrics) KeyIndexSize(string, string, int)                {}
