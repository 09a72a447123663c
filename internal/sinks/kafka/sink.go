package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Defaults of Options.
const (
	DefaultPartitions        = 6
	DefaultReplicationFactor = 1
	DefaultBatchTimeout      = 5 * time.Millisecond
	DefaultWriteTimeout      = 10 * time.Second
)

// writerBatchSize is the kafka-go writer's records per partition batch. kafka-go
// allocates that many message slots (≈150 B each) for every partition batch it starts,
// however few records it holds: at 2,048 a steady stream of one-change writes made
// ≈0.3 MB of garbage per write and the GC a third of the daemon's CPU. 512 slots of
// ~1.5 KB records already reach kafka-go's 1 MiB BatchBytes; produce cuts bigger pipeline
// batches into chunks that go out one after the other.
const writerBatchSize = 512

// withDefaults fills Options' documented defaults.
func withDefaults(o Options) Options {
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = DefaultReplicationFactor
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	return o
}

// Sink writes change batches to Kafka topics and keeps its checkpoints and key index in a
// checkpoint.Store. See the package documentation for the record contract.
type Sink struct {
	name, cluster string
	opts          Options
	store         checkpoint.Store
	log           *slog.Logger
	transport     *kafka.Transport
	client        *kafka.Client
	writer        *kafka.Writer

	mu     sync.Mutex
	topics map[string]int // topics known to exist → their partitions (0: unknown)
}

// New connects to opts.Brokers and returns the sink. Unreachable brokers are an error
// naming them; rejected credentials are a terminal error. store receives a Commit after
// every acknowledged batch and answers Checkpoint and KeyIndex.
func New(ctx context.Context, name, cluster string, opts Options, store checkpoint.Store, log *slog.Logger) (*Sink, error) {
	if len(opts.Brokers) == 0 {
		return nil, retry.Terminal(fmt.Errorf("kafka sink %s: kafka.brokers is empty", name))
	}
	if store == nil {
		return nil, fmt.Errorf("kafka sink %s: no checkpoint store", name)
	}
	if log == nil {
		log = slog.Default()
	}
	opts = withDefaults(opts)
	comp, err := compression(opts.Compression)
	if err != nil {
		return nil, retry.Terminal(fmt.Errorf("kafka sink %s: %w", name, err))
	}
	tr, err := NewTransport(opts)
	if err != nil {
		return nil, retry.Terminal(fmt.Errorf("kafka sink %s: %w", name, err))
	}
	s := &Sink{
		name: name, cluster: cluster, opts: opts, store: store,
		log:       log.With("sink", name),
		transport: tr,
		client:    &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: tr, Timeout: opts.WriteTimeout},
		topics:    map[string]int{},
	}
	s.writer = &kafka.Writer{
		Addr: kafka.TCP(opts.Brokers...),
		// Dangerous defaults made explicit: acks from every in-sync replica, and
		// synchronous writes so errors reach Write.
		RequiredAcks: kafka.RequireAll,
		Async:        false,
		// Per-key order: one key, one partition.
		Balancer:     &kafka.Hash{},
		BatchTimeout: opts.BatchTimeout,
		// Each chunk of a pipeline batch (chunkLen) goes out in one produce request per
		// partition. kafka-go allocates BatchSize messages per partition batch up front,
		// so "unlimited" (1<<20) cost 150 MB per write.
		BatchSize:       writerBatchSize,
		BatchBytes:      writerBatchBytes,
		WriteTimeout:    opts.WriteTimeout,
		ReadTimeout:     opts.WriteTimeout,
		Compression:     comp,
		MaxAttempts:     3,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: 500 * time.Millisecond,
		Transport:       tr,
		ErrorLogger:     kafka.LoggerFunc(func(msg string, args ...any) { s.log.Debug(fmt.Sprintf(msg, args...)) }),
	}
	cctx, cancel := context.WithTimeout(ctx, opts.WriteTimeout)
	defer cancel()
	if _, err := s.client.Metadata(cctx, &kafka.MetadataRequest{Topics: []string{}}); err != nil {
		tr.CloseIdleConnections()
		err = fmt.Errorf("kafka sink %s: brokers %s: %w", name, strings.Join(opts.Brokers, ","), err)
		if isTerminal(err) {
			return nil, retry.Terminal(err)
		}
		return nil, fmt.Errorf("%w (are the brokers up and reachable?)", err)
	}
	return s, nil
}

