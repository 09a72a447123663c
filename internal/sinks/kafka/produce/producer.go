package produce

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
)

// Config is what a Producer needs to know of the brokers and the records.
type Config struct {
	// Brokers are the bootstrap brokers, host:port: the metadata is read through them,
	// and they are asked first for a topic's leaders after a failed send.
	Brokers []string
	// Transport routes: its metadata cache says which broker leads each partition. Its
	// Dial, TLS, SASL and ClientID set up the Producer's own connections; its MetadataTTL
	// (0: kafka-go's 6 s) is how long a failed send's leaders are asked of a broker instead.
	Transport *kafka.Transport
	// WriteTimeout bounds one produce request (the broker gets half of it to answer, as
	// kafka-go's Client.Produce gives it).
	WriteTimeout time.Duration
	// Compression of the record batches; 0 for none.
	Compression kafka.Compression
	// MaxMessageBytes is the largest record, by kafka-go's Writer measure (MessageSize),
	// that Send accepts: a chunk holding a larger one is refused before anything is sent.
	MaxMessageBytes int
}

// Producer sends chunks of records to their partitions' leaders (Send). It is safe for
// concurrent use; Close ends it.
type Producer struct {
	cfg     Config
	addr    net.Addr
	conns   *leaderConns
	routeIn time.Duration // after a failed send, how long leaders are asked of a broker

	mu          sync.Mutex
	ids         []int                   // partitionIDs
	leaderCache map[string]topicLeaders // leaders
	askUntil    map[string]time.Time    // leaders: ask a broker rather than the Transport's cache until then
}

// New returns a Producer for cfg. It connects to nothing before the first Send.
func New(cfg Config) *Producer {
	route := cfg.Transport.MetadataTTL
	if route <= 0 {
		route = defaultMetadataTTL
	}
	return &Producer{cfg: cfg, addr: kafka.TCP(cfg.Brokers...), conns: newLeaderConns(cfg.Transport, cfg.WriteTimeout), routeIn: route}
}

// defaultMetadataTTL is kafka-go's Transport default MetadataTTL: how stale its routing
// can be after a partition's leader moves.
const defaultMetadataTTL = 6 * time.Second

// Close closes the idle connections; those in use close when their request ends, and a
// Send after Close fails.
func (p *Producer) Close() { p.conns.close() }

// Send produces one chunk of records to topic, of the given number of partitions: one
// Produce request per partition leader, carrying each of its partitions' records as one
// record batch, sent at once, in parallel when several brokers lead them, each
// acknowledged by every in-sync replica. The caller keeps a chunk to at most one
// request's worth per partition (the broker's limit): a partition whose records went
// out in two requests could have the first refused and the second acknowledged.
//
// It replaces kafka-go's Writer, because the Writer is built for many callers filling
// shared batches: every WriteMessages whose records do not fill a partition's batch
// waits BatchTimeout (5 ms) for records that never come (a steady stream's batch of one
// change; a relist's 1,000 spread over 6 partitions), and each partition batch costs a
// goroutine, a timer and BatchSize message slots. The sink already hands over whole
// batches, one at a time, so nothing is gained by waiting: 20 batches of 1,000 went out
// 10–20% faster through Send than through the Writer (BenchmarkKafkaSinkWrite,
// docs/benchmarks.md "Kafka per-batch cost"). The requests go over the Producer's own
// connections (leaderConns), in this goroutine.
//
// Records go to the partition kafka-go's hash balancer picks (the Writer's, so a key
// keeps its partition), in their order. Errors have the Writer's shapes: a
// kafka.MessageTooLargeError for a record over MaxMessageBytes (nothing sent), else a
// kafka.WriteErrors lined up with msgs when any partition failed (the broker answers for
// each partition of a request: they fail apart, and the records of the partitions that
// answered without error are acknowledged).
func (p *Producer) Send(ctx context.Context, topic string, partitions int, msgs []kafka.Message) error {
	if partitions <= 0 {
		return fmt.Errorf("produce to %s: %d partitions", topic, partitions)
	}
	for i := range msgs {
		if MessageSize(&msgs[i]) > p.cfg.MaxMessageBytes {
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: append(append([]kafka.Message(nil), msgs[:i]...), msgs[i+1:]...)}
		}
	}
	part := p.partitionsOf(msgs, partitions)
	var byPart []partitionRecords // in the order of their first record
	for i, pt := range part {
		j := slices.IndexFunc(byPart, func(r partitionRecords) bool { return r.partition == pt })
		if j < 0 {
			byPart = append(byPart, partitionRecords{partition: pt})
			j = len(byPart) - 1
		}
		byPart[j].idx = append(byPart[j].idx, i)
	}
	errs := make([]error, len(byPart))
	leaders, err := p.leaders(ctx, topic)
	if err != nil {
		for j := range errs {
			errs[j] = err
		}
	} else {
		// The partitions of each leader, in byPart's order.
		var brokers []string
		var of [][]int // indexes into byPart, per broker
		for j := range byPart {
			addr, ok := leaders[byPart[j].partition]
			if !ok {
				errs[j] = fmt.Errorf("partition %d of %s: %w", byPart[j].partition, topic, kafka.LeaderNotAvailable)
				continue
			}
			k := slices.Index(brokers, addr)
			if k < 0 {
				brokers = append(brokers, addr)
				of = append(of, nil)
				k = len(brokers) - 1
			}
			of[k] = append(of[k], j)
		}
		if len(brokers) == 1 {
			p.produceTo(ctx, brokers[0], topic, msgs, byPart, of[0], errs)
		} else {
			var wg sync.WaitGroup
			for k := range brokers {
				wg.Go(func() { p.produceTo(ctx, brokers[k], topic, msgs, byPart, of[k], errs) })
			}
			wg.Wait()
		}
	}
	var werr kafka.WriteErrors
	for j, err := range errs {
		if err == nil {
			continue
		}
		if werr == nil {
			werr = make(kafka.WriteErrors, len(msgs))
			p.forgetLeaders(topic) // a leader may have moved
		}
		for _, i := range byPart[j].idx {
			werr[i] = err
		}
	}
	if werr != nil {
		return werr
	}
	return nil
}

