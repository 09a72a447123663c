package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Requested relists: a periodic resync (Target.Resync) and Relist (`kube-cdc
// resnapshot`) cut a resource's shared stream and start it again from RV 0, which
// relists; every attached cursor then reconciles the LIST against its sink's key index,
// repairing drift (drift.go) while the watch is replaced. Nothing is written for objects
// the sink holds as listed, unless the request is full: then every listed object is
// written again as a snapshot, for a consumer that lost its state.
//
// A request is a round per resource. The stream loop takes the rounds pending when it
// starts a stream and stamps their number on that stream's first RelistBegin
// (change.Event.Round): each cursor's reconcile diff learns, in its queue's order, which
// requests its relist answers, and reports to them once the relist's last batch is
// committed.

// RelistResult is what one requested relist did in one sink.
type RelistResult struct {
	Sink     string
	Resource string // change.Resource.ID
	Scope    string
	Listed   int // objects the LIST showed (in the scope)
	Written  int // upserts written: changed, missing or drifted objects; every one when full
	Deleted  int // inferred deletes written: keys the sink held that the LIST lacked
	// Drift counts the drift found, by kind (DriftMissing, …); nil when none.
	Drift map[string]int
	// Skipped says why this sink was not relisted (it was detached from the shared
	// stream, catching up from its own checkpoint); "" when it was.
	Skipped string
}

// round is one request to relist one resource.
type round struct {
	full    bool
	mu      sync.Mutex
	expect  int // reports still awaited; set when a stream takes the round
	taken   bool
	results []RelistResult
	done    chan struct{} // closed when every cursor the round was taken for reported
}

func newRound(full bool) *round { return &round{full: full, done: make(chan struct{})} }

// take records that a stream relists for the round into n cursors.
func (r *round) take(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken {
		return
	}
	r.taken, r.expect = true, n
	if n == 0 {
		close(r.done)
	}
}

func (r *round) wasTaken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.taken
}

// skip records a sink the round's relist does not reach.
func (r *round) skip(res RelistResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
}

func (r *round) report(res RelistResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	if r.expect--; r.expect == 0 {
		close(r.done)
	}
}

// requests are the rounds asked of one resource that its stream has not started yet.
type requests struct {
	mu      sync.Mutex
	pending []*round
	wake    chan struct{} // closed when a round is asked, then replaced
}

func newRequests() *requests { return &requests{wake: make(chan struct{})} }

func (q *requests) ask(r *round) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, r)
	close(q.wake)
	q.wake = make(chan struct{})
}

// asked returns a channel closed when a round is asked after this call.
func (q *requests) asked() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// requeue puts back rounds taken for a stream that ended before it began their relist:
// the resource's next stream takes them first.
func (q *requests) requeue(rs []*round) {
	if len(rs) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(rs, q.pending...)
}

func (q *requests) takeAll() []*round {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}

// roundBook numbers the rounds a stream relists for, so that cursors find them by the
// number stamped on RelistBegin (change.Event.Round).
type roundBook struct {
	last atomic.Uint64
	mu   sync.Mutex
	byID map[uint64][]*round
}

func (b *roundBook) add(rs []*round) uint64 {
	id := b.last.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID == nil {
		b.byID = map[uint64][]*round{}
	}
	for old, ors := range b.byID { // every cursor that awaited them has reported
		if allDone(ors) {
			delete(b.byID, old)
		}
	}
	b.byID[id] = rs
	return id
}

// get returns the rounds numbered id.
func (b *roundBook) get(id uint64) []*round {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byID[id]
}

func allDone(rs []*round) bool {
	for _, r := range rs {
		select {
		case <-r.done:
		default:
			return false
		}
	}
	return true
}

// Relist asks the running pipeline to relist the named resources (Resource.ID or its
// plural; every resource when none is named, every scope of each) into every sink, and
// waits until each relist's last batch is committed, or ctx ends. Unchanged objects are
// written again only when full. A resource degraded at the time relists when it streams
// again.
func (p *Pipeline) Relist(ctx context.Context, resources []string, full bool) ([]RelistResult, error) {
	var sts []*resourceState
	for _, name := range resources {
		n := len(sts)
		for _, st := range p.states {
			if name == st.res.ID() || name == st.res.Resource {
				sts = append(sts, st)
			}
		}
		if len(sts) == n {
			return nil, fmt.Errorf("resource %q is not streamed; streamed are: %s", name, strings.Join(p.resourceNames(), ", "))
		}
	}
	if len(resources) == 0 {
		sts = p.states
	}
	rounds := make([]*round, 0, len(sts))
	for _, st := range slices.Compact(sts) {
		r := newRound(full)
		rounds = append(rounds, r)
		p.requests[st].ask(r)
	}
	var out []RelistResult
	for _, r := range rounds {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("relist: %w", context.Cause(ctx))
		}
		r.mu.Lock()
		out = append(out, r.results...)
		r.mu.Unlock()
	}
	return out, nil
}

