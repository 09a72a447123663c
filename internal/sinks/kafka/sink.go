package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/resolved"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka/produce"
)

// writerBatchSize is the most records a chunk puts on one partition (one record batch
// of one produce request): 512 records of ~1.5 KB already reach writerBatchBytes;
// produce cuts bigger pipeline batches into chunks that go out one after the other. (The
// name is from kafka-go's Writer, whose BatchSize it was; the Writer allocated that many
// message slots for every partition batch, which is why it is not larger.)
const writerBatchSize = 512

// Sink writes change batches to Kafka topics and keeps its checkpoints and key index in a
// checkpoint.Store. See the package documentation for the record contract.
type Sink struct {
	// Keeper answers KeyIndex, Epoch (pipeline.EpochKeeper) and Scopes and ForgetScopes
	// (pipeline.ScopeKeeper) from the checkpoint store; Checkpoint checks topics first.
	checkpoint.Keeper

	name, cluster string
	actors        envelope.Actors // SetActors; nil: records carry no actor
	opts          Options
	log           *slog.Logger
	transport     *kafka.Transport
	client        *kafka.Client
	// producer sends every record: data, dead letters and resolved records.
	producer *produce.Producer
	// batchBytes is the producer's MaxMessageBytes and the most any topic's limit can be:
	// opts.MaxMessageBytes, else the broker's message.max.bytes, else DefaultMaxMessageBytes.
	batchBytes int
	metrics    Metrics
	// resolved keeps the watermarks for resolved records (resolved.go); nil when off.
	resolved     *resolved.Emitter
	stopResolved func()

	mu     sync.Mutex
	topics map[string]topicInfo // topics known to exist
}

// topicInfo is what the sink knows of a topic it checked.
type topicInfo struct {
	partitions int // at least 1
	maxBytes   int // the largest record batch it accepts (maxMessageBytes)
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
	opts = opts.withDefaults()
	comp, err := compression(opts.Compression)
	if err != nil {
		return nil, retry.Terminal(fmt.Errorf("kafka sink %s: %w", name, err))
	}
	tr, err := NewTransport(opts)
	if err != nil {
		return nil, retry.Terminal(fmt.Errorf("kafka sink %s: %w", name, err))
	}
	s := &Sink{
		name: name, cluster: cluster, opts: opts, Keeper: checkpoint.Keeper{SinkName: name, Store: store},
		log:       log.With("sink", name),
		transport: tr,
		client:    &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: tr, Timeout: opts.WriteTimeout},
		topics:    map[string]topicInfo{},
	}
	cctx, cancel := context.WithTimeout(ctx, opts.WriteTimeout)
	defer cancel()
	meta, err := s.client.Metadata(cctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		tr.CloseIdleConnections()
		err = fmt.Errorf("kafka sink %s: brokers %s: %w", name, strings.Join(opts.Brokers, ","), err)
		if isTerminal(err) {
			return nil, retry.Terminal(err)
		}
		return nil, fmt.Errorf("%w (are the brokers up and reachable?)", err)
	}
	s.batchBytes = opts.MaxMessageBytes
	if s.batchBytes <= 0 {
		s.batchBytes = DefaultMaxMessageBytes
		if n, err := brokerMaxMessageBytes(cctx, s.client, meta); err != nil {
			s.log.Warn("cannot read the brokers' message.max.bytes; records over the default are quarantined (set kafka.maxMessageBytes to say the limit)",
				"default", DefaultMaxMessageBytes, "error", err)
		} else {
			s.batchBytes = n
		}
	}
	s.producer = produce.New(produce.Config{Brokers: opts.Brokers, Transport: tr, WriteTimeout: opts.WriteTimeout,
		Compression: comp, MaxMessageBytes: s.batchBytes})
	s.startResolved()
	return s, nil
}

// Name is the configured sink name.
func (s *Sink) Name() string { return s.name }

// Checkpoint returns the store's checkpoint for res. The pipeline asks for it once per
// resource before streaming, so this is where res's topic is checked (and created with
// createTopics), and its resolved topic when resolved records are on: a missing topic
// fails the start, not the first change hours later.
func (s *Sink) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	if _, err := s.ensureTopic(ctx, TopicName(s.opts.Topic, s.cluster, res)); err != nil {
		return 0, err
	}
	if s.resolved != nil {
		if _, err := s.ensureTopic(ctx, ResolvedTopicName(s.opts.ResolvedTopic, s.opts.Topic, s.cluster, res)); err != nil {
			return 0, err
		}
	}
	return s.Keeper.Checkpoint(ctx, res)
}

