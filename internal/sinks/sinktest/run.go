package sinktest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Run runs every case of the suite against the sink h describes, each on fresh state.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		fn   func(*run)
	}{
		{"AWrittenBatchIsInTheKeyIndexAndTheCheckpoint", writtenBatchIsReadBack},
		{"WritingABatchAgainChangesNeitherKeyIndexNorCheckpoint", rewriteIsIdempotent},
		{"ReplayingAnOlderBatchKeepsNewerVersionsAndTheCheckpoint", olderReplayUndoesNothing},
		{"ABatchWithoutChangesMovesTheCheckpointAndWritesNothing", bookmarkMovesTheCheckpoint},
		{"DeletedKeysLeaveTheKeyIndexWhetherObservedOrInferred", deletesLeaveTheKeyIndex},
		{"AWriteThatFailsPartWayKeepsTheCheckpointAndCompletesWhenRetried/small", func(r *run) { failurePartWay(r, 8) }},
		{"AWriteThatFailsPartWayKeepsTheCheckpointAndCompletesWhenRetried/large", func(r *run) { failurePartWay(r, 100) }},
		{"AfterARestartCheckpointAndKeyIndexReadBackAndWritingGoesOn", restartReadsBack},
		{"AfterAFailedWriteAndARestartWritingTheBatchAgainCompletesIt", restartAfterFailure},
		{"ARecreatedObjectsOldUIDIsDeletedBeforeItsNewUIDIsCreatedAndTheNewUIDStaysLive", recreatedObject},
		{"ANewEpochsVersionsReplaceHigherRVsAndItsCheckpointAndEpochSurviveARestart", newEpoch},
		{"TheKeyIndexCoversEveryScopeAndScopesNoLongerConfiguredAreForgotten", forgottenScopes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(newRun(t, h)) })
	}
}

func writtenBatchIsReadBack(r *run) {
	r.expectCheckpoint(0, "fresh sink")
	r.expectKeys(keys{}, "fresh sink")
	b := batch(15,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("b", 1, 11, change.OpCreate),
		r.f.change("a", 1, 12, change.OpUpdate),
		r.f.change("c", 1, 13, change.OpCreate))
	r.write(b)
	r.expectCheckpoint(15, "after the write")
	r.expectKeys(want(b.Changes...), "after the write")
	r.expectRecords(r.records(), b.Changes, true, "after one write")
}

func rewriteIsIdempotent(r *run) {
	b := batch(20,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("a", 1, 11, change.OpUpdate),
		r.f.change("b", 1, 12, change.OpCreate),
		r.f.change("b", 1, 13, change.OpDelete),
		r.f.change("c", 1, 14, change.OpCreate))
	r.write(b)
	cp, k, recs := r.checkpoint(), r.keyIndex(), r.records()
	if cp != 20 || !maps.Equal(k, want(b.Changes...)) {
		r.t.Fatalf("after the first write: checkpoint %d, key index %v; want 20, %v", cp, k, want(b.Changes...))
	}
	for range 2 {
		r.write(b)
	}
	r.expectCheckpoint(cp, "after writing the batch twice more")
	r.expectKeys(k, "after writing the batch twice more")
	again := r.records()
	r.expectRecords(again, b.Changes, r.h.ExactlyOnce, "after writing the batch three times")
	if r.h.ExactlyOnce && !maps.Equal(counts(again), counts(recs)) {
		r.t.Errorf("rewrites changed the records: %s, were %s", formatRecords(again), formatRecords(recs))
	}
}

