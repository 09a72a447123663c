package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/keyindex"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// reconcileDiff is one cursor's reconcile diff: for each relist it compares what the
// LIST shows with the sink's key index, and decides what the sink must be written to
// hold what the cluster holds — upserts of changed and missing objects, inferred deletes
// of what the LIST lacks — and whether the cluster went back in time (change.TimeTravel).
// It also keeps what the relist found (drift.go), the requested rounds it answers
// (resync.go) and its progress (progress.go).
//
// It writes nothing itself: each relist event gives a diffStep, which the cursor applies
// to its batch in order. It runs in the cursor's goroutine; only its progress is also
// read from the write goroutine.
type reconcileDiff struct {
	p      *Pipeline
	sink   Sink
	res    change.Resource
	target Target
	log    *slog.Logger
	ctx    context.Context // the cursor's write context

	// index is the sink's key index while a relist is under way, else nil; keys are
	// taken out as the LIST shows them, so what is left at RelistEnd was deleted.
	index *keyindex.Index
	// from is the committed checkpoint when the relist under way began, epoch the epoch
	// it writes in; travelled says it found a time travel already (one per relist).
	from      change.RV
	epoch     int
	travelled bool
	// atStart is a time travel found before the stream started (heldAhead): the cursor
	// starts from checkpoint 0, and its relist starts the new epoch at once.
	atStart *change.TimeTravel

	rounds   []*round       // the requested relists the one under way answers (resync.go)
	stats    relistStats    // what it listed, wrote and found (drift.go)
	progress relistProgress // its progress lines (progress.go)

	out []change.Change // the changes of the last listed object's step, reused
}

// diffStep is what one relist event asks of the cursor, in this order: start the new
// epoch of a time travel found, move the checkpoint up to a LIST's RV, add the changes.
// Its changes are valid until the next step.
type diffStep struct {
	travel  *change.TimeTravel
	to      change.RV
	changes []change.Change
}

func newReconcileDiff(p *Pipeline, s Sink, t Target, res change.Resource, ctx context.Context, log *slog.Logger) *reconcileDiff {
	return &reconcileDiff{p: p, sink: s, res: res, target: t, ctx: ctx, log: log,
		progress: relistProgress{p: p, log: log}}
}

// underway says whether a relist is under way (the cursor saw its RelistBegin).
func (d *reconcileDiff) underway() bool { return d.index != nil }

// cut forgets a relist cut short (by a detach): it starts over on the next stream.
func (d *reconcileDiff) cut() { d.index = nil }

// begin starts the diff of a relist from the committed checkpoint, in epoch: it loads
// the sink's key index and attaches the rounds the RelistBegin answers (ev.Round). The
// writes before it must be done, so that the index holds them.
func (d *reconcileDiff) begin(ev change.Event, committed change.RV, epoch int) (diffStep, error) {
	d.from, d.epoch, d.travelled = committed, epoch, false
	if err := d.loadIndex(); err != nil {
		return diffStep{}, err
	}
	var s diffStep
	if tt := d.atStart; tt != nil {
		d.atStart = nil
		s.travel = d.travel(*tt)
	}
	d.attach(ev.Round)
	d.progress.begin()
	return s, nil
}