func (p *Pipeline) resourceNames() []string {
	var names []string
	for _, st := range p.states {
		names = append(names, st.res.ID())
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// streamLoop runs st's shared stream into subs from RV from until ctx ends or the stream
// returns; a round asked meanwhile (or pending when it starts) cuts the stream and starts
// it again from 0, the relist answering the round.
//
// Rounds whose stream ended before it began their relist (cut by a later round while it
// probed or opened its list, under load a second or more) have reached no cursor: they
// ride on the next stream, with the rounds that cut it, or go back to the queue when the
// loop returns. Dropped, nobody would answer them: `kube-cdc resnapshot` waited for its
// answer until its timeout, and a periodic resync waiting for its last round never
// asked again.
func (p *Pipeline) streamLoop(ctx context.Context, st *resourceState, from change.RV, subs []*subscriber) error {
	q := p.requests[st]
	var carried []*round // taken for a stream that did not begin their relist
	for {
		var id uint64
		rs := q.takeAll()
		// Rounds put back by requeue were taken before: their skipped sinks are recorded.
		if fresh := slices.DeleteFunc(slices.Clone(rs), (*round).wasTaken); len(fresh) > 0 {
			attached := 0
			for _, s := range subs {
				if !s.detached.Load() {
					attached++
					continue
				}
				for _, r := range fresh {
					r.skip(RelistResult{Sink: s.c.sink.Name(), Resource: st.res.ID(), Scope: st.res.Scope,
						Skipped: "detached from the shared stream (not keeping up); it catches up from its own checkpoint"})
				}
			}
			for _, r := range fresh {
				r.take(attached)
			}
		}
		if rs = slices.Concat(carried, rs); len(rs) > 0 {
			id, from = p.rounds.add(rs), 0
		}
		sctx, cancel := context.WithCancel(ctx)
		asked := q.asked()
		var cut atomic.Bool
		stop := make(chan struct{})
		go func() {
			select {
			case <-asked:
				cut.Store(true)
				cancel()
			case <-stop:
			}
		}()
		emit := p.fanOut(st, subs)
		var begun atomic.Bool
		if id != 0 {
			emit = stampRelist(emit, id, &begun)
		}
		err := p.stream(sctx, st, from, emit)
		close(stop)
		cancel()
		carried = nil
		if id != 0 && !begun.Load() {
			carried = rs
		}
		if ctx.Err() != nil || !cut.Load() || (err != nil && !errors.Is(err, context.Canceled)) {
			q.requeue(carried)
			return err
		}
		st.log.Info("relisting on request (resync or resnapshot) while the watch is replaced")
	}
}

// stampRelist stamps id on the stream's first relist (every RelistBegin until its
// RelistEnd: a relist that fails part-way begins again); begun is set once a stamped
// RelistBegin has reached every cursor.
func stampRelist(emit func(context.Context, change.Event) error, id uint64, begun *atomic.Bool) func(context.Context, change.Event) error {
	ended := false
	return func(ctx context.Context, ev change.Event) error {
		switch {
		case ended:
		case ev.Type == change.RelistBegin:
			ev.Round = id
			err := emit(ctx, ev)
			if err == nil {
				begun.Store(true)
			}
			return err
		case ev.Type == change.RelistEnd:
			ended = true
		}
		return emit(ctx, ev)
	}
}

// attach attaches the rounds numbered id (a RelistBegin's change.Event.Round) to the
// relist under way, and starts its statistics afresh. Rounds attached to a relist cut
// short stay attached: the next relist answers them.
func (d *reconcileDiff) attach(id uint64) {
	d.stats = relistStats{}
	if id == 0 {
		return
	}
	for _, r := range d.p.rounds.get(id) {
		if !slices.Contains(d.rounds, r) {
			d.rounds = append(d.rounds, r)
		}
	}
}

// abandon reports to the rounds attached to a relist that will not end in this cursor
// (its stream ended: the resource degraded, or the sink was detached) that it did not
// finish, so that nobody waits for it in vain.
func (d *reconcileDiff) abandon() {
	if len(d.rounds) == 0 {
		return
	}
	res := RelistResult{Sink: d.sink.Name(), Resource: d.res.ID(), Scope: d.res.Scope,
		Skipped: "the stream ended before the relist did (the resource degraded, or the sink fell behind)"}
	for _, r := range d.rounds {
		r.report(res)
	}
	d.rounds = nil
}

// full says whether the relist under way writes every listed object.
func (d *reconcileDiff) full() bool {
	for _, r := range d.rounds {
		if r.full {
			return true
		}
	}
	return false
}

// resyncJitter spreads resyncs over ±15% of the interval, so that resources configured
// alike do not all relist at once.
const resyncJitter = 0.15

// resync asks st's resource to relist every Target.Resync (jittered) while ctx lasts,
// once the previous resync is written; it does not wait while a relist is under way.
func (p *Pipeline) resync(ctx context.Context, st *resourceState) {
	every := st.t.Resync()
	var last *round
	for {
		d := time.Duration(float64(every) * (1 - resyncJitter + 2*resyncJitter*rand.Float64()))
		timer := p.opts.Clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		if last != nil {
			select {
			case <-last.done:
			default:
				st.log.Debug("resync due while the last one is not written yet; skipped")
				continue
			}
		}
		st.log.Debug("resync: relisting to check the sinks for drift")
		last = newRound(false)
		p.requests[st].ask(last)
	}
}
