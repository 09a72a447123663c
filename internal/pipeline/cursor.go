package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// cursor is one sink's position in one resource's stream: it turns events into batches,
// writes them, and commits their checkpoints. A relist's events go through its reconcile
// diff (reconcile.go), whose decisions (changes to add, a time travel found) it applies.
//
// Writes are double-buffered: one batch is written (in its own goroutine) while the next
// one fills, so reading the next LIST page or watch events overlaps the sink's write.
// Batches still reach the sink one at a time, in order: a batch is handed over only after
// the one before it was acknowledged.
type cursor struct {
	p        *Pipeline
	sink     Sink
	res      change.Resource
	log      *slog.Logger
	writeCtx context.Context // outlives the stream by FlushTimeout

	committed change.RV  // durable in the sink; written by the write goroutine, read after wait
	sent      change.RV  // the checkpoint of the last batch handed to a write
	pending   change.RV  // what the next batch will checkpoint
	inflight  chan error // the write under way, or nil
	next      openBatch  // the batch being filled

	// epoch stamps every change and batch (change.TimeTravel); it is read from the sink
	// (EpochKeeper) when the cursor first runs (epochUnread until then), and grows by one
	// when a relist shows the cluster behind what the sink holds.
	epoch int

	// forget, when set, forgets the sink's checkpoints of scopes no longer configured; it
	// is called once the relist that swept them is committed (Target.Sweeps).
	forget func(context.Context) error

	ready readiness      // what /readyz and status read, from other goroutines
	diff  *reconcileDiff // relists: the reconcile diff, its rounds and progress
}

// epochUnread is a cursor's epoch before it read the sink's.
const epochUnread = -1

// openBatch is the batch a cursor fills until it hands it to a write.
type openBatch struct {
	changes []change.Change
	bytes   int
	first   time.Time // arrival of the oldest unwritten change, or zero
	// travel is a time travel found (a new epoch begun): it goes with this batch.
	travel *change.TimeTravel
	// committedFn is called once this batch is committed.
	committedFn func()
}

// readiness is a cursor's state as /readyz and status see it: synced once a checkpoint is
// committed outside a relist; live once the stream is established (change.Established)
// and everything it emitted before is committed (liveAt is, until then, the checkpoint
// whose commit makes it so; 0: not established yet); lastErr is the last write's error,
// nil once a write succeeds.
type readiness struct {
	synced  atomic.Bool
	live    atomic.Bool
	liveAt  atomic.Uint64
	lastErr atomic.Pointer[string]
}

// newCursor is a cursor of target t, resolved as res, into sink s from checkpoint ck.
func newCursor(p *Pipeline, s Sink, t Target, res change.Resource, ck change.RV, writeCtx context.Context) *cursor {
	log := p.opts.Log.With("sink", s.Name(), "resource", res.ID())
	c := &cursor{p: p, sink: s, res: res, committed: ck, sent: ck, pending: ck, writeCtx: writeCtx, log: log,
		epoch: epochUnread, diff: newReconcileDiff(p, s, t, res, writeCtx, log)}
	c.ready.synced.Store(ck > 0)
	return c
}

