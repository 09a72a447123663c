package kafka

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/segmentio/kafka-go"
)

// send produces one chunk (chunkLen: at most one request's worth per partition) to a
// topic of the given number of partitions: one Produce request per partition, sent at
// once, in parallel when there are several, each acknowledged by every in-sync replica.
//
// It replaces kafka-go's Writer wherever the partition count is known, because the Writer
// is built for many callers filling shared batches: every WriteMessages whose records do
// not fill a partition's batch waits BatchTimeout (5 ms) for records that never come (a
// steady stream's batch of one change; a relist's 1,000 spread over 6 partitions), and
// each partition batch costs a goroutine, a timer and BatchSize message slots. The
// pipeline already hands over whole batches, one at a time, so nothing is gained by
// waiting: 20 batches of 1,000 went out 10–20% faster through send than through the
// Writer (BenchmarkKafkaSinkWrite, docs/benchmarks.md "Kafka per-batch cost").
//
// Records go to the partition kafka-go's hash balancer picks (the Writer's, so a key
// keeps its partition), in their order. Errors have the Writer's shapes, so produceChunk
// reads them alike: a MessageTooLargeError for a record over the sink's batch bytes
// (nothing sent), else a WriteErrors lined up with msgs when any partition failed.
func (s *Sink) send(ctx context.Context, topic string, partitions int, msgs []kafka.Message) error {
	for i := range msgs {
		if messageSize(&msgs[i]) > s.batchBytes {
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: append(append([]kafka.Message(nil), msgs[:i]...), msgs[i+1:]...)}
		}
	}
	part := s.partitionsOf(msgs, partitions)
	var byPart [][]int // indexes of msgs per partition used, in order
	var used []int
	for i, p := range part {
		j := -1
		for k, q := range used {
			if q == p {
				j = k
				break
			}
		}
		if j < 0 {
			used = append(used, p)
			byPart = append(byPart, nil)
			j = len(used) - 1
		}
		byPart[j] = append(byPart[j], i)
	}
	errs := make([]error, len(used))
	if len(used) == 1 {
		errs[0] = s.produceTo(ctx, topic, used[0], msgs, byPart[0])
	} else {
		var wg sync.WaitGroup
		for j := range used {
			wg.Go(func() { errs[j] = s.produceTo(ctx, topic, used[j], msgs, byPart[j]) })
		}
		wg.Wait()
	}
	var werr kafka.WriteErrors
	for j, err := range errs {
		if err == nil {
			continue
		}
		if werr == nil {
			werr = make(kafka.WriteErrors, len(msgs))
		}
		for _, i := range byPart[j] {
			werr[i] = err
		}
	}
	if werr != nil {
		return werr
	}
	return nil
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

// produceTo sends msgs[idx...] to one partition in one request and returns the broker's
// answer for all of them.
func (s *Sink) produceTo(ctx context.Context, topic string, partition int, msgs []kafka.Message, idx []int) error {
	res, err := s.client.Produce(ctx, &kafka.ProduceRequest{
		Topic: topic, Partition: partition, RequiredAcks: kafka.RequireAll, Compression: s.compression,
		Records: &messageRecords{msgs: msgs, idx: idx},
	})
	if err != nil {
		return err
	}
	return res.Error
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