// Name is the configured sink name.
func (s *Sink) Name() string { return s.name }

// Checkpoint returns the store's checkpoint for res. The pipeline asks for it once per
// resource before streaming, so this is where res's topic is checked (and created with
// createTopics): a missing topic fails the start, not the first change hours later.
func (s *Sink) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	if _, err := s.ensureTopic(ctx, TopicName(s.opts.Topic, s.cluster, res)); err != nil {
		return 0, err
	}
	return s.store.Load(ctx, s.name, res)
}

// KeyIndex returns the store's key index for res.
func (s *Sink) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	return s.store.KeyIndex(ctx, s.name, res, fn)
}

// Write is Prepare(b)(ctx).
func (s *Sink) Write(ctx context.Context, b change.Batch) error { return s.Prepare(b)(ctx) }

// Prepare encodes b's records once. The returned write produces the records the brokers
// have not acknowledged yet, waits until they acknowledged every one, and then commits b
// to the store. On error nothing is committed and the pipeline calls the write again:
// it sends only the records still unacknowledged, so a partial failure (kafka-go's
// WriteErrors) never sends a record twice, and records are a pure function of b, so a
// re-emit after a restart is byte-identical.
func (s *Sink) Prepare(b change.Batch) func(ctx context.Context) error {
	topic := TopicName(s.opts.Topic, s.cluster, b.Resource)
	msgs := make([]kafka.Message, 0, len(b.Changes)+len(b.Changes)/8)
	var wiring error
	for i := range b.Changes {
		c := &b.Changes[i]
		if c.Cluster != s.cluster && wiring == nil {
			wiring = retry.Terminal(fmt.Errorf("kafka sink %s: %s %s: change of cluster %q reached the sink of cluster %q",
				s.name, b.Resource.ID(), c.Key, c.Cluster, s.cluster))
		}
		msgs = appendMessages(msgs, topic, c)
	}
	return func(ctx context.Context) error {
		if wiring != nil {
			return wiring
		}
		if len(msgs) > 0 {
			partitions, err := s.ensureTopic(ctx, topic)
			if err != nil {
				return err
			}
			if msgs, err = s.produce(ctx, topic, partitions, msgs); err != nil {
				return err
			}
		}
		if err := s.store.Commit(ctx, s.name, b); err != nil {
			return fmt.Errorf("kafka sink %s: records acknowledged, checkpoint not committed: %w", s.name, err)
		}
		return nil
	}
}

// produce writes msgs and returns the ones still unacknowledged (none on success), in
// chunks that kafka-go sends as at most one produce request per partition (chunkLen): a
// partition whose records went out in two requests could have the first refused and the
// second acknowledged, and writing the first again would then put older versions of a
// key after newer ones. A chunk is acknowledged whole before the next one goes out.
//
// partitions is the topic's partition count (0: unknown). Knowing it, a chunk is cut per
// partition, so a batch spread over several partitions still goes out in one round of
// parallel requests; unknown, the limits apply to the chunk as a whole.
func (s *Sink) produce(ctx context.Context, topic string, partitions int, msgs []kafka.Message) ([]kafka.Message, error) {
	for len(msgs) > 0 {
		n := chunkLen(msgs, partitions)
		rest, err := s.produceChunk(ctx, topic, msgs[:n])
		if err != nil {
			return slices.Concat(rest, msgs[n:]), err
		}
		msgs = msgs[n:]
	}
	return nil, nil
}

// writerBatchBytes is the kafka-go writer's BatchBytes (its default, and the broker's
// default message.max.bytes): the most one produce request carries per partition.
const writerBatchBytes = 1 << 20

// recordOverhead bounds what kafka-go adds to a record's key, value and headers when it
// sizes a batch (length varints, offset and timestamp deltas, attributes).
const recordOverhead = 64