// run consumes q until it is closed, then writes what is left.
func (c *cursor) run(q <-chan change.Event) error {
	defer c.diff.abandon()
	c.diff.cut() // a relist cut short by a detach starts over on the next stream
	if c.epoch == epochUnread {
		if err := c.loadEpoch(); err != nil {
			return err
		}
	}
	clk := c.p.opts.Clock
	timer := clk.NewTimer(time.Hour)
	timer.Stop()
	for {
		// Adaptive batching (group commit): while a write is in flight the next batch
		// grows from the queue, and goes out as soon as that write completes; while the
		// sink is idle a batch goes out as soon as the queue is empty (after MaxWait, when
		// one is set, to fill it). So a lone change is written at once, and under load a
		// batch holds what arrived during one write. A relist's batches keep the old
		// checkpoint, so a lone listed change is not written at once: they are cut by count
		// and bytes, at RelistEnd, and at relistEagerBatch while the sink is idle (so the
		// sink's writes, a relist's bottleneck, start after a page rather than a batch).
		var timerC <-chan time.Time
		if c.dirty() && c.inflight == nil && !c.diff.underway() {
			wait := c.p.opts.MaxWait - clk.Since(c.next.first)
			if wait <= 0 && len(q) == 0 {
				// Nothing else to gather and nothing in flight: write in this goroutine.
				// A write goroutine would only add two hand-offs per batch (to it and
				// back), which at one change per batch cost more CPU than the write's
				// encoding; what arrives meanwhile waits in q and forms the next batch.
				if err := c.flushNow(); err != nil {
					return err
				}
				continue
			}
			if wait > 0 {
				timer.Reset(wait)
				timerC = timer.C()
			}
		}
		var ev change.Event
		var ok bool
		select {
		case ev, ok = <-q:
			if timerC != nil {
				timer.Stop()
			}
		case <-timerC:
			if err := c.flush(); err != nil {
				return err
			}
			continue
		case err := <-c.inflight: // nil, and never ready, when no write is under way
			c.inflight = nil
			if err != nil {
				return err
			}
			continue
		}
		if !ok {
			if err := c.flush(); err != nil {
				return err
			}
			return c.wait()
		}
		if err := c.handle(ev); err != nil {
			return err
		}
		if len(c.next.changes) >= c.p.opts.BatchSize || c.next.bytes >= c.p.opts.BatchBytes || c.relistBatchDue() {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

func (c *cursor) dirty() bool { return len(c.next.changes) > 0 || c.pending != c.sent }

// relistEagerBatch is how many changes of a relist go to a sink that has no write in
// flight. A LIST outpaces the sink (which writes every object twice, into objects and
// changes, or encodes and sends it), so a relist lasts as long as the time before its
// first write plus the sink's writes: a first batch of about one LIST page puts the sink
// to work after that page rather than after a full batch (BatchBytes cut the first batch
// of 20,000 ~1 KB ConfigMaps at ~3,200 changes, 0.2 s of a 1.4 s sync); while a write is
// in flight the next batch grows to the full size as before (group commit).
const relistEagerBatch = 500

// relistBatchDue reports whether a relist's batch should go out now though it is not full.
func (c *cursor) relistBatchDue() bool {
	return c.diff.underway() && c.inflight == nil && len(c.next.changes) >= relistEagerBatch
}

// add appends ch to the batch. Every change a sink sees passes here, so this is where
// the cluster name is stamped.
func (c *cursor) add(ch change.Change) {
	ch.Cluster = c.p.opts.Cluster
	ch.Epoch = c.epoch
	if len(c.next.changes) == 0 {
		c.next.first = c.p.opts.Clock.Now()
	}
	c.next.changes = append(c.next.changes, ch)
	c.next.bytes += len(ch.Object)
}

func (c *cursor) handle(ev change.Event) error {
	switch ev.Type {
	case change.Changed:
		if ev.Change.RV <= c.pending {
			return nil // the sink has it: it was ahead of the shared stream
		}
		c.add(ev.Change)
		c.pending = ev.Change.RV
	case change.Established:
		return c.establish()
	case change.Progress:
		if ev.RV > c.pending {
			if len(c.next.changes) == 0 {
				c.next.first = c.p.opts.Clock.Now()
			}
			c.pending = ev.RV
		}
	case change.RelistBegin:
		// The key index must include everything written so far.
		if err := c.flush(); err != nil {
			return err
		}
		if err := c.wait(); err != nil {
			return err
		}
		step, err := c.diff.begin(ev, c.committed, c.epoch)
		if err != nil {
			return err
		}
		c.apply(step)
	case change.Listed:
		c.apply(c.diff.listed(ev))
	case change.RelistEnd:
		c.apply(c.diff.end(ev.RV))
		report := c.diff.finish()
		if report != nil && !c.dirty() { // nothing left to write: report once the last write is done
			if err := c.wait(); err != nil {
				return err
			}
			report()
			return nil
		}
		c.next.committedFn = report
		return c.flush()
	}
	return nil
}

// apply applies a step of the reconcile diff: a time travel starts a new epoch, whose
// number every change of the relist carries from here on (those of the batch too: not
// written yet, they are this relist's, after its RelistBegin flush), with the
// checkpoint 0 until the relist ends; then the checkpoint moves to the LIST's RV, and
// the changes join the batch.
func (c *cursor) apply(s diffStep) {
	if tt := s.travel; tt != nil {
		c.epoch, c.next.travel, c.pending = tt.Epoch, tt, 0
		for i := range c.next.changes {
			c.next.changes[i].Epoch = c.epoch
		}
	}
	if s.to > c.pending {
		c.pending = s.to
	}
	for _, ch := range s.changes {
		c.add(ch)
	}
}

// establish records that the stream is established: the cursor is live (ready) once
// what was handled before is committed.
func (c *cursor) establish() error {
	if c.ready.live.Load() {
		return nil
	}
	// The write under way may be the last for a while (a quiet resource): wait for it
	// here rather than leave it to see liveAt, which it may have looked at already.
	if err := c.wait(); err != nil {
		return err
	}
	if !c.dirty() && c.committed > 0 {
		c.ready.live.Store(true)
		return nil
	}
	// What is handled and not yet written goes with a later write, which makes the
	// cursor live once it commits liveAt (set before that write starts).
	c.ready.liveAt.Store(uint64(max(c.pending, 1)))
	return nil
}

// loadEpoch reads the epoch of the sink's checkpoint, when the sink keeps one (else 0).
func (c *cursor) loadEpoch() error {
	c.epoch = 0
	k, ok := c.sink.(EpochKeeper)
	if ok {
		err := retry.Do(c.writeCtx, c.p.opts.Backoff, c.log, "read epoch", func(ctx context.Context) (err error) {
			c.epoch, err = k.Epoch(ctx, c.res)
			return err
		})
		if err != nil {
			c.epoch = epochUnread
			return fmt.Errorf("sink %s: read epoch of %s: %w", c.sink.Name(), c.res.ID(), err)
		}
	}
	return nil
}

// flush hands the batch and its checkpoint to a write, once the write before it (if any)
// has finished; its error, if any, is returned here or by the next wait.
func (c *cursor) flush() error { return c.flushMode(false) }

// flushNow writes the batch and its checkpoint in this goroutine and returns when the
// write is done (or has failed for good).
func (c *cursor) flushNow() error { return c.flushMode(true) }

func (c *cursor) flushMode(now bool) error {
	if !c.dirty() {
		return nil
	}
	if err := c.wait(); err != nil {
		return err
	}
	// Until a relist ends, its batches keep the old checkpoint (pending does not move
	// during a relist): a crash part-way relists again.
	b := change.Batch{Resource: c.res, Changes: c.next.changes, Checkpoint: c.pending, Epoch: c.epoch, TimeTravel: c.next.travel,
		ClusterUID: c.p.opts.ClusterUID}
	c.next.travel = nil
	relisting := c.diff.underway()
	c.sent = c.pending
	// The next batch is sized after this one: a relist's batches reach thousands of
	// changes, and a steady watch's one or two must not each allocate (and zero) a slice
	// that large — that was 8–10% of the daemon's CPU at 200 changes/s.
	c.next.changes = make([]change.Change, 0, min(c.p.opts.BatchSize, max(minBatchCap, 2*len(b.Changes))))
	c.next.bytes = 0
	c.next.first = time.Time{}
	committed := c.next.committedFn
	c.next.committedFn = nil
	if now {
		err := c.write(c.prepare(b), b, relisting)
		if err == nil && committed != nil {
			committed()
		}
		return err
	}
	done := make(chan error, 1)
	c.inflight = done
	go func() {
		err := c.write(c.prepare(b), b, relisting)
		if err == nil && committed != nil {
			committed()
		}
		done <- err
	}()
	return nil
}

// minBatchCap is the least capacity a batch starts with.
const minBatchCap = 16

// wait waits for the write under way, if any, and returns its error.
func (c *cursor) wait() error {
	if c.inflight == nil {
		return nil
	}
	err := <-c.inflight
	c.inflight = nil
	return err
}

// prepare encodes b once, before any retry, when the sink can (Preparer).
func (c *cursor) prepare(b change.Batch) func(context.Context) error {
	if p, ok := c.sink.(Preparer); ok {
		return p.Prepare(b)
	}
	return func(ctx context.Context) error { return c.sink.Write(ctx, b) }
}

// write calls do (b, prepared), retrying retryable failures until it succeeds or the
// write context ends, then records the new checkpoint. It runs in its own goroutine (see
// flush).
func (c *cursor) write(do func(context.Context) error, b change.Batch, relisting bool) error {
	clk := c.p.opts.Clock
	start := clk.Now()
	m := c.p.opts.Metrics
	err := retry.Do(c.writeCtx, c.p.opts.Backoff, c.log, "write batch", func(ctx context.Context) error {
		err := do(ctx)
		if err != nil {
			class := "retryable"
			if retry.IsTerminal(err) {
				class = "terminal"
			}
			m.SinkError(c.sink.Name(), class)
			msg := err.Error()
			c.ready.lastErr.Store(&msg)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sink %s: write %d changes of %s: %w", c.sink.Name(), len(b.Changes), c.res.ID(), err)
	}
	c.ready.lastErr.Store(nil)
	now := clk.Now()
	sink, res := c.sink.Name(), c.res.ID()
	m.BatchWritten(sink, res, len(b.Changes), now.Sub(start))
	var counts [3]int
	for i := range b.Changes {
		ch := &b.Changes[i]
		m.Lag(sink, res, now.Sub(ch.ObservedAt))
		switch ch.Op {
		case change.OpCreate:
			counts[0]++
		case change.OpUpdate:
			counts[1]++
		case change.OpDelete:
			counts[2]++
		}
	}
	for i, op := range []change.Op{change.OpCreate, change.OpUpdate, change.OpDelete} {
		if counts[i] > 0 {
			m.Changes(sink, res, string(op), counts[i])
		}
	}
	c.committed = b.Checkpoint
	if c.forget != nil && c.committed > 0 && !relisting {
		err := retry.Do(c.writeCtx, c.p.opts.Backoff, c.log, "forget stale scopes", c.forget)
		if err != nil {
			return fmt.Errorf("sink %s: forget stale scopes of %s: %w", c.sink.Name(), c.res.ID(), err)
		}
		c.forget = nil
	}
	if at := c.ready.liveAt.Load(); at != 0 && uint64(c.committed) >= at && !relisting {
		c.ready.live.Store(true)
	}
	if c.committed > 0 && !relisting {
		c.ready.synced.Store(true)
		m.Checkpoint(sink, res, c.committed, now)
	}
	c.diff.progress.wrote(b, relisting)
	return nil
}
