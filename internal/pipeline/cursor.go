package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/keyindex"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// cursor is one sink's position in one resource's stream: it turns events into batches,
// reconciles relists against the sink's key index, writes, and checkpoints.
//
// Writes are double-buffered: one batch is written (in its own goroutine) while the next
// one fills, so reading the next LIST page or watch events overlaps the sink's write.
// Batches still reach the sink one at a time, in order: a batch is handed over only after
// the one before it was acknowledged.
type cursor struct {
	p        *Pipeline
	sink     Sink
	res      change.Resource
	owns     func(change.Key) bool
	lookup   func(context.Context, map[change.Key]change.Entry) (map[change.Key]change.Presence, error)
	log      *slog.Logger
	writeCtx context.Context // outlives the stream by FlushTimeout

	committed change.RV  // durable in the sink; written by the write goroutine, read after wait
	sent      change.RV  // the checkpoint of the last batch handed to a write
	pending   change.RV  // what the next batch will checkpoint
	inflight  chan error // the write under way, or nil
	batch     []change.Change
	bytes     int
	first     time.Time // arrival of the oldest unwritten change, or zero

	// index is the sink's key index while a relist is under way, else nil; keys are
	// taken out as the LIST shows them, so what is left at RelistEnd was deleted.
	index *keyindex.Index

	// forget, when set, forgets the sink's checkpoints of scopes no longer configured; it
	// is called once the relist that swept them is committed (Target.Sweeps).
	forget func(context.Context) error

	// Time travel (see change.TimeTravel). epoch stamps every change and batch; it is read
	// from the sink (EpochKeeper) when the cursor first runs, and grows by one when a
	// relist shows the cluster behind what the sink holds. relistFrom is the committed
	// checkpoint when the relist under way began; travelled says this relist found a time
	// travel already; travel goes with the next batch.
	epoch       int
	epochLoaded bool
	relistFrom  change.RV
	travelled   bool
	travel      *change.TimeTravel
	// travelAtRelist is a time travel found before the stream started (heldAhead): the
	// cursor starts from checkpoint 0, and its relist starts the new epoch at once.
	travelAtRelist *change.TimeTravel

	synced  atomic.Bool
	lastErr atomic.Pointer[string]
	// Readiness: live is set once the stream is established (change.Established) and
	// everything it emitted before is committed; liveAt is, until then, the checkpoint
	// whose commit makes it so (0: not established yet).
	live   atomic.Bool
	liveAt atomic.Uint64

	// Requested relists (resync.go): the rounds the relist under way answers, what it
	// listed, wrote and found (drift.go), and the report to make once its last batch
	// is committed.
	rounds      []*round
	stats       relistStats
	committedFn func() // called once the next batch written is committed

	progress relistProgress // progress.go: relist progress and "synced" lines
}

func newCursor(p *Pipeline, s Sink, t Target, ck change.RV, writeCtx context.Context) *cursor {
	c := &cursor{p: p, sink: s, res: t.Resource, owns: t.Owns, lookup: t.Lookup, committed: ck, sent: ck, pending: ck, writeCtx: writeCtx,
		log: p.opts.Log.With("sink", s.Name(), "resource", t.Resource.ID())}
	c.synced.Store(ck > 0)
	return c
}