// chunkLen is how many of msgs, from the first, fit one kafka-go batch per partition:
// at most writerBatchSize records of at most writerBatchBytes on each partition, counted
// per partition with the writer's own balancer when the partition count is known, over
// the whole chunk otherwise. It is at least 1; a record too large for a batch fails on
// its own.
func chunkLen(msgs []kafka.Message, partitions int) int {
	var ids []int
	if partitions > 0 {
		ids = make([]int, partitions)
		for i := range ids {
			ids[i] = i
		}
	}
	var balancer kafka.Hash
	size := make(map[int]int, max(partitions, 1))
	count := make(map[int]int, max(partitions, 1))
	for i, m := range msgs {
		p := 0
		if ids != nil {
			p = balancer.Balance(m, ids...)
		}
		n := len(m.Key) + len(m.Value) + recordOverhead
		for _, h := range m.Headers {
			n += len(h.Key) + len(h.Value) + recordOverhead/8
		}
		if count[p] == writerBatchSize || count[p] > 0 && size[p]+n > writerBatchBytes {
			return i
		}
		size[p] += n
		count[p]++
	}
	return len(msgs)
}

// produceChunk writes msgs, one chunk, and returns the ones still unacknowledged (none on
// success). kafka-go reports failures per message (WriteErrors): records it acknowledged
// are done and never sent again; the rest, still in their order, are written again as
// long as each attempt gets further. A write that makes no progress returns, retryable
// unless the broker's answer says retrying cannot help.
func (s *Sink) produceChunk(ctx context.Context, topic string, msgs []kafka.Message) ([]kafka.Message, error) {
	total := len(msgs)
	for len(msgs) > 0 {
		err := s.writer.WriteMessages(ctx, msgs...)
		if err == nil {
			return nil, nil
		}
		var werr kafka.WriteErrors
		if errors.As(err, &werr) && len(werr) == len(msgs) {
			rest := msgs[:0:0]
			first := error(nil)
			for i, e := range werr {
				if e != nil {
					rest = append(rest, msgs[i])
					if first == nil {
						first = e
					}
				}
			}
			err = first
			acked := len(msgs) - len(rest)
			msgs = rest
			var tooLarge kafka.MessageTooLargeError
			if errors.As(err, &tooLarge) {
				return msgs, retry.Terminal(fmt.Errorf("kafka sink %s: record %s of topic %s is larger than the writer's batch bytes: %w",
					s.name, tooLarge.Message.Key, topic, err))
			}
			if acked > 0 && ctx.Err() == nil {
				s.log.Warn("partial write, retrying the unacknowledged records", "topic", topic,
					"acknowledged", total-len(msgs), "of", total, "error", err)
				continue
			}
		}
		err = fmt.Errorf("kafka sink %s: write to %s (%d of %d records acknowledged): %w", s.name, topic, total-len(msgs), total, err)
		if errors.Is(err, kafka.UnknownTopicOrPartition) {
			s.forgetTopic(topic) // deleted under us: check it again next time
		}
		return msgs, classify(err)
	}
	return nil, nil
}

// ensureTopic checks topic once (creating it with createTopics) and returns its number of
// partitions, 0 when unknown.
func (s *Sink) ensureTopic(ctx context.Context, topic string) (int, error) {
	s.mu.Lock()
	partitions, known := s.topics[topic]
	s.mu.Unlock()
	if known {
		return partitions, nil
	}
	partitions, err := ensureTopic(ctx, s.client, kafka.TopicConfig{
		Topic:             topic,
		NumPartitions:     s.opts.Partitions,
		ReplicationFactor: s.opts.ReplicationFactor,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}, s.opts.CreateTopics)
	if err != nil {
		return 0, fmt.Errorf("kafka sink %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.topics[topic] = partitions
	s.mu.Unlock()
	return partitions, nil
}

func (s *Sink) forgetTopic(topic string) {
	s.mu.Lock()
	delete(s.topics, topic)
	s.mu.Unlock()
}

// Close closes the writer and the connections. Records not yet acknowledged may be lost;
// their batches were never committed, so they are written again after a restart.
func (s *Sink) Close() error {
	err := s.writer.Close()
	s.transport.CloseIdleConnections()
	return errors.Join(err, s.store.Close())
}