// Write is Prepare(b)(ctx).
func (s *Sink) Write(ctx context.Context, b change.Batch) error { return s.Prepare(b)(ctx) }

// Prepare returns the write of b: the first call encodes b's records, once; each call
// produces the records the brokers have not acknowledged yet, waits until they
// acknowledged every one, and then commits b to the store. On error nothing is committed
// and the pipeline calls the write again: it sends only the records still unacknowledged,
// so a partial failure (kafka-go's WriteErrors) never sends a record twice, and records
// are a pure function of b, so a re-emit after a restart is byte-identical.
//
// Before the first send the store notes b's new keys, durably (checkpoint.IntentStore).
// For a batch of intentAlongside changes or more (a relist's) it does so while the
// records are encoded, in a goroutine of the write: the write, not Prepare, since the
// batch before has committed by the time its write is called, and the intents must see
// that commit.
//
// A record too large for its topic (measured before the first send, or refused by the
// broker) is quarantined in place (quarantine.go): its stub takes its place, so the
// batch's order holds, and the record goes to the dead-letter topic before the commit.
// SetActors makes the sink write who made each change into its record's source (user,
// impersonator, userAgent, auditID) where a knows it when the batch is first written.
// Call it before the first write.
func (s *Sink) SetActors(a envelope.Actors) { s.actors = a }

func (s *Sink) Prepare(b change.Batch) func(ctx context.Context) error {
	topic := TopicName(s.opts.Topic, s.cluster, b.Resource)
	var msgs []kafka.Message
	var wiring error
	for i := range b.Changes {
		if c := &b.Changes[i]; c.Cluster != s.cluster {
			wiring = retry.Terminal(fmt.Errorf("kafka sink %s: %s %s: change of cluster %q reached the sink of cluster %q",
				s.name, b.Resource.ID(), c.Key, c.Cluster, s.cluster))
			break
		}
	}
	q := &quarantine{s: s, res: b.Resource}
	encoded, screened, intended := false, false, false
	return func(ctx context.Context) error {
		if wiring != nil {
			return wiring
		}
		var intent chan error
		if !intended && len(b.Changes) >= intentAlongside {
			intent = make(chan error, 1)
			go func() { intent <- s.Intend(ctx, b) }()
		}
		if !encoded {
			// The actors are looked up once, when the batch is first written (the lookup
			// may wait for them, audit.wait): a re-emit after a restart may carry an
			// actor the first emit did not.
			var actors []*change.Actor
			if s.actors != nil {
				actors, _ = s.actors.Actors(ctx, b)
			}
			msgs = encodeBatch(topic, b.Changes, actors)
			encoded = true
		}
		if intent != nil {
			if err := <-intent; err != nil {
				return fmt.Errorf("kafka sink %s: %w", s.name, err)
			}
			intended = true
		}
		if len(msgs) > 0 {
			t, err := s.ensureTopic(ctx, topic)
			if err != nil {
				return err
			}
			if !screened { // before the first send, so no record goes out before its stub
				if err := q.screenOversized(msgs, t.maxBytes); err != nil {
					return err
				}
				screened = true
			}
			if !intended {
				// Before the first send too: a kill after it and before the commit must
				// not leave records whose keys the index lacks (checkpoint.IntentStore).
				if err := s.Intend(ctx, b); err != nil {
					return fmt.Errorf("kafka sink %s: %w", s.name, err)
				}
				intended = true
			}
			if msgs, err = s.produce(ctx, topic, t, msgs, q.add); err != nil {
				return err
			}
		}
		if err := q.writeDeadLetters(ctx); err != nil {
			return err
		}
		if err := s.Commit(ctx, b); err != nil {
			return fmt.Errorf("kafka sink %s: records acknowledged, checkpoint not committed: %w", s.name, err)
		}
		if s.resolved != nil {
			// Every record up to b.Checkpoint is acknowledged, but the watermark waits for
			// the checkpoint to be durable too (a store that groups commits writes it
			// within its flush interval): a crash re-emits the records since the durable
			// checkpoint, and a watermark above it would then be followed by older
			// versions of keys it covers, which the contract rules out ("never followed
			// by an earlier one"). Only what Committed reads is kept until then.
			mark := change.Batch{Resource: b.Resource, Checkpoint: b.Checkpoint, Epoch: b.Epoch}
			checkpoint.WhenDurable(s.Store, func() { s.resolved.Committed(mark) })
		}
		q.report(ctx)
		return nil
	}
}