// partitionRecords are the indexes of a chunk's records for one partition, in order.
type partitionRecords struct {
	partition int
	idx       []int
}

// produceTo sends the records of byPart[of...] to their leader at addr in one request
// and sets errs[j] to the broker's answer for byPart[j]'s records.
func (p *Producer) produceTo(ctx context.Context, addr, topic string, msgs []kafka.Message, byPart []partitionRecords, of []int, errs []error) {
	req := &produceapi.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(p.cfg.WriteTimeout / 2 / time.Millisecond), // Client.Produce's: half for the broker, half for the way
		Topics:  []produceapi.RequestTopic{{Topic: topic, Partitions: make([]produceapi.RequestPartition, len(of))}},
	}
	for k, j := range of {
		req.Topics[0].Partitions[k] = produceapi.RequestPartition{
			Partition: int32(byPart[j].partition),
			RecordSet: protocol.RecordSet{
				Attributes: protocol.Attributes(p.cfg.Compression) & 0x7,
				Records:    &messageRecords{msgs: msgs, idx: byPart[j].idx},
			},
		}
	}
	fail := func(err error) {
		for _, j := range of {
			errs[j] = err
		}
	}
	r, err := p.conns.roundTrip(ctx, addr, req)
	if err != nil {
		fail(fmt.Errorf("produce to broker %s: %w", addr, err))
		return
	}
	res := r.(*produceapi.Response)
	if len(res.Topics) != 1 {
		fail(fmt.Errorf("produce to broker %s: %w", addr, protocol.ErrNoTopic))
		return
	}
	for _, j := range of {
		errs[j] = fmt.Errorf("produce to broker %s: %w", addr, protocol.ErrNoPartition)
		for _, pt := range res.Topics[0].Partitions {
			if int(pt.Partition) == byPart[j].partition {
				errs[j] = brokerError(pt.ErrorCode, pt.ErrorMessage)
				break
			}
		}
	}
}

// partitionsOf returns the partition of each of msgs, as the Writer's kafka.Hash balancer
// chooses it.
func (p *Producer) partitionsOf(msgs []kafka.Message, partitions int) []int {
	ids := p.partitionIDs(partitions)
	var balancer kafka.Hash
	out := make([]int, len(msgs))
	for i := range msgs {
		out[i] = balancer.Balance(msgs[i], ids...)
	}
	return out
}

// partitionIDs is [0, n), kept for the last n asked.
func (p *Producer) partitionIDs(n int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) != n {
		p.ids = make([]int, n)
		for i := range p.ids {
			p.ids[i] = i
		}
	}
	return p.ids
}

// MessageSize is kafka-go's Writer measure of a record against its BatchBytes (key,
// value, headers and the record's fixed fields), the one Send holds records to.
func MessageSize(m *kafka.Message) int {
	n := 14 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// messageRecords reads msgs[idx...] as records without copying them.
type messageRecords struct {
	msgs       []kafka.Message
	idx        []int
	next       int
	record     kafka.Record
	key, value bytesReader
}

func (r *messageRecords) ReadRecord() (*kafka.Record, error) {
	if r.next >= len(r.idx) {
		return nil, io.EOF
	}
	m := &r.msgs[r.idx[r.next]]
	r.next++
	r.record = kafka.Record{Time: m.Time, Headers: m.Headers}
	if m.Key != nil {
		r.key.Reset(m.Key)
		r.record.Key = &r.key
	}
	if m.Value != nil {
		r.value.Reset(m.Value)
		r.record.Value = &r.value
	}
	return &r.record, nil
}

// bytesReader is kafka.Bytes over a byte slice.
type bytesReader struct{ bytes.Reader }

func (*bytesReader) Close() error { return nil }
