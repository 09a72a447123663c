package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

const kafkaPartitions = 6

func kafkaDaemonConfig(b *testing.B, ns, topic, metricsAddr string) string {
	return kafkaDaemonConfigFlush(b, ns, topic, metricsAddr, "")
}

// kafkaDaemonConfigFlush is kafkaDaemonConfig with the file store's
// checkpoint.flushInterval set to flush ("": the default).
func kafkaDaemonConfigFlush(b *testing.B, ns, topic, metricsAddr, flush string) string {
	flushLine := ""
	if flush != "" {
		flushLine = "\n      flushInterval: " + flush
	}
	return fmt.Sprintf(`cluster: bench
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      topic: %q
    checkpoint:
      type: file
      path: %q%s
metrics:
  address: %q
log:
  level: info
`, kube.Kubeconfig, ns, kfk.Addr(), topic, filepath.Join(b.TempDir(), "state.db"), flushLine, metricsAddr)
}

func kafkaClient() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(kfk.Addr()), Transport: kfk.Transport(), Timeout: 10 * time.Second}
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(ctx context.Context, c *kafka.Client, topic string) (map[int]int64, error) {
	var reqs []kafka.OffsetRequest
	for p := range kafkaPartitions {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, p.Error
		}
		out[p.Partition] = p.LastOffset
	}
	return out, nil
}