// intentAlongside is the fewest changes whose intents (checkpoint.IntentStore) are noted
// in a goroutine while the batch is encoded: below it the encoding takes less than the
// goroutine's hand-offs.
const intentAlongside = 64

// encodeBatch returns the records of changes, each record of a change (not a tombstone)
// carrying it as WriterData, should it be quarantined.
//
// actors (nil, or one entry per change, nil where unknown) are who made the changes.
func encodeBatch(topic string, changes []change.Change, actors []*change.Actor) []kafka.Message {
	msgs := make([]kafka.Message, 0, len(changes)+len(changes)/8)
	for i := range changes {
		c := &changes[i]
		n := len(msgs)
		var a *change.Actor
		if i < len(actors) {
			a = actors[i]
		}
		msgs = appendMessages(msgs, topic, c, a)
		for j := n; j < len(msgs); j++ {
			if msgs[j].Value != nil { // a tombstone has no smaller form
				msgs[j].WriterData = c
			}
		}
	}
	return msgs
}

// produce writes msgs and returns the ones still unacknowledged (none on success), in
// chunks that the producer sends as one produce request per partition leader (chunkLen):
// a partition whose records went out in two requests could have the first refused and
// the second acknowledged, and writing the first again would then put older versions of
// a key after newer ones. A chunk is acknowledged whole before the next one goes out.
//
// A chunk is cut per partition of t.partitions, so a batch spread over several
// partitions still goes out in one round of parallel requests.
//
// A partition batch the broker refuses as too large is split: its records go out again
// in chunks of half the bytes, in order, until each is alone; a record refused alone is
// handed to tooLarge, which turns it into something smaller in place (its stub) or fails.
func (s *Sink) produce(ctx context.Context, topic string, t topicInfo, msgs []kafka.Message, tooLarge func(m *kafka.Message, reason string) error) ([]kafka.Message, error) {
	budget := min(t.maxBytes, writerBatchBytes)
	for len(msgs) > 0 {
		n := chunkLen(msgs, t.partitions, budget)
		rest, err := s.produceChunk(ctx, topic, t.partitions, msgs[:n])
		var refused *refusedTooLarge
		if errors.As(err, &refused) {
			if !refused.alone(rest, t.partitions) {
				budget /= 2 // chunkLen still takes one record per partition
				s.log.Warn("the broker refused a batch as too large; writing its records in smaller batches",
					"topic", topic, "records", len(refused.indexes), "batchBytes", budget, "error", refused.err)
			} else {
				for _, i := range refused.indexes {
					reason := fmt.Sprintf("record of %d bytes for topic %s: %s", batchOverhead+recordSize(rest[i]), topic, refused.reason)
					if err := tooLarge(&rest[i], reason); err != nil {
						return slices.Concat(rest, msgs[n:]), err
					}
				}
			}
			msgs = slices.Concat(rest, msgs[n:])
			continue
		}
		if err != nil {
			return slices.Concat(rest, msgs[n:]), err
		}
		msgs = msgs[n:]
	}
	return nil, nil
}

// writerBatchBytes bounds the bytes of a chunk on one partition (and the topic's limit
// bounds it further): 1 MiB, kafka-go's default BatchBytes, under which 512 records of
// ~1.5 KB make one request. A single record larger than this but within the topic's limit
// goes out alone.
const writerBatchBytes = 1 << 20

// recordOverhead bounds what kafka-go adds to a record's key, value and headers when it
// sizes a batch (length varints, offset and timestamp deltas, attributes).
const recordOverhead = 64

// chunkLen is how many of msgs, from the first, fit one record batch per partition:
// at most writerBatchSize records of at most maxBytes (with the batch's framing) on each
// partition, counted per partition with the producer's balancer (kafka.Hash) when the
// partition count is known, over the whole chunk otherwise. It is at least 1, and takes
// at least one record per partition: a record too large for a batch goes out alone.
func chunkLen(msgs []kafka.Message, partitions, maxBytes int) int {
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
		n := recordSize(m)
		if count[p] == writerBatchSize || count[p] > 0 && batchOverhead+size[p]+n > maxBytes {
			return i
		}
		size[p] += n
		count[p]++
	}
	return len(msgs)
}

