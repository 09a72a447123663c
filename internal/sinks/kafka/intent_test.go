package kafka

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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
