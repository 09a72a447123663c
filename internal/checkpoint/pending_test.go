package checkpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Tests of grouped commits (FileOptions.FlushInterval). A kill -9 is a copy of the file as
// it is on disk at that moment (what a new process would open), taken while the store is
// still open: Commits not yet flushed are only in the dead process's memory.

// never is a flush interval no test outlives: flushes happen only when a test asks.
const never = time.Hour

func openGrouped(t *testing.T, interval time.Duration) (*File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := OpenFileWith(path, FileOptions{FlushInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

// killed returns a store opened on a copy of the file at path as it is now.
func killed(t *testing.T, path string) *File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "after-kill.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(cp)
	if err != nil {
		t.Fatalf("the file a kill left does not open: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// inFile is the checkpoint and key index of (sink, res) in f's file itself, without the
// overlays.
func inFile(t *testing.T, f *File, sink string, res change.Resource) (change.RV, map[string]change.Entry) {
	t.Helper()
	var rv change.RV
	keys := map[string]change.Entry{}
	if err := f.db.View(func(tx *bolt.Tx) error {
		b := resourceBucket(tx, sink, res)
		if b == nil {
			return nil
		}
		rv = getCheckpoint(b)
		if kb := b.Bucket(bucketKeys); kb != nil {
			return kb.ForEach(func(k, v []byte) error {
				e, err := decodeEntry(v)
				keys[string(k)] = e
				return err
			})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rv, keys
}

func mustCommit(t *testing.T, s Store, sink string, b change.Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), sink, b); err != nil {
		t.Fatal(err)
	}
}

func TestGroupedCommitsAreReadAtOnceAndReachTheFileOnlyWithTheFlush(t *testing.T) {
	ctx := context.Background()
	f, path := openGrouped(t, never)
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 12, Epoch: 1, Changes: []change.Change{upsert("ns", "a", uidA, 10), upsert("ns", "b", "u-b", 12)}})
	if rv, err := f.Load(ctx, "s", configmaps); err != nil || rv != 12 {
		t.Errorf("Load = %v, %v; want the commit's 12 before any flush", rv, err)
	}
	if e, err := f.Epoch(ctx, "s", configmaps); err != nil || e != 1 {
		t.Errorf("Epoch = %v, %v; want 1", e, err)
	}
	// An update of a key only the overlay holds needs no intent.
	if absent, err := f.absent("s", change.Batch{Resource: configmaps, Changes: []change.Change{upsert("ns", "a", uidA, 13)}}); err != nil || len(absent) != 0 {
		t.Errorf("absent = %v, %v; want none: ns/a is committed", absent, err)
	}
	if rv, keys := inFile(t, f, "s", configmaps); rv != 0 || len(keys) != 0 {
		t.Errorf("the file holds checkpoint %v and keys %v before the flush", rv, keys)
	}
	if k := killed(t, path); true {
		if rv, _ := k.Load(ctx, "s", configmaps); rv != 0 {
			t.Errorf("a kill before the flush left checkpoint %v", rv)
		}
	}

	durable := make(chan struct{})
	f.WhenDurable(func() { close(durable) })
	select {
	case <-durable:
		t.Fatal("WhenDurable called before the flush")
	default:
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-durable:
	default:
		t.Fatal("WhenDurable not called by the flush")
	}
	rv, keys := inFile(t, f, "s", configmaps)
	if rv != 12 || keys["ns/a"] != (change.Entry{UID: uidA, RV: 10}) || keys["ns/b"] != (change.Entry{UID: "u-b", RV: 12}) {
		t.Errorf("after the flush the file holds %v, %v", rv, keys)
	}
	// Nothing pending: called at once.
	called := false
	f.WhenDurable(func() { called = true })
	if !called {
		t.Error("WhenDurable with nothing pending did not call at once")
	}
}

func TestTheFlushIntervalWritesPendingCommitsByItselfWhenItsClockReachesTheInterval(t *testing.T) {
	// An hour on a fake clock: only the steps below can bring the flush.
	clk := clocktesting.NewFakeClock(time.Now())
	f, err := OpenFileWith(filepath.Join(t.TempDir(), "state.db"), FileOptions{FlushInterval: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 7, Changes: []change.Change{upsert("ns", "a", uidA, 7)}})
	durable := make(chan struct{})
	f.WhenDurable(func() { close(durable) })
	if !clk.HasWaiters() {
		t.Fatal("a Commit with a flush interval armed no timer on the store's clock")
	}
	clk.Step(time.Hour - time.Millisecond)
	if rv, keys := inFile(t, f, "s", configmaps); rv != 0 || len(keys) != 0 {
		t.Fatalf("before the interval the file holds %v, %v; want nothing", rv, keys)
	}
	clk.Step(time.Millisecond)
	select {
	case <-durable:
	case <-time.After(30 * time.Second):
		t.Fatal("no flush within 30 s of the fake clock reaching the flush interval")
	}
	if rv, keys := inFile(t, f, "s", configmaps); rv != 7 || len(keys) != 1 {
		t.Errorf("after the interval's flush the file holds %v, %v", rv, keys)
	}
}

func TestCloseWritesWhatIsPending(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := OpenFileWith(path, FileOptions{FlushInterval: never})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 9, Changes: []change.Change{upsert("ns", "a", uidA, 9)}})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 10}); err == nil {
		t.Error("Commit after Close succeeded")
	}
	g, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if rv, _ := g.Load(ctx, "s", configmaps); rv != 9 {
		t.Errorf("after Close and reopen the checkpoint is %v, want 9", rv)
	}
	if got := keyIndex(t, g, "s", configmaps); got["ns/a"] != (change.Entry{UID: uidA, RV: 9}) {
		t.Errorf("after Close and reopen the key index is %v", got)
	}
}

