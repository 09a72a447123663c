package kafka

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

const partialPartitions = 3

// partialBatch is 20 keys with three versions each, every fifth key ending deleted (a
// record and a tombstone), in RV order: records on every partition of a 3-partition topic.
func partialBatch() change.Batch {
	var cs []change.Change
	rv := change.RV(100)
	for v := range 3 {
		for i := range 20 {
			op := change.OpUpdate
			switch {
			case v == 0:
				op = change.OpCreate
			case v == 2 && i%5 == 0:
				op = change.OpDelete
			}
			cs = append(cs, chg(deployments, "ns", fmt.Sprintf("d%02d", i), rv, op, fmt.Sprintf(`{"v":%d}`, v)))
			rv++
		}
	}
	return change.Batch{Resource: deployments, Checkpoint: rv + 10, Changes: cs}
}

// recordID names one record: key, RV and op, and whether it is the tombstone after a delete.
func recordID(m kafka.Message) string {
	id := fmt.Sprintf("%s@%s:%s", m.Key, header(m, HeaderRV), header(m, HeaderOp))
	if m.Value == nil {
		id += "(tombstone)"
	}
	return id
}

// expectEveryRecordOnceInKeyOrder fails unless the topic holds each record of b exactly
// once, and each key's records in the order of b (a delete's tombstone right after it).
func expectEveryRecordOnceInKeyOrder(t *testing.T, k *testenv.Kafka, b change.Batch) {
	t.Helper()
	var want []kafka.Message
	for i := range b.Changes {
		want = appendMessages(want, "", &b.Changes[i], nil)
	}
	msgs, err := k.ReadAll(testCtx(t), TopicName(DefaultTopic, "prod", b.Resource))
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	perKey := map[string][]string{}
	for _, m := range msgs {
		held[recordID(m)]++
		perKey[string(m.Key)] = append(perKey[string(m.Key)], recordID(m))
	}
	wantPerKey := map[string][]string{}
	for _, m := range want {
		id := recordID(m)
		if held[id] != 1 {
			t.Errorf("record %s is in the topic %d times, want once", id, held[id])
		}
		wantPerKey[string(m.Key)] = append(wantPerKey[string(m.Key)], id)
	}
	if len(msgs) != len(want) {
		t.Errorf("the topic holds %d records, want the batch's %d", len(msgs), len(want))
	}
	for key, ids := range wantPerKey {
		if fmt.Sprint(perKey[key]) != fmt.Sprint(ids) {
			t.Errorf("key %s: records %v, want %v", key, perKey[key], ids)
		}
	}
}

// A produce that fails for one partition leaves kafka-go's WriteErrors with the other
// partitions' records acknowledged. The sink must write again only the refused records:
// sending the batch again from its first record would put every acknowledged record in
// the topic twice.
func TestAPartialProduceFailureWritesAgainOnlyTheRefusedRecords(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions})
	if _, err := s.Checkpoint(ctx, deployments); err != nil { // creates the topic
		t.Fatal(err)
	}
	b := partialBatch()
	fault, err := k.FailProduce(TopicName(DefaultTopic, "prod", deployments), testenv.PartitionOf("ns/d00", partialPartitions), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write: %v (the refused records should have been written again)", err)
	}
	if fault.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1: the test did not exercise a partial failure", fault.Hits())
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
}

// When the refused partition keeps refusing, the write returns a retryable error with the
// checkpoint unmoved; the pipeline then calls the same prepared write again, which must send
// only the records still unacknowledged, not encode and send the batch from scratch.
func TestARetriedWriteAfterAPartialFailureSendsOnlyTheUnacknowledgedRecords(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions})
	topic := TopicName(DefaultTopic, "prod", deployments)
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	b := partialBatch()
	refused := testenv.PartitionOf("ns/d00", partialPartitions)
	fault, err := k.FailProduce(topic, refused, -1)
	if err != nil {
		t.Fatal(err)
	}
	write := s.Prepare(b)
	err = write(ctx)
	if err == nil || retry.IsTerminal(err) {
		t.Fatalf("write with one partition refusing: %v (terminal %v), want a retryable error", err, retry.IsTerminal(err))
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != 0 {
		t.Fatalf("checkpoint moved to %d before every record was acknowledged", rv)
	}
	msgs, err := k.ReadAll(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if int32(m.Partition) == refused {
			t.Fatalf("record %s reached the refusing partition %d", recordID(m), refused)
		}
	}
	if len(msgs) == 0 {
		t.Fatal("no partition acknowledged anything: the test did not exercise a partial failure")
	}

	fault.Remove()
	if err := write(ctx); err != nil {
		t.Fatalf("the retried write: %v", err)
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
}

// A batch bigger than one produce request per partition (more than writerBatchSize
// records) must still keep each key in order when a partition refuses one request: had
// kafka-go sent that partition's records as two requests, the second could be
// acknowledged after the first was refused, and writing the first again would put older
// versions of its keys after newer ones.
func TestAPartialFailureOfABatchLargerThanOneRequestKeepsEachKeyInOrder(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions})
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	var cs []change.Change
	for i := range 6 * writerBatchSize {
		cs = append(cs, chg(deployments, "ns", fmt.Sprintf("d%02d", i%30), change.RV(100+i), change.OpUpdate, `{}`))
	}
	b := change.Batch{Resource: deployments, Checkpoint: change.RV(100 + len(cs)), Changes: cs}
	fault, err := k.FailProduce(TopicName(DefaultTopic, "prod", deployments), testenv.PartitionOf("ns/d00", partialPartitions), 1)
	if err != nil {
		t.Fatal(err)
	}
	write := s.Prepare(b)
	if err := write(ctx); err != nil { // the pipeline's retry
		t.Logf("first attempt: %v", err)
		if err := write(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fault.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", fault.Hits())
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
}
