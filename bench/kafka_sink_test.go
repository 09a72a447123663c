package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	kafkasink "github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

// BenchmarkKafkaSinkWrite isolates the Kafka sink from the LIST: 20 batches of 1,000
// changes (~1.3 KB objects), built in memory, written by the sink (envelopes, headers,
// produce with acks=all, then the file checkpoint store's commit) against a bare kafka-go
// Writer producing the very same records with the same settings, both to the in-process
// broker, one after the other in the same run. Target sink/bare rate ≥ 0.9.
func BenchmarkKafkaSinkWrite(b *testing.B) {
	ctx := context.Background()
	res := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	payload := strings.Repeat("x", 1000)
	now := time.Now()
	var batches []change.Batch
	for n := range 20 {
		bt := change.Batch{Resource: res, Checkpoint: change.RV((n + 1) * 1000)}
		for i := range 1000 {
			rv := change.RV(n*1000 + i + 1)
			name := fmt.Sprintf("cm-%05d", n*1000+i)
			bt.Changes = append(bt.Changes, change.Change{
				Cluster: "bench", Resource: res, Key: change.Key{Namespace: "bench-sink", Name: name},
				UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", rv), RV: rv, Op: change.OpCreate, Snapshot: true,
				Object:     []byte(fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"bench-sink","resourceVersion":"%d"},"data":{"payload":%q}}`, name, rv, payload)),
				Labels:     []byte(`{}`),
				ChangedBy:  "bench/Update",
				Time:       now,
				ObservedAt: now,
			})
		}
		batches = append(batches, bt)
	}

	for range b.N {
		topic := fmt.Sprintf("bench-sink-%d", time.Now().UnixNano())
		store, err := checkpoint.OpenFile(filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		sink, err := kafkasink.New(ctx, "stream", "bench", kafkasink.Options{
			Brokers: []string{kfk.Addr()}, Topic: topic, CreateTopics: true, Partitions: kafkaPartitions, ReplicationFactor: 1,
		}, store, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sink.Checkpoint(ctx, res); err != nil { // creates the topic
			b.Fatal(err)
		}
		start := time.Now()
		for _, bt := range batches {
			if err := sink.Write(ctx, bt); err != nil {
				b.Fatal(err)
			}
		}
		sinkTook := time.Since(start)
		sink.Close()

		bareTopic := topic + "-bare"
		if err := kfk.CreateTopic(ctx, bareTopic, kafkaPartitions, true); err != nil {
			b.Fatal(err)
		}
		w := &kafka.Writer{Addr: kafka.TCP(kfk.Addr()), Topic: bareTopic, Transport: kfk.Transport(),
			RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 2048}
		var msgs [][]kafka.Message
		for _, bt := range batches {
			var ms []kafka.Message
			for i := range bt.Changes {
				c := &bt.Changes[i]
				op := envelope.OpCode(c)
				ms = append(ms, kafka.Message{Key: []byte(c.Key.String()), Value: envelope.Append(nil, c), Time: c.Time,
					Headers: []kafka.Header{{Key: kafkasink.HeaderOp, Value: []byte(op)}, {Key: kafkasink.HeaderRV, Value: []byte(c.RV.String())}, {Key: kafkasink.HeaderResource, Value: []byte(res.ID())}}})
			}
			msgs = append(msgs, ms)
		}
		start = time.Now()
		for _, ms := range msgs {
			if err := w.WriteMessages(ctx, ms...); err != nil {
				b.Fatal(err)
			}
		}
		bareTook := time.Since(start)
		w.Close()

		ratio := bareTook.Seconds() / sinkTook.Seconds()
		b.ReportMetric(sinkTook.Seconds(), "sink_s")
		b.ReportMetric(bareTook.Seconds(), "bare_s")
		b.ReportMetric(ratio, "rate_sink/bare")
		verdict := "MET"
		if ratio < 0.9 {
			verdict = "MISSED"
		}
		b.Logf("Kafka sink Write, 20×1,000 changes in memory: sink %v (%.0f rec/s, incl. envelope encoding and the file checkpoint commit), bare kafka-go Writer %v on the same records (the envelopes built before timing) → rate sink/bare %.2f (target >= 0.9: %s)",
			sinkTook.Round(time.Millisecond), 20000/sinkTook.Seconds(), bareTook.Round(time.Millisecond), ratio, verdict)
	}
}