// A delete committed but not flushed, then the key created again: the new key's intent
// must be in the file before its records go out, and no later flush of the delete may
// take it back out. The kill comes after the records went out and before their Commit.
func TestAnIntentSurvivesAPendingDeleteOfItsKeyAndAKill(t *testing.T) {
	ctx := context.Background()
	const uidNew = "3f1e0b0c-5a53-4c4e-9b1f-0d6b2f6f9a09"
	f, path := openGrouped(t, never)
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 5, Changes: []change.Change{upsert("ns", "a", uidA, 5)}})
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 6, Changes: []change.Change{del("ns", "a", uidA, 6)}})
	recreate := change.Batch{Resource: configmaps, Checkpoint: 8, Changes: []change.Change{upsert("ns", "a", uidNew, 8)}}
	if absent, err := f.absent("s", recreate); err != nil || len(absent) != 1 {
		t.Fatalf("absent after the pending delete = %v, %v; want ns/a", absent, err)
	}
	if _, keys := inFile(t, f, "s", configmaps); len(keys) != 1 {
		t.Fatalf("the delete reached the file before any flush: %v", keys)
	}
	if err := f.Intend(ctx, "s", recreate); err != nil {
		t.Fatal(err)
	}
	// Killed now, records sent, not committed.
	k := killed(t, path)
	if got := keyIndex(t, k, "s", configmaps); got["ns/a"] != (change.Entry{UID: uidNew}) {
		t.Errorf("after a kill between the records and their commit the index holds %v; want ns/a at RV 0 (its tombstone would be lost)", got)
	}
	// Not killed: the next flush keeps the intent, and the Commit replaces it.
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, keys := inFile(t, f, "s", configmaps); keys["ns/a"] != (change.Entry{UID: uidNew}) {
		t.Errorf("a flush after the intent left %v in the file; want ns/a at RV 0", keys)
	}
	mustCommit(t, f, "s", recreate)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rv, keys := inFile(t, f, "s", configmaps); rv != 8 || keys["ns/a"] != (change.Entry{UID: uidNew, RV: 8}) {
		t.Errorf("after the commit the file holds %v, %v", rv, keys)
	}
}