func olderReplayUndoesNothing(r *run) {
	older := batch(15,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("b", 1, 11, change.OpCreate),
		r.f.change("c", 1, 12, change.OpCreate))
	newer := batch(25,
		r.f.change("a", 1, 20, change.OpUpdate),
		r.f.change("b", 1, 21, change.OpDelete),
		r.f.change("d", 1, 22, change.OpCreate))
	r.write(older)
	r.write(newer)
	k := want(append(older.Changes, newer.Changes...)...)
	r.expectKeys(k, "after the newer batch")
	r.write(older)
	r.expectCheckpoint(25, "after replaying the older batch")
	got := r.keyIndex()
	if !r.h.RemembersDeletes {
		// The store forgot b's delete; only the next relist's reconcile diff removes b.
		if e, ok := got[older.Changes[1].Key]; ok {
			r.t.Logf("the replay brought back deleted key %s at %d (this store forgets deleted keys)", older.Changes[1].Key, e.RV)
			delete(got, older.Changes[1].Key)
		}
	}
	if !maps.Equal(got, k) {
		r.t.Errorf("after replaying the older batch: key index %v, want %v (newer versions kept)", keys(got), k)
	}
	r.expectRecords(r.records(), append(older.Changes, newer.Changes...), r.h.ExactlyOnce, "after the replay")
}

func bookmarkMovesTheCheckpoint(r *run) {
	b := batch(10, r.f.change("a", 1, 10, change.OpCreate))
	r.write(b)
	recs := r.records()
	r.write(batch(30))
	r.expectCheckpoint(30, "after a batch without changes")
	r.expectKeys(want(b.Changes...), "after a batch without changes")
	// An older bookmark (a replay) does not move it back.
	r.write(batch(20))
	r.expectCheckpoint(30, "after an older batch without changes")
	if got := r.records(); !maps.Equal(counts(got), counts(recs)) {
		r.t.Errorf("batches without changes wrote records: %s, were %s", formatRecords(got), formatRecords(recs))
	}
}

func deletesLeaveTheKeyIndex(r *run) {
	first := batch(14,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("b", 1, 11, change.OpCreate),
		r.f.change("c", 1, 12, change.OpCreate),
		r.f.change("d", 1, 13, change.OpCreate))
	second := batch(30,
		r.f.change("b", 1, 20, change.OpDelete), // observed: carries the last state
		r.f.inferredDelete("c", 1, 21),          // found missing by a relist
		r.f.change("d", 1, 22, change.OpDelete),
		r.f.change("d", 2, 23, change.OpCreate), // re-created: a new uid
		r.f.inferredDelete("never-held", 1, 24), // a delete of a key the sink never had
		r.f.change("e", 1, 25, change.OpCreate),
		r.f.change("e", 1, 26, change.OpDelete)) // created and deleted within the batch
	r.write(first)
	r.write(second)
	all := append(first.Changes, second.Changes...)
	k := want(all...)
	if len(k) != 2 {
		r.t.Fatalf("sinktest: the deletes case expects a and d to survive, not %v", k)
	}
	r.expectKeys(k, "after the deletes")
	r.expectCheckpoint(30, "after the deletes")
	r.expectRecords(r.records(), all, true, "after the deletes")
}

// failureBatch is n changes over up to 20 keys, each key ending deleted when its index is
// divisible by 7, so the complete key index says whether the whole batch landed.
func failureBatch(f fixture, n int, fromRV change.RV) change.Batch {
	var cs []change.Change
	nkeys := min(n, 20)
	rv := fromRV
	for i := range n {
		name := fmt.Sprintf("k%02d", i%nkeys)
		op := change.OpUpdate
		switch {
		case i < nkeys:
			op = change.OpCreate
		case i >= n-nkeys && (i%nkeys)%7 == 0:
			op = change.OpDelete
		}
		cs = append(cs, f.change(name, 1, rv, op))
		rv++
	}
	return batch(rv+5, cs...)
}

// writeUntilDone calls w until it succeeds, as the pipeline's retry does once the
// failure healed, failing the case if it has not within a deadline.
func (r *run) writeUntilDone(w func() error) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := w()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the write still fails after the failure healed: %v", err)
		}
		r.t.Logf("retry: %v", err)
		time.Sleep(100 * time.Millisecond) // the pipeline's backoff
	}
}

