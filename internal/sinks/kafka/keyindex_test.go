package kafka

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func TestKafkaCheckpointStoreResumesAndRebuildsTheKeyIndexFromTheDataTopic(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	opts := Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 3}
	cp := checkpoint.Options{Type: "kafka"}

	store, err := OpenCheckpoint(ctx, "prod", opts, cp)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, "stream", "prod", opts, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changes []change.Change
	for i := range 10 {
		changes = append(changes, chg(deployments, "ns", fmt.Sprintf("d%d", i), change.RV(100+i), change.OpCreate, `{}`))
	}
	changes = append(changes,
		chg(deployments, "ns", "d3", 200, change.OpUpdate, `{"v":2}`),
		chg(deployments, "ns", "d4", 201, change.OpDelete, `{}`),
	)
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 205, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A new process, after a broker restart.
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	store, err = OpenCheckpoint(ctx, "prod", opts, cp)
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(ctx, "stream", "prod", opts, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rv, err := s.Checkpoint(ctx, deployments); err != nil || rv != 205 {
		t.Fatalf("checkpoint after restart %v, %v; want 205", rv, err)
	}
	got := map[string]change.Entry{}
	if err := s.KeyIndex(ctx, deployments, func(k change.Key, e change.Entry) error { got[k.String()] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 9 {
		t.Errorf("key index has %d keys, want 9: %v", len(got), got)
	}
	if _, ok := got["ns/d4"]; ok {
		t.Error("deleted key ns/d4 is in the key index")
	}
	if got["ns/d3"] != (change.Entry{UID: "uid-d3", RV: 200}) {
		t.Errorf("ns/d3 = %+v, want its latest version", got["ns/d3"])
	}
	// A resource never written has an empty index, not an error.
	if err := s.KeyIndex(ctx, nodes, func(change.Key, change.Entry) error { return fmt.Errorf("unexpected key") }); err != nil {
		t.Errorf("key index of an unwritten resource: %v", err)
	}
}

// TestKeyIndexRebuildFrom20kRecords measures the kafka store's key index source: 20,000
// objects of about 1.3 KB, as in docs/contract.md "Performance notes".
func TestKeyIndexRebuildFrom20kRecords(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	opts := Options{CreateTopics: true, Partitions: 6}
	s := newSink(t, k, opts)
	const n = 20000
	obj := `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"` + strings.Repeat("x", 1200) + `"}}`
	rv := change.RV(1000)
	for i := 0; i < n; i += 2000 {
		var cs []change.Change
		for j := i; j < i+2000; j++ {
			rv++
			cs = append(cs, chg(deployments, fmt.Sprintf("ns%d", j%50), fmt.Sprintf("cm-%05d", j), rv, change.OpCreate, obj))
		}
		if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: rv, Changes: cs}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	count := 0
	err := topicKeyIndex(Options{Brokers: []string{k.Addr()}}.withDefaults(), "prod")(ctx, deployments, func(change.Key, change.Entry) error { count++; return nil })
	d := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("rebuilt %d keys, want %d", count, n)
	}
	t.Logf("rebuilt the key index of %d keys (%d MB of records) in %v", n, n*len(obj)/1e6, d.Round(time.Millisecond))
}

// An inferred delete carries a LIST's RV, above the object's own. When a later LIST shows
// the object (the delete was wrong, or the object came back into scope), its snapshot
// record revives the key in the rebuilt index; an older re-emit after an observed
// delete still does not.
func TestASnapshotAfterAnInferredDeleteRevivesTheKeyInTheRebuiltIndex(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	opts := Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 1}
	store, err := OpenCheckpoint(ctx, "prod", opts, checkpoint.Options{Type: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, "stream", "prod", opts, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wrong := chg(deployments, "ns", "wrong", 300, change.OpDelete, "")
	wrong.Inferred, wrong.Reason, wrong.Object = true, change.ReasonGone, nil
	revived := chg(deployments, "ns", "wrong", 100, change.OpCreate, `{}`)
	revived.Snapshot = true
	stale := chg(deployments, "ns", "observed", 100, change.OpUpdate, `{}`)
	for i, b := range [][]change.Change{
		{chg(deployments, "ns", "wrong", 100, change.OpCreate, `{}`), chg(deployments, "ns", "observed", 100, change.OpCreate, `{}`)},
		{wrong, chg(deployments, "ns", "observed", 301, change.OpDelete, `{}`)},
		{revived, stale},
	} {
		if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: change.RV(400 + i), Changes: b}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]change.Entry{}
	if err := s.KeyIndex(ctx, deployments, func(k change.Key, e change.Entry) error { got[k.String()] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if got["ns/wrong"].RV != 100 {
		t.Errorf("ns/wrong = %+v, want revived at RV 100", got["ns/wrong"])
	}
	if e, ok := got["ns/observed"]; ok {
		t.Errorf("ns/observed = %+v, want deleted: an older version after an observed delete is a stale re-emit", e)
	}
}
