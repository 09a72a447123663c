package kafka

import (
	"path/filepath"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/sinks/sinktest"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

const conformancePartitions = 3

var opOfHeader = map[string]change.Op{"r": change.OpCreate, "c": change.OpCreate, "u": change.OpUpdate, "d": change.OpDelete}

// topicRecords reads back the records of res's topic: one per change, tombstones left out,
// each partition (so each key) in offset order.
func topicRecords(k *testenv.Kafka) func(t *testing.T, res change.Resource) []sinktest.Record {
	return func(t *testing.T, res change.Resource) []sinktest.Record {
		msgs, err := k.ReadAll(testCtx(t), TopicName(DefaultTopic, "prod", res))
		if err != nil {
			t.Fatal(err)
		}
		var out []sinktest.Record
		for _, m := range msgs {
			if m.Value == nil {
				continue
			}
			rv, err := change.ParseRV(header(m, HeaderRV))
			if err != nil {
				t.Fatalf("%s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
			}
			out = append(out, sinktest.Record{Key: change.ParseKey(string(m.Key)), RV: rv, Op: opOfHeader[header(m, HeaderOp)]})
		}
		return out
	}
}

// failMiddlePartition makes the broker refuse every produce to the partition of b's middle
// key until healed: the other partitions' records are acknowledged, that one's are not.
func failMiddlePartition(k *testenv.Kafka) func(t *testing.T, b change.Batch) func() {
	return func(t *testing.T, b change.Batch) func() {
		key := b.Changes[len(b.Changes)/2].Key.String()
		h, err := k.FailProduce(TopicName(DefaultTopic, "prod", b.Resource), testenv.PartitionOf(key, conformancePartitions), -1)
		if err != nil {
			t.Fatal(err)
		}
		return h.Remove
	}
}

func TestConformanceWithTheKafkaStore(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Cluster:               "prod",
		RetrySendsOnlyTheRest: true,
		KeyIndexFromRecords:   true,
		RemembersDeletes:      true,
		New: func(t *testing.T) sinktest.Target {
			k := testenv.NewKafka(t)
			opts := Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: conformancePartitions}
			return sinktest.Target{
				Open: func(t *testing.T) sinktest.Sink {
					return openConformanceSink(t, opts, checkpoint.Options{Type: TypeKafkaCheckpoint})
				},
				Records: topicRecords(k),
				Break:   failMiddlePartition(k),
			}
		},
	})
}

func TestConformanceWithAFileStore(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Cluster:               "prod",
		RetrySendsOnlyTheRest: true,
		New: func(t *testing.T) sinktest.Target {
			k := testenv.NewKafka(t)
			opts := Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: conformancePartitions}
			path := filepath.Join(t.TempDir(), "state.db")
			return sinktest.Target{
				Open: func(t *testing.T) sinktest.Sink {
					return openConformanceSink(t, opts, checkpoint.Options{Type: checkpoint.TypeFile, Path: path})
				},
				Records: topicRecords(k),
				Break:   failMiddlePartition(k),
			}
		},
	})
}

// openConformanceSink opens the sink "stream" of cluster "prod" with the checkpoint store
// cp selects, as the daemon does.
func openConformanceSink(t *testing.T, opts Options, cp checkpoint.Options) sinktest.Sink {
	store, err := OpenCheckpoint(testCtx(t), "prod", opts, cp)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(testCtx(t), "stream", "prod", opts, store, nil)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	return s
}
