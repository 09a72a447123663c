package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataapi "github.com/segmentio/kafka-go/protocol/metadata"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
)

// send produces one chunk (chunkLen: at most one request's worth per partition) to a
// topic of the given number of partitions: one Produce request per partition leader,
// carrying each of its partitions' records as one record batch, sent at once, in
// parallel when several brokers lead them, each acknowledged by every in-sync replica.
//
// It replaces kafka-go's Writer wherever the partition count is known, because the Writer
// is built for many callers filling shared batches: every WriteMessages whose records do
// not fill a partition's batch waits BatchTimeout (5 ms) for records that never come (a
// steady stream's batch of one change; a relist's 1,000 spread over 6 partitions), and
// each partition batch costs a goroutine, a timer and BatchSize message slots. The
// pipeline already hands over whole batches, one at a time, so nothing is gained by
// waiting: 20 batches of 1,000 went out 10–20% faster through send than through the
// Writer (BenchmarkKafkaSinkWrite, docs/benchmarks.md "Kafka per-batch cost"). The
// requests go over the sink's own connections (leaderConns), in this goroutine.
//
// Records go to the partition kafka-go's hash balancer picks (the Writer's, so a key
// keeps its partition), in their order. Errors have the Writer's shapes, so produceChunk
// reads them alike: a MessageTooLargeError for a record over the sink's batch bytes
// (nothing sent), else a WriteErrors lined up with msgs when any partition failed (the
// broker answers for each partition of a request: they fail apart).
func (s *Sink) send(ctx context.Context, topic string, partitions int, msgs []kafka.Message) error {
	for i := range msgs {
		if messageSize(&msgs[i]) > s.batchBytes {
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: append(append([]kafka.Message(nil), msgs[:i]...), msgs[i+1:]...)}
		}
	}
	part := s.partitionsOf(msgs, partitions)
	var byPart []partitionRecords // in the order of their first record
	for i, p := range part {
		j := slices.IndexFunc(byPart, func(r partitionRecords) bool { return r.partition == p })
		if j < 0 {
			byPart = append(byPart, partitionRecords{partition: p})
			j = len(byPart) - 1
		}
		byPart[j].idx = append(byPart[j].idx, i)
	}
	errs := make([]error, len(byPart))
	leaders, err := s.leaders(ctx, topic)
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
			s.produceTo(ctx, brokers[0], topic, msgs, byPart, of[0], errs)
		} else {
			var wg sync.WaitGroup
			for k := range brokers {
				wg.Go(func() { s.produceTo(ctx, brokers[k], topic, msgs, byPart, of[k], errs) })
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
			s.forgetLeaders(topic) // a leader may have moved
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

// leaders returns the address of the broker leading each partition of topic, from the
// Transport's metadata cache (no request: the Transport refreshes it on its own), as
// kafka-go's Client.Produce routes a request. What it read is kept for leadersFresh, or
// until a send fails: reading and copying the Transport's cache for every batch was 4% of
// the daemon's CPU at 200 changes/s.
//
// After a failed send the Transport's cache may be what is wrong: a partition's leader
// moved (a broker restarted, a reassignment) and the Transport learns it only at its next
// refresh, up to transportMetadataTTL later, so every retry until then would go to the
// old leader and fail again. For that long the topic's leaders are asked of a broker
// directly (askLeaders), once per leadersFresh.
func (s *Sink) leaders(ctx context.Context, topic string) (map[int]string, error) {
	s.mu.Lock()
	l, ok := s.leaderCache[topic]
	ask := time.Now().Before(s.askUntil[topic])
	s.mu.Unlock()
	if ok && time.Since(l.at) < leadersFresh {
		return l.addrs, nil
	}
	var addrs map[int]string
	var err error
	if ask {
		addrs, err = s.askLeaders(ctx, topic, l.addrs)
	}
	if !ask || err != nil {
		addrs, err = s.readLeaders(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.leaderCache == nil {
		s.leaderCache = map[string]topicLeaders{}
	}
	s.leaderCache[topic] = topicLeaders{addrs: addrs, at: time.Now()}
	s.mu.Unlock()
	return addrs, nil
}

// leadersFresh is how long leaders trusts what it read: a small part of the time the
// Transport keeps its own metadata (6 s), so routing lags the Transport's little.
const leadersFresh = time.Second

// topicLeaders is what leaders read of a topic and when.
type topicLeaders struct {
	addrs map[int]string
	at    time.Time
}

// forgetLeaders makes the next send of topic read its leaders again, from a broker
// rather than the Transport's cache for transportMetadataTTL (see leaders). The leaders
// read last stay, as brokers to ask.
func (s *Sink) forgetLeaders(topic string) {
	s.mu.Lock()
	if l, ok := s.leaderCache[topic]; ok {
		s.leaderCache[topic] = topicLeaders{addrs: l.addrs} // stale: at is zero
	}
	if s.askUntil == nil {
		s.askUntil = map[string]time.Time{}
	}
	s.askUntil[topic] = time.Now().Add(transportMetadataTTL)
	s.mu.Unlock()
}

// readLeaders is leaders' read of the Transport's cache.
func (s *Sink) readLeaders(ctx context.Context, topic string) (map[int]string, error) {
	r, err := s.transport.RoundTrip(ctx, s.client.Addr, &metadataapi.Request{TopicNames: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, err)
	}
	return leadersOf(r.(*metadataapi.Response), topic)
}

// askLeaders asks the brokers for topic's leaders over the sink's own connections: the
// bootstrap brokers first, then those of known (the leaders read last), until one
// answers.
func (s *Sink) askLeaders(ctx context.Context, topic string, known map[int]string) (map[int]string, error) {
	addrs := slices.Clone(s.opts.Brokers)
	var more []string
	for _, a := range known {
		if !slices.Contains(addrs, a) && !slices.Contains(more, a) {
			more = append(more, a)
		}
	}
	slices.Sort(more) // map order is random: ask in a stable one
	addrs = append(addrs, more...)
	var errs []error
	for _, a := range addrs {
		r, err := s.conns.roundTrip(ctx, a, &metadataapi.Request{TopicNames: []string{topic}})
		if err == nil {
			var out map[int]string
			if out, err = leadersOf(r.(*metadataapi.Response), topic); err == nil {
				return out, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("partition leaders of %s: %w", topic, errors.Join(errs...))
}

// leadersOf reads topic's partition leaders from a metadata answer.
func leadersOf(meta *metadataapi.Response, topic string) (map[int]string, error) {
	if len(meta.Topics) != 1 {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, kafka.UnknownTopicOrPartition)
	}
	if err := brokerError(meta.Topics[0].ErrorCode, ""); err != nil {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, err)
	}
	out := make(map[int]string, len(meta.Topics[0].Partitions))
	for _, p := range meta.Topics[0].Partitions {
		for _, b := range meta.Brokers {
			if b.NodeID == p.LeaderID {
				out[int(p.PartitionIndex)] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
				break
			}
		}
	}
	return out, nil
}

// produceTo sends the records of byPart[of...] to their leader at addr in one request
// and sets errs[j] to the broker's answer for byPart[j]'s records.
func (s *Sink) produceTo(ctx context.Context, addr, topic string, msgs []kafka.Message, byPart []partitionRecords, of []int, errs []error) {
	req := &produceapi.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(s.opts.WriteTimeout / 2 / time.Millisecond), // Client.Produce's: half for the broker, half for the way
		Topics:  []produceapi.RequestTopic{{Topic: topic, Partitions: make([]produceapi.RequestPartition, len(of))}},
	}
	for k, j := range of {
		req.Topics[0].Partitions[k] = produceapi.RequestPartition{
			Partition: int32(byPart[j].partition),
			RecordSet: protocol.RecordSet{
				Attributes: protocol.Attributes(s.compression) & 0x7,
				Records:    &messageRecords{msgs: msgs, idx: byPart[j].idx},
			},
		}
	}
	fail := func(err error) {
		for _, j := range of {
			errs[j] = err
		}
	}
	r, err := s.conns.roundTrip(ctx, addr, req)
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
		for _, p := range res.Topics[0].Partitions {
			if int(p.Partition) == byPart[j].partition {
				errs[j] = brokerError(p.ErrorCode, p.ErrorMessage)
				break
			}
		}
	}
}

// partitionsOf returns the partition of each of msgs, as the Writer's kafka.Hash balancer
// chooses it.
func (s *Sink) partitionsOf(msgs []kafka.Message, partitions int) []int {
	ids := s.partitionIDs(partitions)
	var balancer kafka.Hash
	out := make([]int, len(msgs))
	for i := range msgs {
		out[i] = balancer.Balance(msgs[i], ids...)
	}
	return out
}

// partitionIDs is [0, n), kept for the last n asked.
func (s *Sink) partitionIDs(n int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) != n {
		s.ids = make([]int, n)
		for i := range s.ids {
			s.ids[i] = i
		}
	}
	return s.ids
}

// messageSize is kafka-go's Writer measure of a record against its BatchBytes (key,
// value, headers and the record's fixed fields).
func messageSize(m *kafka.Message) int {
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