func failurePartWay(r *run, n int) {
	first := batch(5, r.f.change("first", 1, 5, change.OpCreate))
	r.write(first)
	k0, recs0 := r.keyIndex(), r.records()
	b := failureBatch(r.f, n, 100)

	heal := r.target.Break(r.t, b)
	w := r.prepare(b)
	if err := w(r.ctx()); err == nil {
		heal()
		r.t.Fatal("the write succeeded although the harness broke it")
	} else {
		r.t.Logf("the broken write: %v", err)
	}
	r.expectCheckpoint(5, "after the failed write")
	recs := r.records()
	if !r.h.KeyIndexFromRecords {
		r.expectKeysAfterAFailedWrite(k0, b, recs, "after the failed write")
	}
	if r.h.Transactional {
		if !maps.Equal(counts(recs), counts(recs0)) {
			r.t.Errorf("after the failed write the sink holds %s, was %s: not all or nothing", formatRecords(recs), formatRecords(recs0))
		}
	} else if len(recs) == len(recs0) {
		r.t.Errorf("the harness's failure came before any record went out; it must break the write part-way")
	}

	heal()
	r.writeUntilDone(func() error { return w(r.ctx()) })
	all := append(first.Changes, b.Changes...)
	r.expectCheckpoint(b.Checkpoint, "after the retried write")
	r.expectKeys(want(all...), "after the retried write")
	r.expectRecords(r.records(), all, r.h.ExactlyOnce || r.h.RetrySendsOnlyTheRest, "after the retried write")
}

func restartReadsBack(r *run) {
	b1 := batch(15,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("b", 1, 11, change.OpCreate),
		r.f.change("c", 1, 12, change.OpCreate))
	b2 := batch(25,
		r.f.change("a", 1, 20, change.OpUpdate),
		r.f.change("b", 1, 21, change.OpDelete))
	r.write(b1)
	r.write(b2)
	k := want(append(b1.Changes, b2.Changes...)...)
	r.expectKeys(k, "before the restart")

	r.restart()
	r.expectCheckpoint(25, "after the restart")
	r.expectKeys(k, "after the restart")

	b3 := batch(35,
		r.f.change("c", 1, 30, change.OpUpdate),
		r.f.change("d", 1, 31, change.OpCreate))
	r.write(b3)
	all := append(append(b1.Changes, b2.Changes...), b3.Changes...)
	r.expectCheckpoint(35, "after writing on")
	r.expectKeys(want(all...), "after writing on")
	r.expectRecords(r.records(), all, true, "after writing on")

	r.restart()
	r.expectCheckpoint(35, "after the second restart")
	r.expectKeys(want(all...), "after the second restart")
}

// restartAfterFailure is Conduit's acceptance test for a sink: part of the work is
// acknowledged, the process dies, and the restarted sink resumes from its checkpoint.
func restartAfterFailure(r *run) {
	first := batch(5, r.f.change("first", 1, 5, change.OpCreate))
	r.write(first)
	b := failureBatch(r.f, 30, 100)
	heal := r.target.Break(r.t, b)
	if err := r.prepare(b)(r.ctx()); err == nil {
		r.t.Fatal("the write succeeded although the harness broke it")
	}
	heal()
	r.restart() // the process died with the batch unacknowledged
	cp := r.checkpoint()
	if cp != first.Checkpoint {
		r.t.Fatalf("after the restart the checkpoint is %d, want %d: the failed batch was never acknowledged", cp, first.Checkpoint)
	}
	// The pipeline resumes from cp: the watch brings the batch's changes again.
	r.write(b)
	all := append(first.Changes, b.Changes...)
	r.expectCheckpoint(b.Checkpoint, "after writing the batch again")
	r.expectKeys(want(all...), "after writing the batch again")
	r.expectRecords(r.records(), all, r.h.ExactlyOnce, "after writing the batch again")
}