func (d *reconcileDiff) loadIndex() error {
	var idx *keyindex.Index
	err := retry.Do(d.ctx, d.p.opts.Backoff, d.log, "read key index", func(ctx context.Context) error {
		idx = &keyindex.Index{}
		return d.sink.KeyIndex(ctx, d.res, func(k change.Key, e change.Entry) error {
			if d.target.Owns(k) {
				idx.Add(k, e)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("sink %s: read key index of %s: %w", d.sink.Name(), d.res.ID(), err)
	}
	idx.Seal()
	d.index = idx
	d.p.opts.Metrics.KeyIndexSize(d.sink.Name(), d.res.ID(), idx.Len())
	return nil
}

// listed is the diff's step for one listed object: nothing when the sink holds this
// very version, else an upsert marked as a snapshot. When the sink holds another uid
// under the key, that object was deleted and this one created under its name while
// nobody watched: its inferred delete (change.ReasonRecreated, just below the new
// object's RV) goes first, so a uid-keyed consumer learns the old object ended. A LIST
// below the checkpoint, or an object older than the sink holds, is a time travel.
func (d *reconcileDiff) listed(ev change.Event) diffStep {
	defer d.progress.count(ev.ListTotal)
	if d.index == nil {
		return diffStep{} // a relist whose beginning this cursor did not see (it was detached)
	}
	var s diffStep
	ch := ev.Change
	if ch.ListRV > 0 && ch.ListRV < d.from {
		s.travel = d.travel(change.TimeTravel{Reason: change.TravelListBelowCheckpoint, ListRV: ch.ListRV})
	}
	held, ok := d.index.Take(ch.Key)
	d.stats.listed++
	// Versions compare within an epoch only: a version the sink holds from an earlier
	// epoch is rewritten (a restored etcd issues its RVs again, for other contents).
	order, sameEpoch := d.version(ch.RV).CompareInEpoch(held.Version())
	sameObject := ok && sameEpoch && held.UID == ch.UID
	if sameObject && order == 0 {
		// The sink holds this version: rewritten only when its copy was edited behind
		// kube-cdc's back (drift), or when a full relist was asked for.
		if held.Drifted && !d.travelled {
			d.stats.found(kindEdited, ch.Key)
		} else if !d.full() {
			return s
		}
		ch.Op = change.OpUpdate
		d.stats.written++
		s.changes = append(d.out[:0], ch)
		d.out = s.changes
		return s
	}
	if sameObject && order < 0 {
		// A LIST at or past the checkpoint shows every object at or past the version the
		// sink holds; an older version of the same object is the cluster gone back.
		if tt := d.travel(change.TimeTravel{Reason: change.TravelObjectWentBack, ListRV: ch.ListRV, Key: ch.Key, HeldRV: held.RV}); tt != nil {
			s.travel = tt // else the LIST's RV showed it already
		}
	}
	if kind := d.driftOf(ch, held, ok); kind >= 0 {
		d.stats.found(kind, ch.Key)
	}
	ch.Op = change.OpUpdate
	if !ok || held.UID != ch.UID {
		ch.Op = change.OpCreate
	}
	out := d.out[:0]
	if ok && held.UID != ch.UID && held.UID != "" {
		out = append(out, change.InferredDeleteBefore(ch, held))
		d.stats.deleted++
	}
	out = append(out, ch)
	d.stats.written++
	d.out, s.changes = out, out
	return s
}

// driftOf classifies a listed object the diff rewrites because the sink holds something
// else than the listed version (held, ok), or returns -1 when that is no drift: the
// object changed after the checkpoint the relist started from, the sink held nothing of
// the resource yet, or the relist starts a new epoch (everything is rewritten then).
func (d *reconcileDiff) driftOf(ch change.Change, held change.Entry, ok bool) int {
	if d.from == 0 || d.travelled || ch.RV > d.from {
		return -1
	}
	if !ok {
		return kindMissing
	}
	if order, sameEpoch := held.Version().CompareInEpoch(d.version(ch.RV)); sameEpoch && (held.UID != ch.UID || order < 0) {
		return kindStale
	}
	return -1
}

// version is rv's position in the epoch the relist under way writes in.
func (d *reconcileDiff) version(rv change.RV) change.Version {
	return change.Version{Epoch: d.epoch, RV: rv}
}

// end ends the diff at the LIST's RV, where the checkpoint moves. Each key the sink
// holds (and the target owns) that the LIST did not show is looked up in the cluster
// (Target.Lookup) and becomes an inferred delete of the held uid when its object is
// gone, in no configured scope any more, or replaced by another uid (deleted and created
// again around the LIST: ReasonRecreated); an object with the held uid that exists in
// some scope (another scope's, or this one's since the LIST) is left to the streams of
// those scopes. When the lookup fails nothing is tombstoned: the next relist looks again.
func (d *reconcileDiff) end(listRV change.RV) diffStep {
	if d.index == nil {
		return diffStep{}
	}
	s := diffStep{to: listRV}
	if listRV < d.from {
		s.travel = d.travel(change.TimeTravel{Reason: change.TravelListBelowCheckpoint, ListRV: listRV})
	}
	left := d.index.Left()
	d.index = nil
	clear(d.out) // between relists nothing per object stays in memory
	if len(left) == 0 {
		return s
	}
	found, err := d.lookUp(left)
	if err != nil {
		d.log.Warn("could not look up the keys the relist did not show; none is tombstoned until the next relist",
			"keys", len(left), "error", err)
		return s
	}
	now := d.p.opts.Clock.Now()
	out := make([]change.Change, 0, len(left))
	for k, e := range left {
		reason, rv := change.ReasonGone, listRV
		if found != nil {
			p, ok := found[k]
			if reason = p.End(e.UID); !ok || reason == "" {
				continue // it exists in some scope (that scope streams it), or the lookup did not say
			}
			rv = d.endRV(listRV, e, p)
		}
		out = append(out, change.Change{Resource: d.res, Key: k, UID: e.UID, RV: rv,
			Op: change.OpDelete, Inferred: true, Reason: reason, ObservedAt: now})
		d.stats.deleted++
		if reason == change.ReasonGone && len(d.rounds) > 0 && d.from > 0 && !d.travelled {
			d.stats.found(kindExtra, k) // see DriftExtra
		}
	}
	s.changes = out
	return s
}

// endRV is the RV of the inferred delete of held, which the LIST at listRV did not show
// and under whose key the cluster holds p: the LIST's RV, except when another uid lives
// under the key in another scope than this target's. That scope's stream may have written
// the new object at an RV at or below the LIST's, which a delete at the LIST's RV would
// bury; the delete goes just above the held version instead (the held object was deleted
// after it and before the new one was created, so per key the RVs still grow). A new
// object in this target's scope reaches its stream after the LIST (above listRV), so the
// LIST's RV orders the delete before its create.
func (d *reconcileDiff) endRV(listRV change.RV, held change.Entry, p change.Presence) change.RV {
	if p.UID == "" || p.UID == held.UID || !p.InScope || p.Here {
		return listRV
	}
	// Just above the held version only when that is below the LIST's, in one epoch.
	above := change.Version{Epoch: held.Epoch, RV: held.RV + 1}
	if order, sameEpoch := above.CompareInEpoch(d.version(listRV)); !sameEpoch || order >= 0 {
		return listRV
	}
	return held.RV + 1
}

// lookUpAttempts bounds the lookup's retries: a relist must not stall on it.
const lookUpAttempts = 3

// lookUp calls Target.Lookup for held, retrying a failure a few times with backoff.
func (d *reconcileDiff) lookUp(held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	var err error
	for attempt := range lookUpAttempts {
		if attempt > 0 {
			t := d.p.opts.Clock.NewTimer(d.p.opts.Backoff.Delay(attempt - 1))
			select {
			case <-t.C():
			case <-d.ctx.Done():
				t.Stop()
				return nil, d.ctx.Err()
			}
		}
		var found map[change.Key]change.Presence
		if found, err = d.target.Lookup(d.ctx, held); err == nil {
			return found, nil
		}
		if retry.IsTerminal(err) {
			break
		}
	}
	return nil, err
}

// travel records tt, the first time travel the relist under way shows (the cluster
// behind what the sink holds: an etcd restore, a cluster rebuilt under the same name),
// and returns it with its new epoch; nil when the relist found one already. The cursor
// then stamps every change of the relist with the new epoch, so the sink takes the
// cluster's versions as they are now over the higher RVs it held; the checkpoint is 0
// until the relist ends (a crash part-way relists again, in the new epoch) and then the
// LIST's RV, however far below the old checkpoint.
func (d *reconcileDiff) travel(tt change.TimeTravel) *change.TimeTravel {
	if d.travelled {
		return nil
	}
	d.travelled = true
	d.epoch++
	if tt.Checkpoint == 0 {
		tt.Checkpoint = d.from
	}
	tt.Epoch, tt.At = d.epoch, d.p.opts.Clock.Now()
	args := []any{"reason", tt.Reason, "checkpoint", tt.Checkpoint.String(), "list_resource_version", tt.ListRV.String(), "epoch", tt.Epoch}
	if tt.Reason == change.TravelObjectWentBack {
		args = append(args, "object", tt.Key.String(), "held_resource_version", tt.HeldRV.String())
	}
	if tt.FoundIn != "" {
		args = append(args, "found_in", tt.FoundIn)
	}
	d.log.Warn("time travel: the cluster is behind what the sink holds (an etcd restore, or a cluster rebuilt under the same name); "+
		"relisting in a new epoch, whose versions replace the sink's whatever their resource versions", args...)
	if m, ok := d.p.opts.Metrics.(TimeTravelObserver); ok {
		m.TimeTravel(d.sink.Name(), d.res.ID(), tt.Reason)
	}
	return &tt
}

// finish reports the drift the relist just ended found and returns what to call once
// its last batch is committed: report to the rounds it answers (nil when none).
func (d *reconcileDiff) finish() func() {
	d.reportDrift()
	if len(d.rounds) == 0 {
		return nil
	}
	s, rounds := d.stats, d.rounds
	d.rounds = nil
	res := RelistResult{Sink: d.sink.Name(), Resource: d.res.ID(), Scope: d.res.Scope,
		Listed: s.listed, Written: s.written, Deleted: s.deleted}
	for i, kind := range driftKinds {
		if s.drift[i] > 0 {
			if res.Drift == nil {
				res.Drift = map[string]int{}
			}
			res.Drift[kind] = s.drift[i]
		}
	}
	return func() {
		d.log.Info("requested relist written", "listed", res.Listed, "written", res.Written, "deleted", res.Deleted)
		for _, r := range rounds {
			r.report(res)
		}
	}
}
