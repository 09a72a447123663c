package kafka

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Resolved records are flushed by hand here (the interval is an hour, so the sink's own
// ticker never fires): what a tick would write is exactly what Flush writes.

func readResolved(t *testing.T, k *testenv.Kafka, topic string) []map[string]any {
	t.Helper()
	msgs, err := k.ReadAll(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		if err := json.Unmarshal(m.Value, &out[i]); err != nil {
			t.Fatalf("resolved record %s: %v", m.Value, err)
		}
		out[i]["key"] = string(m.Key)
		out[i]["header.op"] = header(m, HeaderOp)
		out[i]["header.rv"] = header(m, HeaderRV)
	}
	return out
}

func TestAResolvedRecordIsWrittenOnlyOnceItsBatchIsAcknowledgedAndBookmarksMoveIt(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions, ResolvedInterval: time.Hour})
	topic := ResolvedTopicName("", "", "prod", deployments)
	if topic != "kube.prod.resolved" {
		t.Fatalf("default resolved topic %q", topic)
	}
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	// One partition of the data topic refuses: the batch is not acknowledged, so its
	// checkpoint is no watermark yet.
	fault, err := k.FailProduce(TopicName(DefaultTopic, "prod", deployments), testenv.PartitionOf("ns/d00", partialPartitions), -1)
	if err != nil {
		t.Fatal(err)
	}
	b := partialBatch()
	write := s.Prepare(b)
	if err := write(ctx); err == nil {
		t.Fatal("write with a partition refusing succeeded")
	}
	if err := s.resolved.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readResolved(t, k, topic); len(got) != 0 {
		t.Fatalf("resolved records %v before the batch was acknowledged", got)
	}
	fault.Remove()
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.resolved.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A bookmark: a batch without changes.
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: b.Checkpoint + 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.resolved.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.resolved.Flush(ctx); err != nil { // nothing moved: nothing written
		t.Fatal(err)
	}
	got := readResolved(t, k, topic)
	want := []string{b.Checkpoint.String(), (b.Checkpoint + 10).String()}
	if len(got) != len(want) {
		t.Fatalf("resolved records %v, want RVs %v", got, want)
	}
	for i, r := range got {
		if r["resolvedRV"] != want[i] || r["header.rv"] != want[i] || r["header.op"] != "resolved" || r["op"] != "resolved" ||
			r["key"] != "prod/stream/deployments.apps" || r["cluster"] != "prod" || r["sink"] != "stream" ||
			r["group"] != "apps" || r["resource"] != "deployments" || r["scope"] != "" || r["epoch"] != 0.0 {
			t.Errorf("resolved record %d: %v, want RV %s", i, r, want[i])
		}
	}
}

func TestAMissingResolvedTopicFailsTheStartButNeverABatch(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	data := TopicName(DefaultTopic, "prod", deployments)
	if err := k.CreateTopic(ctx, data, 1, true); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, k, Options{ResolvedInterval: time.Hour, ResolvedTopic: "{topic}.resolved"})
	_, err := s.Checkpoint(ctx, deployments)
	if err == nil || !retry.IsTerminal(err) || !strings.Contains(err.Error(), data+".resolved") {
		t.Errorf("checkpoint without the resolved topic: %v, want a terminal error naming %s.resolved", err, data)
	}
	// Deleted after the start: batches are written, and the watermark waits.
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 5,
		Changes: []change.Change{chg(deployments, "ns", "web", 5, change.OpCreate, `{"v":1}`)}}); err != nil {
		t.Fatalf("write: %v", err)
	}
	err = s.resolved.Flush(ctx)
	if err == nil || !strings.Contains(err.Error(), data+".resolved") {
		t.Errorf("flush without the resolved topic: %v, want an error naming %s.resolved", err, data)
	}
	if len(s.resolved.Due()) != 1 {
		t.Errorf("the watermark not written is not due any more")
	}
}

// A store that groups commits makes a batch durable only at its next flush: until then a
// kill would re-emit the batch, so its checkpoint is no watermark yet, however
// acknowledged its records are.
func TestAResolvedRecordWaitsForTheGroupedCheckpointToBeDurable(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	store, err := checkpoint.OpenFileWith(filepath.Join(t.TempDir(), "state.db"), checkpoint.FileOptions{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, "stream", "prod", Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 2, ResolvedInterval: time.Hour}, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	topic := ResolvedTopicName("", "", "prod", deployments)
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 5,
		Changes: []change.Change{chg(deployments, "ns", "web", 5, change.OpCreate, `{"v":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.resolved.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readResolved(t, k, topic); len(got) != 0 {
		t.Fatalf("resolved records %v before the checkpoint was durable", got)
	}
	if err := store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.resolved.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readResolved(t, k, topic); len(got) != 1 || got[0]["resolvedRV"] != "5" {
		t.Fatalf("resolved records %v after the flush, want one at 5", got)
	}
	// Close flushes the store before the last resolved records: the pending watermark is
	// written too.
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readResolved(t, k, topic); len(got) != 2 || got[1]["resolvedRV"] != "9" {
		t.Errorf("resolved records %v after Close, want the last at 9", got)
	}
}
