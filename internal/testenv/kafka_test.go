package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestKafkaRoundTripsKeysHeadersAndNullTombstones(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := NewKafka(t)
	if err := k.CreateTopic(ctx, "t1", 3, false); err != nil {
		t.Fatal(err)
	}
	w := k.Writer("t1")
	defer w.Close()
	msgs := []kafka.Message{
		{Key: []byte("ns/a"), Value: []byte(`{"v":1}`), Headers: []kafka.Header{{Key: "h", Value: []byte("x")}}},
		{Key: []byte("ns/b"), Value: []byte(`{"v":2}`)},
		{Key: []byte("ns/a"), Value: nil},
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	got, err := k.ReadAll(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d messages, want 3: %+v", len(got), got)
	}
	var a []kafka.Message
	for _, m := range got {
		if string(m.Key) == "ns/a" {
			a = append(a, m)
		}
	}
	if len(a) != 2 || string(a[0].Value) != `{"v":1}` || a[1].Value != nil {
		t.Fatalf("key ns/a: got %+v, want the value then a null tombstone in order", a)
	}
	if len(a[0].Headers) != 1 || a[0].Headers[0].Key != "h" || string(a[0].Headers[0].Value) != "x" {
		t.Errorf("headers = %+v", a[0].Headers)
	}
}

func TestKafkaRestartKeepsTopicsAndRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := NewKafka(t)
	if err := k.CreateTopic(ctx, "kept", 2, false); err != nil {
		t.Fatal(err)
	}
	w := k.Writer("kept")
	for i := range 10 {
		if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	k.StopBroker()
	if _, err := k.ReadAll(ctx, "kept"); err == nil {
		t.Fatal("read from a stopped broker succeeded")
	}
	if err := k.StartBroker(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := k.ReadAll(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("after restart read %d records, want 10", len(got))
	}

	// The restarted broker also accepts writes to the old topic.
	w = k.Writer("kept")
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k10"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if got, _ = k.ReadAll(ctx, "kept"); len(got) != 11 {
		t.Fatalf("read %d records, want 11", len(got))
	}
}

func TestKafkaCompactionKeepsOnlyTheLatestValuePerKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := NewKafka(t)
	if err := k.CreateTopic(ctx, "compacted", 1, true); err != nil {
		t.Fatal(err)
	}
	w := k.Writer("compacted")
	defer w.Close()
	// One write per record makes one batch per record, so every record but the last batch
	// (which Kafka and kfake never clean) is eligible.
	for _, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"b", "2"}, {"a", "3"}, {"c", "1"}} {
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(kv[0]), Value: []byte(kv[1])}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := k.ReadAll(ctx, "compacted")
	if err != nil || len(before) != 6 {
		t.Fatalf("before compaction: %d records, %v", len(before), err)
	}
	if err := k.Compact(ctx, "compacted"); err != nil {
		t.Fatal(err)
	}
	after, err := k.ReadAll(ctx, "compacted")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, m := range after {
		got[string(m.Key)] = append(got[string(m.Key)], string(m.Value))
	}
	want := map[string]string{"a": "3", "b": "2", "c": "1"}
	if len(after) != len(want) {
		t.Errorf("after compaction %d records, want %d: %v", len(after), len(want), got)
	}
	for key, v := range want {
		if vs := got[key]; len(vs) != 1 || vs[0] != v {
			t.Errorf("key %s: values %v, want [%s]", key, vs, v)
		}
	}
	if err := k.Compact(ctx, "missing"); err == nil {
		t.Error("compacting a missing topic succeeded")
	}
}
