package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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

// A topic another client creates between the sink's look-up and its own CreateTopics
// (TOPIC_ALREADY_EXISTS) is written all the same, with the partition count the brokers
// list for it: each key on its hash partition, as every other client puts it. The
// Transport's cache, refreshed only every 6 s, never lists it here.
func TestATopicAnotherClientCreatedMeanwhileIsWrittenOnItsOwnPartitions(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	topic := TopicName(DefaultTopic, "prod", deployments)
	if err := k.CreateTopic(ctx, topic, partialPartitions, true); err != nil {
		t.Fatal(err)
	}
	// kafka-go's Transport asks for every topic (and serves its clients' metadata from
	// what it got): it gets none.
	c := k.Cluster()
	var hidden atomic.Int32
	var blind atomic.Bool // until the sink wrote
	blind.Store(true)
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.MetadataRequest)
		if r.Topics != nil || !blind.Load() {
			return nil, nil, false
		}
		hidden.Add(1)
		host, port, _ := net.SplitHostPort(k.Addr())
		p, _ := strconv.Atoi(port)
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
		resp.ControllerID = 0
		return resp, nil, true
	})
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6}) // not the topic's 3
	b := partialBatch()
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	blind.Store(false)
	if hidden.Load() == 0 {
		t.Fatal("the sink's Transport never asked for every topic: the test tests nothing")
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
	msgs, err := k.ReadAll(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if want := testenv.PartitionOf(string(m.Key), partialPartitions); int32(m.Partition) != want {
			t.Errorf("record %s on partition %d, want %d", recordID(m), m.Partition, want)
		}
	}
}
