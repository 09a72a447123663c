package kafkascan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
)

// Topic calls fn for every record of every partition of topic, from the log start to
// the high watermark as of the call, partition by partition in offset order. Message keys
// and values are copies fn may keep; a null value is a nil Value.
func Topic(ctx context.Context, client *kafka.Client, topic string, fn func(kafka.Message) error) error {
	return scan(ctx, client, topic, -1, fn)
}

// Tail is Topic over at most the last n offsets of each partition (fewer records where
// compaction left gaps): a bounded read of a topic that may be long.
func Tail(ctx context.Context, client *kafka.Client, topic string, n int64, fn func(kafka.Message) error) error {
	return scan(ctx, client, topic, max(n, 0), fn)
}

// scan reads every partition of topic, from its last tail offsets (tail < 0: from its start).
func scan(ctx context.Context, client *kafka.Client, topic string, tail int64, fn func(kafka.Message) error) error {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var reqs []kafka.OffsetRequest
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return t.Error
		}
		for _, p := range t.Partitions {
			reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
	}
	if len(reqs) == 0 {
		return fmt.Errorf("topic %s has no partitions", topic)
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	parts := offs.Topics[topic]
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	for _, p := range parts {
		if p.Error != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, p.Error)
		}
		from := p.FirstOffset
		if tail >= 0 {
			from = max(from, p.LastOffset-tail)
		}
		if err := scanPartition(ctx, client, topic, p.Partition, from, p.LastOffset, fn); err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, err)
		}
	}
	return nil
}

func scanPartition(ctx context.Context, client *kafka.Client, topic string, partition int, from, end int64, fn func(kafka.Message) error) error {
	for off := from; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := client.Fetch(ctx, &kafka.FetchRequest{
			Topic: topic, Partition: partition, Offset: off,
			MinBytes: 1, MaxBytes: 32 << 20, MaxWait: 100 * time.Millisecond,
		})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			return fmt.Errorf("fetch at %d: %w", off, err)
		}
		next := off
		for {
			r, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("fetch at %d: %w", off, err)
			}
			if r.Offset < off || r.Offset >= end {
				continue
			}
			m := kafka.Message{Topic: topic, Partition: partition, Offset: r.Offset, Time: r.Time}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
			}
			if m.Key, err = readAllBytes(r.Key); err == nil {
				m.Value, err = readAllBytes(r.Value)
			}
			if err != nil {
				return fmt.Errorf("record %d: %w", r.Offset, err)
			}
			if err := fn(m); err != nil {
				return err
			}
			next = r.Offset + 1
		}
		if next == off {
			// Nothing at or after off in the returned batch: compaction removed the
			// batch's tail. Step past it.
			if res.HighWatermark <= off {
				return nil
			}
			next = off + 1
		}
		off = next
	}
	return nil
}

func readAllBytes(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	defer b.Close()
	var buf bytes.Buffer
	buf.Grow(b.Len())
	_, err := buf.ReadFrom(b)
	return buf.Bytes(), err
}