// recreatedObject is what a relist writes for objects deleted and created again under
// their names while nobody watched (the reconcile diff found another uid under the key):
// the old uid's inferred delete (reason recreated) just below the new object's RV, then
// the new object's snapshot create, in the relist's batches, which keep the old
// checkpoint until the last. For a the two are in one batch; for b a restart falls
// between them. The sink must take the delete above the held version and the create
// above the delete (the RV guard), keep them in that order (per key by RV), and hold the
// new uid live at the end, also after the relist's batches are written again.
func recreatedObject(r *run) {
	first := batch(15,
		r.f.change("a", 1, 10, change.OpCreate),
		r.f.change("b", 1, 11, change.OpCreate),
		r.f.change("c", 1, 12, change.OpCreate))
	r.write(first)
	newA, newB := r.f.snapshot("a", 2, 20, 40), r.f.snapshot("b", 2, 22, 40)
	// What the reconcile diff emits, from the uids the sink's key index holds.
	held := r.keyIndex()
	relist := batch(15,
		change.InferredDeleteBefore(newA, held[newA.Key]), newA,
		change.InferredDeleteBefore(newB, held[newB.Key]))
	if d := relist.Changes[0]; d.RV != 19 || d.UID != uid("a", 1) {
		r.t.Fatalf("sinktest: the recreated delete of a is %s of uid %s, want a@19 of %s", recordOf(d), d.UID, uid("a", 1))
	}
	end := batch(40, newB)
	r.write(relist)
	r.expectKeys(want(append(first.Changes, relist.Changes...)...), "after the old uids' deletes and a's new uid")
	r.restart()
	r.write(end)
	all := append(append(append([]change.Change{}, first.Changes...), relist.Changes...), end.Changes...)
	k := want(all...)
	if k[newA.Key].UID != newA.UID || k[newB.Key].UID != newB.UID {
		r.t.Fatalf("sinktest: the recreated case expects the new uids to end live, not %+v", k)
	}
	r.expectKeys(k, "after the relist")
	r.expectCheckpoint(40, "after the relist")
	r.expectRecords(r.records(), all, true, "after the relist")

	// Written again (retries whose outcome was unknown), they change nothing.
	r.write(relist)
	r.write(end)
	r.expectKeys(k, "after the relist's batches were written again")
	r.expectCheckpoint(40, "after the relist's batches were written again")
	r.expectRecords(r.records(), all, r.h.ExactlyOnce, "after the relist's batches were written again")
}

// epochOf stamps cs with epoch.
func epochOf(epoch int, cs ...change.Change) []change.Change {
	for i := range cs {
		cs[i].Epoch = epoch
	}
	return cs
}

func (r *run) epoch() int {
	r.t.Helper()
	k, ok := r.sink.(interface {
		Epoch(context.Context, change.Resource) (int, error)
	})
	if !ok {
		r.t.Fatalf("the sink keeps no epochs (no Epoch method): it would restart a time travel in epoch 0")
	}
	e, err := k.Epoch(r.ctx(), Resource)
	if err != nil {
		r.t.Fatalf("Epoch: %v", err)
	}
	return e
}

// newEpoch is a time travel (an etcd restore) as the pipeline writes it: the relist of
// the new epoch writes the cluster's versions, lower RVs than the sink holds, with
// checkpoint 0 until it ends; then the LIST's RV, far below the old checkpoint.
func newEpoch(r *run) {
	old := batch(100, r.f.change("a", 1, 90, change.OpCreate), r.f.change("b", 1, 95, change.OpCreate))
	r.write(old)
	travel := batch(0, epochOf(1, r.f.snapshot("a", 1, 40, 50), r.f.snapshot("c", 1, 45, 50))...)
	travel.Epoch = 1
	travel.TimeTravel = &change.TimeTravel{Epoch: 1, Reason: change.TravelListBelowCheckpoint, Checkpoint: 100, ListRV: 50, At: observedAt}
	r.write(travel)
	if e := r.epoch(); e != 1 {
		r.t.Errorf("epoch %d during the new epoch's relist, want 1", e)
	}
	r.restart()
	end := batch(50, epochOf(1, r.f.inferredDelete("b", 1, 50))...)
	end.Epoch = 1
	r.write(end)
	k := keys{
		{Namespace: "ns", Name: "a"}: {UID: uid("a", 1), RV: 40, Epoch: 1},
		{Namespace: "ns", Name: "c"}: {UID: uid("c", 1), RV: 45, Epoch: 1},
	}
	r.expectKeys(k, "after the new epoch's relist")
	r.expectCheckpoint(50, "after the new epoch's relist")
	if e := r.epoch(); e != 1 {
		r.t.Errorf("epoch %d after the new epoch's relist and a restart, want 1", e)
	}
	r.write(old) // a replay of the old epoch changes nothing
	got := r.keyIndex()
	if b := (change.Key{Namespace: "ns", Name: "b"}); !r.h.RemembersDeletes {
		delete(got, b) // this store forgot b's delete; the next relist removes b again
	}
	if !maps.Equal(got, k) {
		r.t.Errorf("after a replay of the old epoch's batch: key index %v, want %v", keys(got), k)
	}
	r.expectCheckpoint(50, "after a replay of the old epoch's batch")
}

