package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka/kafkascan"
)

// Kafka is a one-broker Kafka-protocol cluster (franz-go's kfake) running in this process
// on a fixed loopback port. Its state lives in a data directory, so StopBroker followed by
// StartBroker is a broker restart: clients see connections refused in between, and topics,
// records and committed offsets are all still there afterwards.
type Kafka struct {
	port    int
	dataDir string
	logPath string
	logFile *os.File
	tmp     string // removed by Stop

	extra []kfake.Opt

	mu      sync.Mutex
	cluster *kfake.Cluster // nil while stopped
}

// StartKafka starts a broker on a free loopback port with its data in a fresh temporary
// directory. Stop it with Stop. extra options are added to the defaults, e.g.
// kfake.EnableSASL() and kfake.Superuser("PLAIN", "user", "secret") for a broker that
// requires authentication.
func StartKafka(ctx context.Context, extra ...kfake.Opt) (*Kafka, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "kube-cdc-kafka-")
	if err != nil {
		return nil, fmt.Errorf("kafka test broker: %w", err)
	}
	k := &Kafka{
		port:    port,
		dataDir: filepath.Join(tmp, "data"),
		logPath: filepath.Join(tmp, "kfake.log"),
		tmp:     tmp,
		extra:   extra,
	}
	if k.logFile, err = os.Create(k.logPath); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("kafka test broker: %w", err)
	}
	if err := k.StartBroker(ctx); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

// NewKafka starts a broker for one test and stops it when the test ends; on failure the
// broker's log tail is printed.
func NewKafka(t testing.TB, extra ...kfake.Opt) *Kafka {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := StartKafka(ctx, extra...)
	if err != nil {
		t.Fatalf("start kafka test broker: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(Tail(k.logPath, 40))
		}
		k.Stop()
	})
	return k
}

// Addr is the broker's host:port.
func (k *Kafka) Addr() string { return fmt.Sprintf("127.0.0.1:%d", k.port) }

// LogPath is the broker's log file (warnings and errors).
func (k *Kafka) LogPath() string { return k.logPath }

func (k *Kafka) opts() []kfake.Opt {
	return append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(k.port),
		kfake.DataDir(k.dataDir),
		// fsync per produce: a "crash" here is a Close, which flushes anyway, but tests that
		// reason about acknowledged records should not depend on the page cache.
		kfake.SyncWrites(),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.WithLogger(kfake.BasicLogger(k.logFile, kfake.LogLevelWarn)),
	}, k.extra...)
}

// StartBroker starts the broker again after StopBroker, on the same port with the same
// data. It is a no-op while the broker runs.
func (k *Kafka) StartBroker(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		return nil
	}
	var lastErr error
	// The port may linger for a moment after the previous listener closed.
	for {
		c, err := kfake.NewCluster(k.opts()...)
		if err == nil {
			k.cluster = c
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("start kafka test broker on %s: %w", k.Addr(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StopBroker stops the broker, keeping its data for StartBroker. Clients get connection
// refused until then.
func (k *Kafka) StopBroker() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		k.cluster.Close()
		k.cluster = nil
	}
}

// Restart is StopBroker then StartBroker.
func (k *Kafka) Restart(ctx context.Context) error {
	k.StopBroker()
	return k.StartBroker(ctx)
}

// Stop stops the broker and deletes its data.
func (k *Kafka) Stop() {
	k.StopBroker()
	if k.logFile != nil {
		k.logFile.Close()
	}
	os.RemoveAll(k.tmp)
}

func (k *Kafka) running() (*kfake.Cluster, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster == nil {
		return nil, errors.New("kafka test broker is stopped")
	}
	return k.cluster, nil
}

// CreateTopic creates a topic with the given partition count; compact sets
// cleanup.policy=compact.
func (k *Kafka) CreateTopic(ctx context.Context, name string, partitions int, compact bool) error {
	c, err := k.running()
	if err != nil {
		return err
	}
	var cfg map[string]string
	if compact {
		cfg = map[string]string{"cleanup.policy": "compact"}
	}
	if err := c.CreateTopic(name, int32(partitions), cfg); err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return ctx.Err()
}

// Compact runs log compaction now. kfake can only compact every topic with
// cleanup.policy=compact at once, so the topic argument is only checked to exist and be
// compacted. As in Kafka, the last record batch of each partition (the "active segment")
// is never cleaned, and tombstones survive until delete.retention.ms (default one day).
func (k *Kafka) Compact(ctx context.Context, topic string) error {
	c, err := k.running()
	if err != nil {
		return err
	}
	if c.TopicInfo(topic) == nil {
		return fmt.Errorf("compact %s: no such topic", topic)
	}
	c.Compact()
	return ctx.Err()
}

// Transport returns a new kafka-go transport for this broker. Give every client its own:
// kafka-go's DefaultTransport caches metadata and connections across broker restarts.
func (k *Kafka) Transport() *kafka.Transport {
	return &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DialTimeout: 2 * time.Second,
		IdleTimeout: 30 * time.Second,
		MetadataTTL: time.Second,
		ClientID:    "kube-cdc-test",
	}
}

// Writer returns a synchronous writer to topic ("" to name the topic per message) with
// acks from all replicas, the hash balancer, a 5 ms batch timeout and its own transport.
func (k *Kafka) Writer(topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(k.Addr()),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		BatchSize:    10000,
		MaxAttempts:  3,
		Transport:    k.Transport(),
	}
}

// ReadAll reads every partition of topic from its start to the high watermark as of the
// call, ordered by partition then offset (kafkascan.Topic, the reader the Kafka
// checkpoint store rebuilds its state with).
func (k *Kafka) ReadAll(ctx context.Context, topic string) ([]kafka.Message, error) {
	client := &kafka.Client{Addr: kafka.TCP(k.Addr()), Transport: k.Transport(), Timeout: 10 * time.Second}
	defer client.Transport.(*kafka.Transport).CloseIdleConnections()
	var out []kafka.Message
	err := kafkascan.Topic(ctx, client, topic, func(m kafka.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	return out, nil
}

// Cluster is the running kfake cluster, for tests that inject broker behaviour with its
// Control functions; nil while stopped. Controls do not survive StopBroker.
func (k *Kafka) Cluster() *kfake.Cluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cluster
}

// FailProduce makes the broker refuse the next n produce requests for one partition of
// topic (n < 0: every one until the returned handle's Remove) with UNKNOWN_SERVER_ERROR,
// leaving the topic's other partitions alone, so a writer sending to several partitions
// sees some records acknowledged and the rest refused. kafka-go does not retry that error
// itself, so each refused request is one failed WriteMessages for that partition's
// records. The handle's Hits counts the refusals. The fault does not survive StopBroker.
func (k *Kafka) FailProduce(topic string, partition int32, n int) (*kfake.FaultHandle, error) {
	c, err := k.running()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("FailProduce: n is 0")
	}
	return c.Fault(kfake.Fault{
		Keys:       []kmsg.Key{kmsg.Produce},
		Topic:      topic,
		Partitions: []int32{partition},
		Err:        kerr.UnknownServerError,
		Count:      n,
	}), nil
}

// PartitionOf is the partition kafka-go's hash balancer (the Kafka sink's) puts key on
// in a topic of the given number of partitions.
func PartitionOf(key string, partitions int) int32 {
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	return int32((&kafka.Hash{}).Balance(kafka.Message{Key: []byte(key)}, ps...))
}
