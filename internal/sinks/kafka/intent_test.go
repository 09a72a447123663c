package kafka

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// killedBeforeCommit is a file store whose process dies between a batch's acknowledged
// records and its commit: Commit never happens.
type killedBeforeCommit struct{ *checkpoint.File }

func (killedBeforeCommit) Commit(context.Context, string, change.Batch) error {
	return retry.Terminal(errors.New("killed before the commit"))
}

// A kill -9 after the broker acknowledged a batch and before the file store committed it
// used to leave records whose keys the index lacked: once those objects were deleted while
// kube-cdc was down, no relist tombstoned them, and the compacted topic kept them forever
// (found by e2e's cluster shape test). Every key a record went out for is in the index.
func TestAKillBetweenTheAcknowledgedRecordsAndTheCommitLeavesEveryKeySentInTheFileIndex(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	f, err := checkpoint.OpenFile(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := New(ctx, "stream", "prod", Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 3}, killedBeforeCommit{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := change.Batch{Resource: deployments, Checkpoint: 6, Changes: []change.Change{
		chg(deployments, "ns", "a", 5, change.OpCreate, `{"v":1}`),
		chg(deployments, "ns", "b", 6, change.OpCreate, `{"v":2}`),
	}}
	if err := s.Write(ctx, b); err == nil {
		t.Fatal("Write succeeded; the store was to fail its commit")
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments")
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d records (%v), want both sent before the commit", len(msgs), err)
	}
	held := map[string]change.Entry{}
	if err := f.KeyIndex(ctx, "stream", deployments, func(k change.Key, e change.Entry) error {
		held[k.String()] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ns/a", "ns/b"} {
		e, ok := held[name]
		if !ok {
			t.Errorf("%s: sent, not in the key index: a relist after its object is gone would never tombstone it", name)
		} else if e.RV != 0 {
			t.Errorf("%s held at RV %d: a version never committed must not look written", name, e.RV)
		}
	}
	if ck, err := f.Load(ctx, "stream", deployments); err != nil || ck != 0 {
		t.Errorf("checkpoint %d (%v), want none", ck, err)
	}
}

// With grouped commits (checkpoint.FileOptions.FlushInterval) a kill after Write returned
// can lose the commits since the last flush: the restart re-emits those records, which
// at least once allows, but the file never lacks a key whose record went out (the intents
// are durable before the send), and its checkpoint is never ahead of the key changes
// under it.
func TestWithGroupedCommitsAKillAfterTheWriteReemitsButLeavesEveryKeySentInTheFileIndex(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := checkpoint.OpenFileWith(path, checkpoint.FileOptions{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, "stream", "prod", Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 3}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, b := range []change.Batch{
		{Resource: deployments, Checkpoint: 6, Changes: []change.Change{
			chg(deployments, "ns", "a", 5, change.OpCreate, `{"v":1}`),
			chg(deployments, "ns", "b", 6, change.OpCreate, `{"v":2}`),
		}},
		{Resource: deployments, Checkpoint: 8, Changes: []change.Change{
			chg(deployments, "ns", "a", 7, change.OpDelete, `{"v":1}`),
			chg(deployments, "ns", "c", 8, change.OpCreate, `{"v":3}`),
		}},
	} {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Killed now: the file as it is on disk.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	after := filepath.Join(t.TempDir(), "after-kill.db")
	if err := os.WriteFile(after, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := checkpoint.OpenFile(after)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	held := map[string]change.Entry{}
	if err := g.KeyIndex(ctx, "stream", deployments, func(k change.Key, e change.Entry) error {
		held[k.String()] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ck, err := g.Load(ctx, "stream", deployments)
	if err != nil {
		t.Fatal(err)
	}
	// The second batch's intent (c) flushed the first batch's commit with it; the second
	// commit was still pending.
	if ck != 6 || held["ns/a"].RV != 5 || held["ns/b"].RV != 6 || held["ns/c"] != (change.Entry{UID: "uid-c"}) || len(held) != 3 {
		t.Errorf("after the kill: checkpoint %d, key index %v; want 6 with a@5, b@6 and c at RV 0 (a restart re-emits the second batch)", ck, held)
	}
	if msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments"); err != nil || len(msgs) != 5 {
		t.Fatalf("%d records (%v), want all 5 sent", len(msgs), err)
	}
	// The sink's Close writes what was pending.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if ck, err := h.Load(ctx, "stream", deployments); err != nil || ck != 8 {
		t.Errorf("after Close the file's checkpoint is %d (%v), want 8", ck, err)
	}
}