// batchOverhead is the framing of a record batch (v2) around its records: base offset,
// length, leader epoch, magic, CRC, attributes, offset delta, timestamps, producer id,
// epoch and sequence, record count. The broker counts it against max.message.bytes.
const batchOverhead = 61

// recordSize bounds m's size in a record batch: key, value, headers and what kafka-go
// adds to them (recordOverhead). It is at least kafka-go's own measure
// (produce.MessageSize), so no record within a chunk's bytes by this count is refused by
// the producer's MaxMessageBytes.
func recordSize(m kafka.Message) int {
	n := len(m.Key) + len(m.Value) + recordOverhead
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + recordOverhead/8
	}
	return n
}

// fits reports whether m alone is a record batch within maxBytes.
func fits(m kafka.Message, maxBytes int) bool { return batchOverhead+recordSize(m) <= maxBytes }

// produceChunk writes msgs, one chunk, and returns the ones still unacknowledged (none on
// success). The producer reports failures per record (kafka.WriteErrors): records the
// brokers acknowledged are done and never sent again; the rest, still in their order, are written again as
// long as each attempt gets further. A write that makes no progress returns, retryable
// unless the broker's answer says retrying cannot help. Records refused as too large
// return at once as a *refusedTooLarge naming them, for produce to split or quarantine.
func (s *Sink) produceChunk(ctx context.Context, topic string, partitions int, msgs []kafka.Message) ([]kafka.Message, error) {
	total := len(msgs)
	for len(msgs) > 0 {
		err := s.producer.Send(ctx, topic, partitions, msgs)
		if err == nil {
			return nil, nil
		}
		var clientTooLarge kafka.MessageTooLargeError
		if errors.As(err, &clientTooLarge) {
			// The producer sent nothing: one record is over batchBytes by kafka-go's measure.
			return msgs, clientRefused(msgs, clientTooLarge, s.batchBytes)
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
			if refused := brokerRefused(werr); refused != nil {
				return rest, refused
			}
			err = first
			acked := len(msgs) - len(rest)
			msgs = rest
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
// partitions and the largest record batch it accepts: maxMessageBytes when configured,
// else the topic's max.message.bytes (at most batchBytes), else batchBytes. The partitions of a topic another client created meanwhile are
// asked of a broker (the Transport's cache may not list it yet).
func (s *Sink) ensureTopic(ctx context.Context, topic string) (topicInfo, error) {
	s.mu.Lock()
	t, known := s.topics[topic]
	s.mu.Unlock()
	if known {
		return t, nil
	}
	partitions, err := ensureTopic(ctx, s.client, kafka.TopicConfig{
		Topic:             topic,
		NumPartitions:     s.opts.Partitions,
		ReplicationFactor: s.opts.ReplicationFactor,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}, s.opts.CreateTopics)
	if err != nil {
		return topicInfo{}, fmt.Errorf("kafka sink %s: %w", s.name, err)
	}
	if partitions <= 0 { // another client created it meanwhile
		if partitions, err = s.producer.Partitions(ctx, topic); err != nil {
			return topicInfo{}, classify(fmt.Errorf("kafka sink %s: %w", s.name, err))
		}
	}
	t = topicInfo{partitions: partitions, maxBytes: s.batchBytes}
	if s.opts.MaxMessageBytes <= 0 {
		if n, err := topicMaxMessageBytes(ctx, s.client, topic); err != nil {
			s.log.Warn("cannot read the topic's max.message.bytes; using the brokers'", "topic", topic, "maxBytes", t.maxBytes, "error", err)
		} else {
			t.maxBytes = min(n, s.batchBytes)
		}
	}
	s.log.Debug("topic checked", "topic", topic, "partitions", partitions, "maxBytes", t.maxBytes)
	s.mu.Lock()
	s.topics[topic] = t
	s.mu.Unlock()
	return t, nil
}

func (s *Sink) forgetTopic(topic string) {
	s.mu.Lock()
	delete(s.topics, topic)
	s.mu.Unlock()
}

// Close writes the store's pending commits, the last resolved records (when on), and
// closes the connections. Records not yet acknowledged may be lost; their
// batches were never committed, so they are written again after a restart.
func (s *Sink) Close() error {
	// First, so that the watermarks waiting for the flush are the last ones written.
	flushErr := checkpoint.Flush(context.Background(), s.Store)
	if s.stopResolved != nil {
		s.stopResolved()
	}
	s.producer.Close()
	s.transport.CloseIdleConnections()
	return errors.Join(flushErr, s.Store.Close())
}
