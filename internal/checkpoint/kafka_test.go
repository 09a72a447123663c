package checkpoint

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func kafkaConfig(k *testenv.Kafka) KafkaConfig {
	return KafkaConfig{
		Cluster:   "prod",
		Brokers:   []string{k.Addr()},
		Transport: k.Transport(),
		KeyIndex: func(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
			return fn(change.Key{Namespace: "ns", Name: "from-data-topics"}, change.Entry{UID: "u", RV: 1})
		},
	}
}

func TestKafkaStoreResumesFromTheLatestCheckpointAfterAProcessRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := testenv.NewKafka(t)
	deployments := change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}

	s, err := Open(ctx, Options{Type: "kafka"}, Env{Cluster: "prod", Kafka: &KafkaConfig{
		Brokers: []string{k.Addr()}, Transport: k.Transport(), KeyIndex: kafkaConfig(k).KeyIndex,
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rv := range []change.RV{5, 9, 7} { // 7 is a replay: must not move it back
		if err := s.Commit(ctx, "stream", change.Batch{Resource: configmaps, Checkpoint: rv}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, "stream", change.Batch{Resource: deployments, Checkpoint: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "other", change.Batch{Resource: configmaps, Checkpoint: 3}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The created topic is compacted and follows the Connect offsets convention.
	msgs, err := k.ReadAll(ctx, "kube-cdc.offsets.prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 {
		t.Errorf("offsets topic holds %d records, want 4 (no record for the replay)", len(msgs))
	}
	if len(msgs) > 0 {
		if got, want := string(msgs[0].Key), `["kube-cdc",{"cluster":"prod","sink":"stream","resource":"configmaps","scope":""}]`; got != want {
			t.Errorf("key %s, want %s", got, want)
		}
		if got := string(msgs[0].Value); got != `{"resourceVersion":"5"}` {
			t.Errorf("value %s", got)
		}
	}

	// A new process: a new store on the same broker, after a broker restart too.
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenKafka(ctx, "kube-cdc.offsets.prod", kafkaConfig(k))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, tc := range []struct {
		sink string
		res  change.Resource
		want change.RV
	}{{"stream", configmaps, 9}, {"stream", deployments, 100}, {"other", configmaps, 3}, {"other", deployments, 0}} {
		if rv, err := s2.Load(ctx, tc.sink, tc.res); err != nil || rv != tc.want {
			t.Errorf("Load(%s, %s) = %v, %v; want %v", tc.sink, tc.res.ID(), rv, err, tc.want)
		}
	}
	if got := keyIndex(t, s2, "stream", configmaps); len(got) != 1 || got["ns/from-data-topics"].UID != "u" {
		t.Errorf("KeyIndex does not come from the KeyIndexFunc: %v", got)
	}
	if err := s2.Commit(ctx, "stream", change.Batch{Resource: configmaps, Checkpoint: 11}); err != nil {
		t.Fatal(err)
	}
	if rv, _ := s2.Load(ctx, "stream", configmaps); rv != 11 {
		t.Errorf("after commit Load = %v, want 11", rv)
	}
}

func TestKafkaStoreCommitFailsRetryablyWhileTheBrokerIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := testenv.NewKafka(t)
	s, err := OpenKafka(ctx, "offsets", kafkaConfig(k))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k.StopBroker()
	err = s.Commit(ctx, "stream", change.Batch{Resource: configmaps, Checkpoint: 4})
	if err == nil {
		t.Fatal("commit to a stopped broker succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("commit hung until the test deadline: %v", err)
	}
	if rv, _ := s.Load(ctx, "stream", configmaps); rv != 0 {
		t.Errorf("failed commit moved the checkpoint to %v", rv)
	}
	if err := k.StartBroker(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "stream", change.Batch{Resource: configmaps, Checkpoint: 4}); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
}
