package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
	"github.com/kube-cdc/kube-cdc/internal/version"
)

var configmaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func offsetsConfigFor(k *testenv.Kafka) offsetsConfig {
	return offsetsConfig{
		cluster:   "prod",
		brokers:   []string{k.Addr()},
		transport: k.Transport(),
		keyIndex: func(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
			return fn(change.Key{Namespace: "ns", Name: "from-data-topics"}, change.Entry{UID: "u", RV: 1})
		},
	}
}

func storeKeyIndex(t *testing.T, s checkpoint.Store, sink string, res change.Resource) map[string]change.Entry {
	t.Helper()
	got := map[string]change.Entry{}
	if err := s.KeyIndex(context.Background(), sink, res, func(k change.Key, e change.Entry) error {
		got[k.String()] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestKafkaStoreResumesFromTheLatestCheckpointAfterAProcessRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := testenv.NewKafka(t)
	deployments := change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}

	s, err := OpenCheckpoint(ctx, "prod", Options{Brokers: []string{k.Addr()}}, checkpoint.Options{Type: "kafka"})
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
		if got := string(msgs[0].Value); got != `{"resourceVersion":"5","format":1,"kubeCdc":"`+version.Short()+`"}` {
			t.Errorf("value %s", got)
		}
	}

	// A new process: a new store on the same broker, after a broker restart too.
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := openOffsetStore(ctx, "kube-cdc.offsets.prod", offsetsConfigFor(k))
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
	if got := storeKeyIndex(t, s2, "stream", configmaps); len(got) != 1 || got["ns/from-data-topics"].UID != "u" {
		t.Errorf("KeyIndex does not come from the keyIndexFunc: %v", got)
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
	s, err := openOffsetStore(ctx, "offsets", offsetsConfigFor(k))
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

func TestReadCheckpointReadsAMissingOffsetsTopicAsEmptyWithoutCreatingIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := testenv.NewKafka(t)
	opts := Options{Brokers: []string{k.Addr()}}
	r, err := ReadCheckpoint(ctx, "prod", opts, checkpoint.Options{Type: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := r.Load(ctx, "stream", configmaps); err != nil || rv != 0 {
		t.Errorf("Load from a missing offsets topic: %v, %v; want 0", rv, err)
	}
	r.Close()
	client := &kafka.Client{Addr: kafka.TCP(k.Addr()), Transport: k.Transport()}
	if n, err := listedPartitions(ctx, client, "kube-cdc.offsets.prod"); err != nil || n != 0 {
		t.Fatalf("after ReadCheckpoint the offsets topic has %d partitions (%v), want none: it created the topic", n, err)
	}

	// Once a writer has checkpointed, the reader sees it.
	w, err := OpenCheckpoint(ctx, "prod", opts, checkpoint.Options{Type: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, "stream", change.Batch{Resource: configmaps, Checkpoint: 42}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err = ReadCheckpoint(ctx, "prod", opts, checkpoint.Options{Type: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rv, err := r.Load(ctx, "stream", configmaps); err != nil || rv != 42 {
		t.Errorf("Load after a writer's commit: %v, %v; want 42", rv, err)
	}
}

// The offsets topic's records are versioned like the PostgreSQL schema: a store written
// before 0.1.0 (add646f's records, whose values carry no format) is read after an
// upgrade, and a record a newer kube-cdc wrote in a newer format stops an older one.
func TestKafkaStoreResumesFromAnOlderReleasesRecordsAndRefusesANewerFormat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := testenv.NewKafka(t)
	deployments := change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}
	key := func(resource string) []byte {
		return []byte(`["kube-cdc",{"cluster":"prod","sink":"stream","resource":"` + resource + `","scope":""}]`)
	}
	if err := k.CreateTopic(ctx, "offsets", 1, true); err != nil {
		t.Fatal(err)
	}
	w := k.Writer("offsets")
	defer w.Close()
	// The bytes add646f's offsetStore.Commit wrote (json.Marshal of its offsetValue).
	if err := w.WriteMessages(ctx,
		kafka.Message{Key: key("configmaps"), Value: []byte(`{"resourceVersion":"12345"}`)},
		kafka.Message{Key: key("deployments.apps"), Value: []byte(`{"resourceVersion":"777","epoch":2}`)},
	); err != nil {
		t.Fatal(err)
	}
	s, err := openOffsetStore(ctx, "offsets", offsetsConfigFor(k))
	if err != nil {
		t.Fatalf("open a store of records written before 0.1.0: %v", err)
	}
	for _, tc := range []struct {
		res   change.Resource
		rv    change.RV
		epoch int
	}{{configmaps, 12345, 0}, {deployments, 777, 2}} {
		rv, err := s.Load(ctx, "stream", tc.res)
		epoch, err2 := s.Epoch(ctx, "stream", tc.res)
		if err != nil || err2 != nil || rv != tc.rv || epoch != tc.epoch {
			t.Errorf("%s: checkpoint %d epoch %d (%v, %v), want %d epoch %d as stored", tc.res.ID(), uint64(rv), epoch, err, err2, uint64(tc.rv), tc.epoch)
		}
	}
	s.Close()

	if err := w.WriteMessages(ctx, kafka.Message{Key: key("configmaps"), Value: []byte(`{"resourceVersion":"12400","format":2,"kubeCdc":"9.9.9"}`)}); err != nil {
		t.Fatal(err)
	}
	_, err = openOffsetStore(ctx, "offsets", offsetsConfigFor(k))
	if !errors.Is(err, ErrCheckpointNewer) || !retry.IsTerminal(err) {
		t.Fatalf("open a store holding format 2: %v (terminal %v), want a terminal %v", err, retry.IsTerminal(err), ErrCheckpointNewer)
	}
	for _, want := range []string{"format 2, written by kube-cdc 9.9.9", "this kube-cdc " + version.Short() + " reads formats up to 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
}