// run consumes q until it is closed, then writes what is left.
func (c *cursor) run(q <-chan change.Event) error {
	defer c.abandonRounds()
	c.index = nil // a relist cut short by a detach starts over on the next stream
	if !c.epochLoaded {
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
		if c.dirty() && c.inflight == nil && c.index == nil {
			wait := c.p.opts.MaxWait - clk.Since(c.first)
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
		c.progress.event(c, ev)
		if len(c.batch) >= c.p.opts.BatchSize || c.bytes >= c.p.opts.BatchBytes || c.relistBatchDue() {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

func (c *cursor) dirty() bool { return len(c.batch) > 0 || c.pending != c.sent }

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
	return c.index != nil && c.inflight == nil && len(c.batch) >= relistEagerBatch
}

// add appends ch to the batch. Every change a sink sees passes here, so this is where
// the cluster name is stamped.
func (c *cursor) add(ch change.Change) {
	ch.Cluster = c.p.opts.Cluster
	ch.Epoch = c.epoch
	if len(c.batch) == 0 {
		c.first = c.p.opts.Clock.Now()
	}
	c.batch = append(c.batch, ch)
	c.bytes += len(ch.Object)
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
		c.establish()
	case change.Progress:
		if ev.RV > c.pending {
			if len(c.batch) == 0 {
				c.first = c.p.opts.Clock.Now()
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
		c.relistFrom, c.travelled = c.committed, false
		if err := c.loadIndex(); err != nil {
			return err
		}
		if tt := c.travelAtRelist; tt != nil {
			c.travelAtRelist = nil
			c.timeTravel(*tt)
		}
		c.beginRequested(ev)
		return nil
	case change.Listed:
		if c.index != nil && ev.Change.ListRV > 0 && ev.Change.ListRV < c.relistFrom {
			c.timeTravel(change.TimeTravel{Reason: change.TravelListBelowCheckpoint, ListRV: ev.Change.ListRV})
		}
		c.reconcile(ev.Change)
	case change.RelistEnd:
		c.reconcileEnd(ev.RV)
		report := c.endRelist()
		if report != nil && !c.dirty() { // nothing left to write: report once the last write is done
			if err := c.wait(); err != nil {
				return err
			}
			report()
			return nil
		}
		c.committedFn = report
		return c.flush()
	}
	return nil
}

// establish records that the stream is established: the cursor is live (ready) once
// what was handled before is committed.
func (c *cursor) establish() {
	if c.live.Load() {
		return
	}
	if !c.dirty() && c.inflight == nil && c.committed > 0 {
		c.live.Store(true)
		return
	}
	c.liveAt.Store(uint64(max(c.pending, 1)))
}

// loadEpoch reads the epoch of the sink's checkpoint, when the sink keeps one.
func (c *cursor) loadEpoch() error {
	k, ok := c.sink.(EpochKeeper)
	if ok {
		err := retry.Do(c.writeCtx, c.p.opts.Backoff, c.log, "read epoch", func(ctx context.Context) (err error) {
			c.epoch, err = k.Epoch(ctx, c.res)
			return err
		})
		if err != nil {
			return fmt.Errorf("sink %s: read epoch of %s: %w", c.sink.Name(), c.res.ID(), err)
		}
	}
	c.epochLoaded = true
	return nil
}

// timeTravel starts a new epoch, once per relist, when the relist under way shows the
// cluster behind what the sink holds (an etcd restore, a cluster rebuilt under the same
// name). From here on every change of the relist is stamped with the new epoch, so the
// sink takes the cluster's versions as they are now over the higher RVs it held; the
// checkpoint is 0 until the relist ends (a crash part-way relists again, in the new
// epoch) and then the LIST's RV, however far below the old checkpoint.
func (c *cursor) timeTravel(tt change.TimeTravel) {
	if c.travelled {
		return
	}
	c.travelled = true
	c.epoch++
	if tt.Checkpoint == 0 {
		tt.Checkpoint = c.relistFrom
	}
	tt.Epoch, tt.At = c.epoch, c.p.opts.Clock.Now()
	c.travel = &tt
	c.pending = 0
	for i := range c.batch { // not written yet: this relist's, after its RelistBegin flush
		c.batch[i].Epoch = c.epoch
	}
	args := []any{"reason", tt.Reason, "checkpoint", tt.Checkpoint.String(), "list_resource_version", tt.ListRV.String(), "epoch", tt.Epoch}
	if tt.Reason == change.TravelObjectWentBack {
		args = append(args, "object", tt.Key.String(), "held_resource_version", tt.HeldRV.String())
	}
	if tt.FoundIn != "" {
		args = append(args, "found_in", tt.FoundIn)
	}
	c.log.Warn("time travel: the cluster is behind what the sink holds (an etcd restore, or a cluster rebuilt under the same name); "+
		"relisting in a new epoch, whose versions replace the sink's whatever their resource versions", args...)
	if m, ok := c.p.opts.Metrics.(TimeTravelObserver); ok {
		m.TimeTravel(c.sink.Name(), c.res.ID(), tt.Reason)
	}
}

func (c *cursor) loadIndex() error {
	var idx *keyindex.Index
	err := retry.Do(c.writeCtx, c.p.opts.Backoff, c.log, "read key index", func(ctx context.Context) error {
		idx = &keyindex.Index{}
		return c.sink.KeyIndex(ctx, c.res, func(k change.Key, e change.Entry) error {
			if c.owns == nil || c.owns(k) {
				idx.Add(k, e)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("sink %s: read key index of %s: %w", c.sink.Name(), c.res.ID(), err)
	}
	idx.Seal()
	c.index = idx
	c.p.opts.Metrics.KeyIndexSize(c.sink.Name(), c.res.ID(), idx.Len())
	return nil
}

// reconcile is the reconcile diff's step for one listed object: nothing when the sink
// holds this very version, else an upsert marked as a snapshot. When the sink holds
// another uid under the key, that object was deleted and this one created under its
// name while nobody watched: its inferred delete (change.ReasonRecreated, just below the
// new object's RV) goes first, so a uid-keyed consumer learns the old object ended.
func (c *cursor) reconcile(ch change.Change) {
	if c.index == nil {
		return // a relist whose beginning this cursor did not see (it was detached)
	}
	held, ok := c.index.Take(ch.Key)
	c.stats.listed++
	// Versions compare within an epoch only: a version the sink holds from an earlier
	// epoch is rewritten (a restored etcd issues its RVs again, for other contents).
	sameEpoch := ok && held.Epoch == c.epoch
	if sameEpoch && held.UID == ch.UID && held.RV == ch.RV {
		// The sink holds this version: rewritten only when its copy was edited behind
		// kube-cdc's back (drift), or when a full relist was asked for.
		if held.Drifted && !c.travelled {
			c.stats.found(kindEdited, ch.Key)
		} else if !c.full() {
			return
		}
		ch.Op = change.OpUpdate
		c.add(ch)
		c.stats.written++
		return
	}
	if sameEpoch && held.UID == ch.UID && ch.RV < held.RV {
		// A LIST at or past the checkpoint shows every object at or past the version the
		// sink holds; an older version of the same object is the cluster gone back.
		c.timeTravel(change.TimeTravel{Reason: change.TravelObjectWentBack, ListRV: ch.ListRV, Key: ch.Key, HeldRV: held.RV})
	}
	if kind := c.driftOf(ch, held, ok); kind >= 0 {
		c.stats.found(kind, ch.Key)
	}
	ch.Op = change.OpUpdate
	if !ok || held.UID != ch.UID {
		ch.Op = change.OpCreate
	}
	if ok && held.UID != ch.UID && held.UID != "" {
		c.add(change.InferredDeleteBefore(ch, held))
		c.stats.deleted++
	}
	c.add(ch)
	c.stats.written++
}

// reconcileEnd ends the reconcile diff at the LIST's RV and moves the checkpoint to it.
// Each key the sink holds (and this target owns) that the LIST did not show is looked up
// in the cluster (Target.Lookup) and becomes an inferred delete of the held uid when its
// object is gone, in no configured scope any more, or replaced by another uid (deleted
// and created again around the LIST: ReasonRecreated); an object with the held uid that
// exists in some scope (another scope's, or this one's since the LIST) is left to the
// streams of those scopes. When the lookup fails nothing is tombstoned: the next relist
// looks again.
func (c *cursor) reconcileEnd(listRV change.RV) {
	if c.index == nil {
		return
	}
	if listRV < c.relistFrom {
		c.timeTravel(change.TimeTravel{Reason: change.TravelListBelowCheckpoint, ListRV: listRV})
	}
	left := c.index.Left()
	c.index = nil
	if listRV > c.pending {
		c.pending = listRV
	}
	if len(left) == 0 {
		return
	}
	found, err := c.lookUp(left)
	if err != nil {
		c.log.Warn("could not look up the keys the relist did not show; none is tombstoned until the next relist",
			"keys", len(left), "error", err)
		return
	}
	now := c.p.opts.Clock.Now()
	for k, e := range left {
		reason, rv := change.ReasonGone, listRV
		if found != nil {
			p, ok := found[k]
			if reason = p.End(e.UID); !ok || reason == "" {
				continue // it exists in some scope (that scope streams it), or the lookup did not say
			}
			rv = c.endRV(listRV, e, p)
		}
		c.add(change.Change{Resource: c.res, Key: k, UID: e.UID, RV: rv,
			Op: change.OpDelete, Inferred: true, Reason: reason, ObservedAt: now})
		c.stats.deleted++
		if reason == change.ReasonGone && len(c.rounds) > 0 && c.relistFrom > 0 && !c.travelled {
			c.stats.found(kindExtra, k) // see DriftExtra
		}
	}
}

// endRV is the RV of the inferred delete of held, which the LIST at listRV did not show
// and under whose key the cluster holds p: the LIST's RV, except when another uid lives
// under the key in another scope than this target's. That scope's stream may have written
// the new object at an RV at or below the LIST's, which a delete at the LIST's RV would
// bury; the delete goes just above the held version instead (the held object was deleted
// after it and before the new one was created, so per key the RVs still grow). A new
// object in this target's scope reaches its stream after the LIST (above listRV), so the
// LIST's RV orders the delete before its create.
func (c *cursor) endRV(listRV change.RV, held change.Entry, p change.Presence) change.RV {
	if p.UID == "" || p.UID == held.UID || !p.InScope || p.Here || held.Epoch != c.epoch || held.RV+1 >= listRV {
		return listRV
	}
	return held.RV + 1
}

// lookUpAttempts bounds the lookup's retries: a relist must not stall on it.
const lookUpAttempts = 3

// lookUp calls Target.Lookup for held, retrying a failure a few times with backoff; a
// nil map and nil error when the target has no Lookup (every key is gone).
func (c *cursor) lookUp(held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	if c.lookup == nil {
		return nil, nil
	}
	var err error
	for attempt := range lookUpAttempts {
		if attempt > 0 {
			t := c.p.opts.Clock.NewTimer(c.p.opts.Backoff.Delay(attempt - 1))
			select {
			case <-t.C():
			case <-c.writeCtx.Done():
				t.Stop()
				return nil, c.writeCtx.Err()
			}
		}
		var found map[change.Key]change.Presence
		if found, err = c.lookup(c.writeCtx, held); err == nil {
			return found, nil
		}
		if retry.IsTerminal(err) {
			break
		}
	}
	return nil, err
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
	b := change.Batch{Resource: c.res, Changes: c.batch, Checkpoint: c.pending, Epoch: c.epoch, TimeTravel: c.travel,
		ClusterUID: c.p.opts.ClusterUID}
	c.travel = nil
	relisting := c.index != nil
	c.sent = c.pending
	// The next batch is sized after this one: a relist's batches reach thousands of
	// changes, and a steady watch's one or two must not each allocate (and zero) a slice
	// that large — that was 8–10% of the daemon's CPU at 200 changes/s.
	c.batch = make([]change.Change, 0, min(c.p.opts.BatchSize, max(minBatchCap, 2*len(b.Changes))))
	c.bytes = 0
	c.first = time.Time{}
	committed := c.committedFn
	c.committedFn = nil
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
			c.lastErr.Store(&msg)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sink %s: write %d changes of %s: %w", c.sink.Name(), len(b.Changes), c.res.ID(), err)
	}
	c.lastErr.Store(nil)
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
	if at := c.liveAt.Load(); at != 0 && uint64(c.committed) >= at && !relisting {
		c.live.Store(true)
	}
	if c.committed > 0 && !relisting {
		c.synced.Store(true)
		m.Checkpoint(sink, res, c.committed, now)
	}
	c.progress.wrote(c, b, relisting)
	return nil
}