// A kill at any moment leaves the file at some flush: every batch up to a point, none
// after it, each whole, so a checkpoint is never ahead of the key changes below it.
func TestAKillLeavesTheFileAtAFlushNeverACheckpointWithoutItsKeys(t *testing.T) {
	ctx := context.Background()
	f, path := openGrouped(t, never)
	for i := 1; i <= 6; i++ {
		mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: change.RV(10 * i), Changes: []change.Change{upsert("ns", fmt.Sprintf("k%d", i), "u", change.RV(10*i))}})
		if i == 3 {
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	k := killed(t, path)
	if rv, _ := k.Load(ctx, "s", configmaps); rv != 30 {
		t.Errorf("checkpoint after the kill %v, want 30 (the last flush)", rv)
	}
	got := keyIndex(t, k, "s", configmaps)
	if len(got) != 3 || got["ns/k3"].RV != 30 {
		t.Errorf("key index after the kill %v, want k1..k3", got)
	}
}

// A flush that fails keeps its Commits, readable and in order under the later ones; the
// next Commit returns the error. Here the failure is a batch of an unnamed sink, which
// bbolt refuses (a bucket needs a name), standing for a disk that refuses writes.
func TestAFailedFlushKeepsItsCommitsAndTheNextCommitReturnsItsError(t *testing.T) {
	ctx := context.Background()
	f, path := openGrouped(t, never)
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 5, Changes: []change.Change{upsert("ns", "a", uidA, 5)}})
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, f, "s", change.Batch{Resource: configmaps, Checkpoint: 6, Changes: []change.Change{upsert("ns", "b", "u-b", 6)}})
	mustCommit(t, f, "", change.Batch{Resource: configmaps, Checkpoint: 1})
	if err := f.Flush(ctx); err == nil {
		t.Fatal("the flush of a batch bbolt refuses succeeded")
	}
	durable := false
	f.WhenDurable(func() { durable = true })
	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 7, Changes: []change.Change{del("ns", "a", uidA, 7)}}); err == nil {
		t.Error("a Commit after a failed flush succeeded without the flush")
	}
	if durable {
		t.Error("WhenDurable called though the flush failed")
	}
	if rv, _ := f.Load(ctx, "s", configmaps); rv != 7 {
		t.Errorf("Load after the failed flush = %v, want 7: the overlay keeps every Commit", rv)
	}
	k := killed(t, path)
	if rv, _ := k.Load(ctx, "s", configmaps); rv != 5 {
		t.Errorf("the file after a failed flush holds checkpoint %v, want the last good flush's 5", rv)
	}
	if got := keyIndex(t, k, "s", configmaps); len(got) != 1 || got["ns/a"].RV != 5 {
		t.Errorf("the file after a failed flush holds %v", got)
	}
}

