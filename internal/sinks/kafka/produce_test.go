package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// spreadBatch is n creates of distinct keys, on every partition of a topic of 6.
func spreadBatch(t *testing.T, n int) change.Batch {
	b := change.Batch{Resource: deployments, Checkpoint: change.RV(n + 1)}
	used := map[int32]bool{}
	for i := range n {
		name := fmt.Sprintf("d%03d", i)
		b.Changes = append(b.Changes, chg(deployments, "ns", name, change.RV(i+1), change.OpCreate, `{}`))
		used[testenv.PartitionOf("ns/"+name, 6)] = true
	}
	if len(used) != 6 {
		t.Fatalf("the batch spans %d partitions, want 6", len(used))
	}
	return b
}

func TestAChunkOnEveryPartitionOfOneBrokerGoesInOneProduceRequest(t *testing.T) {
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6})
	ctx := testCtx(t)
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	var produces atomic.Int32
	k.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster().KeepControl()
		produces.Add(1)
		return nil, nil, false
	})
	b := spreadBatch(t, 60)
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := produces.Load(); n != 1 {
		t.Errorf("%d produce requests for a chunk on 6 partitions of one broker, want 1", n)
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
}

// holdFirstProduce makes the broker sit on the first produce request until release is
// closed (then handle it as usual); later ones are handled at once.
func holdFirstProduce(k *testenv.Kafka, release <-chan struct{}) {
	c := k.Cluster()
	var seen atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if seen.Swap(true) {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
}

func TestACancelledWriteReturnsWithoutWaitingForTheBroker(t *testing.T) {
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6}) // WriteTimeout: 10 s
	if _, err := s.Checkpoint(testCtx(t), deployments); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	holdFirstProduce(k, release)
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := s.Write(ctx, spreadBatch(t, 12))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the cancelled write returned after %v, want soon after the cancel", took)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestAProduceTheBrokerSitsOnFailsAfterTheWriteTimeoutAndTheNextWriteGoesThrough(t *testing.T) {
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6, WriteTimeout: 500 * time.Millisecond})
	ctx := testCtx(t)
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	holdFirstProduce(k, release)
	b := spreadBatch(t, 12)
	start := time.Now()
	err := s.Write(ctx, b)
	took := time.Since(start)
	close(release)
	if err == nil {
		t.Fatal("a produce the broker never answered succeeded")
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("the write failed after %v, want between the write timeout (500ms) and 1.5 times it, give or take", took)
	}
	if retry.IsTerminal(err) {
		t.Errorf("a timeout should be retryable: %v", err)
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("the write after the timeout: %v", err)
	}
}

// writtenSpread is a sink on k whose topic of 6 partitions holds spreadBatch(t, 12),
// written once (so its leaders are known), with that batch to write again.
func writtenSpread(t *testing.T, k *testenv.Kafka) (*Sink, context.Context, change.Batch) {
	t.Helper()
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6})
	ctx := testCtx(t)
	b := spreadBatch(t, 12)
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	return s, ctx, b
}

// A partition's leader moves to another live broker (a broker restarting, a
// reassignment). The sink's Transport keeps routing to the old leader until its next
// metadata refresh, up to 6 s away: the write after the one the old leader refused must
// learn the new leaders from a broker, not from that cache.
func TestTheWriteAfterALeaderMovedGoesToTheNewLeader(t *testing.T) {
	k := testenv.NewKafka(t)
	node, _, err := k.Cluster().AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, ctx, b := writtenSpread(t, k)
	// Every partition moves to the other broker (testenv's first is node 0).
	topic := TopicName(DefaultTopic, "prod", deployments)
	want := map[int32]int32{}
	for p := range int32(6) {
		to := node
		if k.Cluster().LeaderFor(topic, p) == node {
			to = 0
		}
		if err := k.Cluster().MoveTopicPartition(topic, p, to); err != nil {
			t.Fatal(err)
		}
		want[p] = to
	}
	// The old leader refuses the moved partitions' records (NOT_LEADER_OR_FOLLOWER): they
	// must reach the new leader in this write's own retry of its unacknowledged records
	// or, at the latest, in the next write.
	if err := s.Write(ctx, b); err != nil {
		if retry.IsTerminal(err) {
			t.Fatalf("a moved leader failed the write for good: %v", err)
		}
		if err := s.Write(ctx, b); err != nil {
			t.Fatalf("the write after the one the old leader refused: %v; want it sent to the new leader", err)
		}
	}
	for p, to := range want {
		if got := k.Cluster().LeaderFor(topic, p); got != to {
			t.Fatalf("partition %d is led by node %d, want %d", p, got, to)
		}
	}
}