func sum(m map[int]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// waitRecords polls the topic's high watermarks every 10 ms until they sum to want; it
// returns when the first record and the last were first seen.
func waitRecords(b *testing.B, topic string, want int64, d *daemon) (first, last time.Time) {
	b.Helper()
	c := kafkaClient()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		ends, err := endOffsets(ctx, c, topic)
		now := time.Now()
		if err == nil {
			n := sum(ends)
			if n > 0 && first.IsZero() {
				first = now
			}
			if n >= want {
				return first, now
			}
		}
		d.failIfExited(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%s: fewer than %d records within 5 minutes", topic, want)
	return
}

// BenchmarkInitialSyncKafka: the 20,000 ConfigMaps into a Kafka topic (kfake broker in
// this process), kube-cdc's produce rate against a bare kafka-go Writer producing the
// same records in the same run.
func BenchmarkInitialSyncKafka(b *testing.B) {
	syncFixture(b)
	ctx := context.Background()
	topic := "bench-sync-kubecdc"
	if err := kfk.CreateTopic(ctx, topic, kafkaPartitions, true); err != nil {
		b.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	config := kafkaDaemonConfig(b, syncNS, topic, addr)
	profiling := os.Getenv(LagProfileEnv) != ""
	if profiling { // LagProfileEnv: a CPU profile of the daemon's first 3 s
		config = strings.Replace(config, fmt.Sprintf("address: %q", addr), fmt.Sprintf("address: %q\n  pprof: true", addr), 1)
	}
	d := startDaemon(b, config)
	profiled := func() {}
	if profiling {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
				resp.Body.Close()
				break
			}
		}
		profiled = profilePhase(b, addr, "kafka-initial-sync", 3*time.Second)
	}
	first, last := waitRecords(b, topic, syncObjs, d)
	profiled()
	// Time spent in the sink's Write (produce + acks + checkpoint/key-index commit).
	writeSum, writeCount := scrapeHistogram(b, "http://"+addr+"/metrics", "kube_cdc_sink_write_seconds")
	cpu := d.stop(b)
	wall := last.Sub(d.start)
	produce := last.Sub(first)

	// The bare writer: the very records kube-cdc produced, to a fresh topic, in one
	// WriteMessages call (acks all, 5 ms batch timeout, batches of up to 10,000).
	msgs, err := kfk.ReadAll(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	if len(msgs) != syncObjs {
		b.Fatalf("kube-cdc produced %d records, want %d", len(msgs), syncObjs)
	}
	var bytes int
	for i := range msgs {
		msgs[i] = kafka.Message{Key: msgs[i].Key, Value: msgs[i].Value, Headers: msgs[i].Headers, Time: msgs[i].Time}
		bytes += len(msgs[i].Value)
	}
	bare := "bench-sync-bare"
	if err := kfk.CreateTopic(ctx, bare, kafkaPartitions, true); err != nil {
		b.Fatal(err)
	}
	w := kfk.Writer(bare)
	defer w.Close()
	start := time.Now()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	bareD := time.Since(start)
	// The same, in sequential calls of 1,000 records: the pipeline's batch size.
	bare1k := "bench-sync-bare-1k"
	if err := kfk.CreateTopic(ctx, bare1k, kafkaPartitions, true); err != nil {
		b.Fatal(err)
	}
	w1k := kfk.Writer(bare1k)
	defer w1k.Close()
	start = time.Now()
	for i := 0; i < len(msgs); i += 1000 {
		if err := w1k.WriteMessages(ctx, msgs[i:min(i+1000, len(msgs))]...); err != nil {
			b.Fatal(err)
		}
	}
	bare1kD := time.Since(start)
	sinkD := time.Duration(writeSum * float64(time.Second))

	rate := func(d time.Duration) float64 { return float64(syncObjs) / d.Seconds() }
	b.ReportMetric(wall.Seconds(), "kubecdc_s")
	b.ReportMetric(produce.Seconds(), "kubecdc_produce_s")
	b.ReportMetric(cpu, "kubecdc_cpu_s")
	b.ReportMetric(bareD.Seconds(), "bare_s")
	b.ReportMetric(rate(produce), "kubecdc_produce_rec/s")
	b.ReportMetric(rate(wall), "kubecdc_end_to_end_rec/s")
	b.ReportMetric(rate(bareD), "bare_rec/s")
	b.ReportMetric(rate(produce)/rate(bareD), "produce_rate_kubecdc/bare")
	b.ReportMetric(rate(wall)/rate(bareD), "end_to_end_rate_kubecdc/bare")
	b.ReportMetric(bare1kD.Seconds(), "bare_1k_batches_s")
	b.ReportMetric(sinkD.Seconds(), "kubecdc_sink_write_s")
	b.ReportMetric(writeCount, "kubecdc_sink_writes")
	b.ReportMetric(rate(sinkD)/rate(bare1kD), "sink_write_rate_kubecdc/bare_1k")
	b.ReportMetric(rate(sinkD)/rate(bareD), "sink_write_rate_kubecdc/bare")
	b.ReportMetric(0, "ns/op")
	b.Logf("Kafka sink alone: %.0f Write calls took %v in all (%.0f rec/s); bare writer in sequential calls of 1,000: %v (%.0f rec/s); sink/bare-1k = %.2fx, sink/bare-one-call = %.2fx (the sink's calls ran beside the LIST's decoding on the same cores, the bare writer alone: the produce-rate target is BenchmarkKafkaSinkWrite's)",
		writeCount, sinkD.Round(time.Millisecond), rate(sinkD), bare1kD.Round(time.Millisecond), rate(bare1kD), rate(sinkD)/rate(bare1kD), rate(sinkD)/rate(bareD))
	b.Logf("initial sync of %d ConfigMaps into Kafka (%d records, %.1f MB of values): kube-cdc start→all acknowledged %v (%.0f rec/s), first→last record %v (%.0f rec/s), CPU %.2fs; bare kafka-go Writer %v (%.0f rec/s); first→last record rate kube-cdc/bare = %.2fx (bound by the paged LIST, see the sink alone above), end to end incl. start-up and LIST %.2fx",
		syncObjs, len(msgs), float64(bytes)/1e6, wall.Round(time.Millisecond), rate(wall), produce.Round(time.Millisecond), rate(produce), cpu,
		bareD.Round(time.Millisecond), rate(bareD), rate(produce)/rate(bareD), rate(wall)/rate(bareD))
}

// consume reads every partition of topic from the given offsets until ctx ends and marks
// each record's kube-cdc.rv header seen when its fetch returned.
func consume(ctx context.Context, topic string, from map[int]int64, seen *seenSet) {
	var wg sync.WaitGroup
	for p, off := range from {
		wg.Go(func() {
			c := kafkaClient()
			for ctx.Err() == nil {
				res, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: p, Offset: off,
					MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
				if err == nil {
					err = res.Error
				}
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				now := time.Now()
				for {
					r, err := res.Records.ReadRecord()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							time.Sleep(5 * time.Millisecond)
						}
						break
					}
					for _, bs := range []kafka.Bytes{r.Key, r.Value} {
						if bs != nil {
							bs.Close()
						}
					}
					if r.Offset < off {
						continue
					}
					off = r.Offset + 1
					for _, h := range r.Headers {
						if h.Key == "kube-cdc.rv" {
							// No observed time: the record's time is the object's own
							// change time (second precision), not when kube-cdc saw it,
							// so no source/sink split is made for Kafka.
							if rv, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
								seen.see(rv, now, time.Time{})
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkLagKafka: time from the apiserver acknowledging an Update to its record being
// readable from the broker (first fetched by a consumer long-polling every partition), at
// 200 writes/s.
func BenchmarkLagKafka(b *testing.B) {
	const ns = "bench-lag-kafka"
	ctx := context.Background()
	objs := makeLagObjects(b, ns, lagObjects)
	topic := "bench-lag"
	if err := kfk.CreateTopic(ctx, topic, kafkaPartitions, true); err != nil {
		b.Fatal(err)
	}
	config, pprofAddr := withPprof(b, kafkaDaemonConfig(b, ns, topic, ""))
	d := startDaemon(b, config)
	waitRecords(b, topic, lagObjects, d)
	from, err := endOffsets(ctx, kafkaClient(), topic)
	if err != nil {
		b.Fatal(err)
	}
	seen := newSeenSet()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { consume(cctx, topic, from, seen); close(done) }()
	defer func() {
		cancel()
		<-done
		d.stop(b)
	}()
	for _, ph := range []lagPhase{
		{name: "100 writes/s", workers: 4, rate: 100, dur: 20 * time.Second, p50: lowRateP50},
		{name: "200 writes/s", workers: 8, rate: 200, dur: 20 * time.Second, target: 50 * time.Millisecond},
	} {
		sub := fmt.Sprintf("rate=%.0f", ph.rate)
		ph.pprof, ph.profile = pprofAddr, "kafka-"+strings.TrimPrefix(sub, "rate=")
		b.Run(sub, func(b *testing.B) {
			reportLag(b, "Kafka", ph, runLagPhase(b, ph, objs, seen, d.cmd.Process.Pid))
		})
	}
}

// scrapeHistogram returns the _sum and _count of a histogram (all label sets added up)
// from a Prometheus text endpoint.
func scrapeHistogram(b *testing.B, url, name string) (sum, count float64) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.HasPrefix(f[0], name+"_sum"):
			sum += v
		case strings.HasPrefix(f[0], name+"_count"):
			count += v
		}
	}
	return sum, count
}

// BenchmarkLagKafkaFlushInterval: the file checkpoint store's grouped commits side by side
// with a commit written per batch, on one write stream: two daemons, each into its own
// topic, one at the default checkpoint.flushInterval, one with flushInterval 0s (each
// batch's commit written and fdatasynced before the next batch, as before grouped
// commits), the same ConfigMap updates at 100 and 200 writes/s. Both daemons and the
// writers share the machine, so load skews neither against the other. With
// BaselineBinEnv set, a third daemon runs that binary at its defaults on the same writes
// (before/after a change), and the default's CPU is reported against it too.
func BenchmarkLagKafkaFlushInterval(b *testing.B) {
	const ns = "bench-lag-kafka-flush"
	ctx, cancel := context.WithCancel(context.Background())
	objs := makeLagObjects(b, ns, lagObjects)
	var arms []*lagArm
	var consumers []chan struct{}
	type config struct{ name, bin, flush string }
	configs := []config{{"grouped", daemonBin, ""}, {"flush0", daemonBin, "0s"}}
	if bin := os.Getenv(BaselineBinEnv); bin != "" {
		configs = append(configs, config{"baseline", bin, ""})
	}
	// addArm starts one arm's process on a topic of its own and follows the topic.
	addArm := func(name string, start func(topic string) *daemon) {
		topic := "bench-lag-flush-" + name
		if err := kfk.CreateTopic(ctx, topic, kafkaPartitions, true); err != nil {
			b.Fatal(err)
		}
		d := start(topic)
		waitRecords(b, topic, lagObjects, d)
		from, err := endOffsets(ctx, kafkaClient(), topic)
		if err != nil {
			b.Fatal(err)
		}
		ar := &lagArm{name: name, d: d, seen: newSeenSet()}
		arms = append(arms, ar)
		done := make(chan struct{})
		consumers = append(consumers, done)
		go func() { consume(ctx, topic, from, ar.seen); close(done) }()
	}
	for _, a := range configs {
		addArm(a.name, func(topic string) *daemon {
			return startDaemonBin(b, a.bin, kafkaDaemonConfigFlush(b, ns, topic, "", a.flush))
		})
	}
	for _, f := range floorArms { // one synchronous produce per event
		addArm(f.name, func(topic string) *daemon {
			return startInformer(b, ns, f.flag, "-kafka", kfk.Addr(), "-topic", topic)
		})
	}
	defer func() {
		cancel()
		for _, c := range consumers {
			<-c
		}
		for _, a := range arms {
			a.d.stop(b)
		}
	}()
	for _, rate := range []float64{100, 200} {
		b.Run(fmt.Sprintf("rate=%.0f", rate), func(b *testing.B) {
			stats, cpu, line := runArms(b, arms, "topic", rate, func() []ack {
				return updateConfigMaps(b, objs, int(rate/25), rate, 20*time.Second)
			})
			b.ReportMetric(cpu[0]/cpu[1], "cpu_grouped/flush0")
			b.ReportMetric(0, "ns/op")
			fmt.Fprintf(line, " CPU grouped/flush0 %.2f", cpu[0]/cpu[1])
			if len(arms) > 4 {
				b.ReportMetric(cpu[0]/cpu[2], "cpu_grouped/baseline")
				fmt.Fprintf(line, ", grouped/baseline %.2f", cpu[0]/cpu[2])
			}
			reportFloor(b, line, stats, cpu, rate)
			b.Log(line.String())
		})
	}
}