// Grouped Commits leave the file exactly as the same Commits written one by one would:
// replays of older batches, deletes and re-creates, epochs and scopes, flushed at random
// points, in one file and the other.
func TestGroupedCommitsEndInTheSameStateAsCommitsWrittenOneByOne(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	scoped := configmaps
	scoped.Scope = "x"
	for run := range 8 {
		each, err := OpenFile(filepath.Join(t.TempDir(), "each.db"))
		if err != nil {
			t.Fatal(err)
		}
		grouped, _ := openGrouped(t, never)
		var batches []change.Batch
		rv := change.RV(1)
		for range 40 {
			res := configmaps
			if rng.IntN(4) == 0 {
				res = scoped
			}
			b := change.Batch{Resource: res, Epoch: rng.IntN(2)}
			for range 1 + rng.IntN(4) {
				name := fmt.Sprintf("k%d", rng.IntN(6))
				c := upsert("ns", name, fmt.Sprintf("u%d", rng.IntN(2)), rv)
				c.Epoch = b.Epoch
				if rng.IntN(3) == 0 {
					c.Op = change.OpDelete
				}
				b.Changes = append(b.Changes, c)
				rv++
			}
			b.Checkpoint = rv - 1
			batches = append(batches, b)
			if len(batches) > 2 && rng.IntN(5) == 0 { // a replay of an older batch
				batches = append(batches, batches[rng.IntN(len(batches)-1)])
			}
		}
		for _, b := range batches {
			if rng.IntN(3) == 0 {
				if err := grouped.Intend(ctx, "s", b); err != nil {
					t.Fatal(err)
				}
				if err := each.Intend(ctx, "s", b); err != nil {
					t.Fatal(err)
				}
			}
			mustCommit(t, each, "s", b)
			mustCommit(t, grouped, "s", b)
			if rng.IntN(6) == 0 {
				if err := grouped.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := grouped.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, res := range []change.Resource{configmaps, scoped} {
			wantRV, wantKeys := inFile(t, each, "s", res)
			gotRV, gotKeys := inFile(t, grouped, "s", res)
			if gotRV != wantRV || fmt.Sprint(gotKeys) != fmt.Sprint(wantKeys) {
				t.Fatalf("run %d, scope %q: grouped file holds %v %v, one by one %v %v", run, res.Scope, gotRV, gotKeys, wantRV, wantKeys)
			}
		}
		each.Close()
	}
}

// Commits of several resources at once, reads, and the interval's flushes, under -race.
func TestGroupedCommitsOfManyResourcesAtOnce(t *testing.T) {
	ctx := context.Background()
	f, _ := openGrouped(t, time.Millisecond)
	var wg sync.WaitGroup
	for r := range 4 {
		res := configmaps
		res.Resource = fmt.Sprintf("r%d", r)
		wg.Go(func() {
			for i := 1; i <= 200; i++ {
				b := change.Batch{Resource: res, Checkpoint: change.RV(i), Changes: []change.Change{upsert("ns", fmt.Sprintf("k%d", i%7), "u", change.RV(i))}}
				if err := f.Intend(ctx, "s", b); err != nil {
					t.Error(err)
					return
				}
				if err := f.Commit(ctx, "s", b); err != nil {
					t.Error(err)
					return
				}
				if rv, err := f.Load(ctx, "s", res); err != nil || rv != change.RV(i) {
					t.Errorf("%s: Load = %v, %v after committing %d", res.Resource, rv, err, i)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		res := configmaps
		res.Resource = fmt.Sprintf("r%d", r)
		if rv, keys := inFile(t, f, "s", res); rv != 200 || len(keys) != 7 {
			t.Errorf("%s: the file holds %v and %d keys, want 200 and 7", res.Resource, rv, len(keys))
		}
	}
}

// A key another scope of the resource holds must still get an intent in the batch's own
// scope: that scope may commit the key's delete between this Intend and this batch's
// Commit, and a kill then would leave the sent record in no scope's index, never to be
// tombstoned.
func TestAnIntentIsKeptWhenAnotherScopeThatHeldTheKeyDeletesItBeforeTheCommit(t *testing.T) {
	ctx := context.Background()
	scopeA, scopeB := configmaps, configmaps
	scopeA.Scope, scopeB.Scope = "a", "b"
	f, path := openGrouped(t, 0)
	mustCommit(t, f, "s", change.Batch{Resource: scopeA, Checkpoint: 5, Changes: []change.Change{upsert("ns", "k", uidA, 5)}})
	b := change.Batch{Resource: scopeB, Checkpoint: 7, Changes: []change.Change{upsert("ns", "k", uidA, 7)}}
	if err := f.Intend(ctx, "s", b); err != nil {
		t.Fatal(err)
	}
	// Scope a's delete commits; b's records are sent, and the process is killed before
	// b's Commit.
	mustCommit(t, f, "s", change.Batch{Resource: scopeA, Checkpoint: 6, Changes: []change.Change{del("ns", "k", uidA, 6)}})
	k := killed(t, path)
	if got, ok := keyIndex(t, k, "s", scopeB)["ns/k"]; !ok || got.RV != 0 {
		t.Errorf("after the other scope's delete and a kill the index holds ns/k = %v (present %v); want it at RV 0, or its tombstone is lost", got, ok)
	}
}
