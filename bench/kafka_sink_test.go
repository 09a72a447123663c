package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	kafkasink "github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

var sinkBenchRes = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

// sinkBenchChange is the change of ConfigMap i at rv (~1.3 KB of JSON).
func sinkBenchChange(i int, rv change.RV, op change.Op, now time.Time) change.Change {
	name := fmt.Sprintf("cm-%05d", i)
	return change.Change{
		Cluster: "bench", Resource: sinkBenchRes, Key: change.Key{Namespace: "bench-sink", Name: name},
		UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), RV: rv, Op: op, Snapshot: op == change.OpCreate,
		Object:     []byte(fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"bench-sink","resourceVersion":"%d"},"data":{"payload":%q}}`, name, rv, strings.Repeat("x", 1000))),
		Labels:     []byte(`{}`),
		ChangedBy:  "bench/Update",
		Time:       now,
		ObservedAt: now,
	}
}

// openBenchSink opens a Kafka sink on a fresh topic with a file checkpoint store grouping
// commits over flush (0: each commit written at once), and creates the topic.
func openBenchSink(b *testing.B, flush time.Duration) (*kafkasink.Sink, string) {
	b.Helper()
	ctx := context.Background()
	topic := fmt.Sprintf("bench-sink-%d", time.Now().UnixNano())
	store, err := checkpoint.OpenFileWith(filepath.Join(b.TempDir(), "state.db"), checkpoint.FileOptions{FlushInterval: flush})
	if err != nil {
		b.Fatal(err)
	}
	sink, err := kafkasink.New(ctx, "stream", "bench", kafkasink.Options{
		Brokers: []string{kfk.Addr()}, Topic: topic, CreateTopics: true, Partitions: kafkaPartitions, ReplicationFactor: 1,
	}, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sink.Checkpoint(ctx, sinkBenchRes); err != nil { // creates the topic
		b.Fatal(err)
	}
	return sink, topic
}

// BenchmarkKafkaSinkWrite isolates the Kafka sink from the LIST: 20 batches of 1,000
// changes (~1.3 KB objects), built in memory, written by the sink (envelopes, headers,
// the key intents, produce with acks=all, then the file checkpoint store's commit)
// against a bare kafka-go Writer producing the very same records with the same settings,
// all to the in-process broker, in the same run. The sink runs twice: with the store's
// default flush interval (checkpoint.DefaultFlushInterval: commits grouped) and with 0
// (every commit written at once, as before grouped commits), and the three run in a
// rotating order, three rounds, so that a machine whose load changes favours none. Target:
// sink/bare rate ≥ 0.9, of the median times.
func BenchmarkKafkaSinkWrite(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	var batches []change.Batch
	for n := range 20 {
		bt := change.Batch{Resource: sinkBenchRes, Checkpoint: change.RV((n + 1) * 1000)}
		for i := range 1000 {
			bt.Changes = append(bt.Changes, sinkBenchChange(n*1000+i, change.RV(n*1000+i+1), change.OpCreate, now))
		}
		batches = append(batches, bt)
	}
	// The bare writer's records: what the sink produces, built before timing.
	var msgs [][]kafka.Message
	for _, bt := range batches {
		var ms []kafka.Message
		for i := range bt.Changes {
			c := &bt.Changes[i]
			op := envelope.OpCode(c)
			ms = append(ms, kafka.Message{Key: []byte(c.Key.String()), Value: envelope.Append(nil, c), Time: c.Time,
				Headers: []kafka.Header{{Key: kafkasink.HeaderOp, Value: []byte(op)}, {Key: kafkasink.HeaderRV, Value: []byte(c.RV.String())}, {Key: kafkasink.HeaderResource, Value: []byte(sinkBenchRes.ID())}}})
		}
		msgs = append(msgs, ms)
	}

	sinkRun := func(flush time.Duration) time.Duration {
		sink, _ := openBenchSink(b, flush)
		defer sink.Close()
		start := time.Now()
		for _, bt := range batches {
			if err := sink.Write(ctx, bt); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	bareRun := func() time.Duration {
		topic := fmt.Sprintf("bench-sink-bare-%d", time.Now().UnixNano())
		if err := kfk.CreateTopic(ctx, topic, kafkaPartitions, true); err != nil {
			b.Fatal(err)
		}
		w := &kafka.Writer{Addr: kafka.TCP(kfk.Addr()), Topic: topic, Transport: kfk.Transport(),
			RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 2048}
		defer w.Close()
		start := time.Now()
		for _, ms := range msgs {
			if err := w.WriteMessages(ctx, ms...); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}

	for range b.N {
		var grouped, each, bare []time.Duration
		runs := []func(){
			func() { grouped = append(grouped, sinkRun(checkpoint.DefaultFlushInterval)) },
			func() { each = append(each, sinkRun(0)) },
			func() { bare = append(bare, bareRun()) },
		}
		for round := range 3 {
			for i := range runs {
				runs[(i+round)%len(runs)]()
			}
		}
		med := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
		g, e, bb := med(grouped), med(each), med(bare)
		ratio := bb.Seconds() / g.Seconds()
		b.ReportMetric(g.Seconds(), "sink_s")
		b.ReportMetric(e.Seconds(), "sink_flush0_s")
		b.ReportMetric(bb.Seconds(), "bare_s")
		b.ReportMetric(ratio, "rate_sink/bare")
		b.ReportMetric(bb.Seconds()/e.Seconds(), "rate_sink_flush0/bare")
		b.ReportMetric(0, "ns/op")
		b.Logf("Kafka sink Write, 20×1,000 changes in memory, medians of 3 rounds: sink %v (%.0f rec/s, incl. envelope encoding, intents and the file checkpoint's commits, flushInterval %v; runs %v), the same with flushInterval 0 %v (runs %v), bare kafka-go Writer %v on the same records (the envelopes built before timing; runs %v) → rate sink/bare %.2f (target >= 0.9: %s), flushInterval 0 %.2f",
			g.Round(time.Millisecond), 20000/g.Seconds(), checkpoint.DefaultFlushInterval, roundAll(grouped), e.Round(time.Millisecond), roundAll(each),
			bb.Round(time.Millisecond), roundAll(bare), ratio, verdict(ratio >= 0.9), bb.Seconds()/e.Seconds())
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// BenchmarkKafkaSinkSteadyWrites is the steady state of BenchmarkLagKafka without the
// apiserver, in one process: 1,000 one-change batches (updates of 200 ConfigMaps, as
// adaptive batching writes them at 200 changes/s), paced at 200/s, written by the sink
// with each flush interval below, side by side in a rotating order. It reports this
// process's CPU per 1,000 changes (the sink, and the in-process broker's share, the same
// for every interval) and the Write latency; the difference between intervals is the
// store's per-batch cost.
func BenchmarkKafkaSinkSteadyWrites(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	const keys, writes, rate = 200, 1000, 200
	intervals := []time.Duration{0, 10 * time.Millisecond, checkpoint.DefaultFlushInterval, time.Second}
	for range b.N {
		type result struct {
			cpu      []float64
			p50, p99 []time.Duration
		}
		results := make([]result, len(intervals))
		for round := range 2 {
			for i := range intervals {
				j := (i + round) % len(intervals)
				sink, _ := openBenchSink(b, intervals[j])
				// Every key once first (creates, one batch), as the initial sync leaves them.
				first := change.Batch{Resource: sinkBenchRes, Checkpoint: keys}
				for k := range keys {
					first.Changes = append(first.Changes, sinkBenchChange(k, change.RV(k+1), change.OpCreate, now))
				}
				if err := sink.Write(ctx, first); err != nil {
					b.Fatal(err)
				}
				lat := make([]time.Duration, 0, writes)
				tick := time.NewTicker(time.Second / rate)
				cpu0 := processCPU()
				for n := range writes {
					<-tick.C
					rv := change.RV(keys + n + 1)
					bt := change.Batch{Resource: sinkBenchRes, Checkpoint: rv,
						Changes: []change.Change{sinkBenchChange(n%keys, rv, change.OpUpdate, now)}}
					start := time.Now()
					if err := sink.Write(ctx, bt); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				cpu := processCPU() - cpu0
				tick.Stop()
				if err := sink.Close(); err != nil {
					b.Fatal(err)
				}
				slices.Sort(lat)
				results[j].cpu = append(results[j].cpu, cpu/(writes/1000))
				results[j].p50 = append(results[j].p50, lat[len(lat)/2])
				results[j].p99 = append(results[j].p99, lat[len(lat)*99/100])
			}
		}
		for i, iv := range intervals {
			r := results[i]
			cpu := slices.Min(r.cpu)
			b.ReportMetric(cpu, fmt.Sprintf("cpu_s/1k_flush_%v", iv))
			b.Logf("flushInterval %v: process CPU per 1k one-change writes %.3f s (runs %.3f), Write p50 %v p99 %v (runs %v / %v)",
				iv, cpu, r.cpu, slices.Min(r.p50), slices.Min(r.p99), r.p50, r.p99)
		}
		b.ReportMetric(0, "ns/op")
	}
}

// processCPU is this process's CPU seconds (user+sys) so far.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