// forgottenScopes is a scope removed from the configuration (a namespace dropped): the
// resource's sweeping relist reads a key index that holds that scope's keys too (and
// tombstones them, out of scope), then has the sink forget the scope's checkpoint, so a
// scope configured again later does not resume from a checkpoint whose changes it never
// wrote.
func forgottenScopes(r *run) {
	keeper, ok := r.sink.(interface {
		Scopes(context.Context, change.Resource) ([]string, error)
		ForgetScopes(context.Context, change.Resource, []string) error
	})
	if !ok {
		r.t.Fatalf("the sink keeps no scopes (no Scopes/ForgetScopes): a removed scope's keys and checkpoint would stay forever")
	}
	a, b := Resource, Resource
	a.Scope, b.Scope = "scope-a", "scope-b"
	ca, cb := r.f.change("a", 1, 10, change.OpCreate), r.f.change("b", 1, 11, change.OpCreate)
	ca.Resource, cb.Resource = a, b
	r.write(change.Batch{Resource: a, Changes: []change.Change{ca}, Checkpoint: 20})
	r.write(change.Batch{Resource: b, Changes: []change.Change{cb}, Checkpoint: 21})
	scopes := func(why string) []string {
		got, err := keeper.Scopes(r.ctx(), a)
		if err != nil {
			r.t.Fatalf("Scopes %s: %v", why, err)
		}
		slices.Sort(got)
		return got
	}
	if got := scopes("after both writes"); !slices.Equal(got, []string{"scope-a", "scope-b"}) {
		r.t.Errorf("scopes %q, want both", got)
	}
	k := keys{}
	err := r.sink.KeyIndex(r.ctx(), a, func(key change.Key, e change.Entry) error { k[key] = e; return nil })
	if err != nil {
		r.t.Fatal(err)
	}
	if want := want(ca, cb); !maps.Equal(k, want) {
		r.t.Errorf("scope-a's key index %v, want every scope's keys %v", k, want)
	}
	if err := keeper.ForgetScopes(r.ctx(), a, []string{"scope-a"}); err != nil {
		r.t.Fatal(err)
	}
	r.restart()
	keeper = r.sink.(interface {
		Scopes(context.Context, change.Resource) ([]string, error)
		ForgetScopes(context.Context, change.Resource, []string) error
	})
	if got := scopes("after forgetting scope-b and a restart"); !slices.Equal(got, []string{"scope-a"}) {
		r.t.Errorf("scopes %q after forgetting scope-b, want scope-a alone", got)
	}
	if ck, err := r.sink.Checkpoint(r.ctx(), b); err != nil || ck != 0 {
		r.t.Errorf("scope-b's checkpoint %d (%v) after it was forgotten, want 0", ck, err)
	}
	if ck, err := r.sink.Checkpoint(r.ctx(), a); err != nil || ck != 20 {
		r.t.Errorf("scope-a's checkpoint %d (%v), want 20 kept", ck, err)
	}
}
