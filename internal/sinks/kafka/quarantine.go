package kafka

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka/kafkascan"
)

// A record the data topic cannot take (larger than the topic accepts) must not stop the
// stream (design §1.7): the change is quarantined. Its place in the data topic, and so in
// its key's order, goes to a stub: the same key, headers and time, and the envelope with
// a small object in place of the state (apiVersion, kind and metadata name, namespace, uid,
// resourceVersion) and source.quarantined true with source.quarantineReason. The key index
// (uid, RV) therefore stays right, and a later good version of the object is just the
// key's next record. The record itself goes to the dead-letter topic (DeadLetterTopic,
// default "<data topic>.quarantine", compacted, one record per key), as much of its value
// as fits, with what identifies it in headers; then the checkpoint moves on, and the change
// is logged at warn and counted (Metrics.Quarantined).

// Headers of quarantine records: HeaderQuarantined marks a stub in the data topic; a
// dead-letter record carries HeaderOp, HeaderRV, HeaderResource and (from epoch 1 on)
// HeaderEpoch of the record it holds, and the others.
const (
	HeaderQuarantined = "kube-cdc.quarantined" // "true"
	HeaderCluster     = "kube-cdc.cluster"
	HeaderUID         = "kube-cdc.uid"
	HeaderTopic       = "kube-cdc.topic"  // the data topic the record was for
	HeaderReason      = "kube-cdc.reason" // why the data topic could not take it
	HeaderSize        = "kube-cdc.size"   // bytes of the record's value
	HeaderSHA256      = "kube-cdc.sha256" // hex SHA-256 of the record's value
	HeaderTruncated   = "kube-cdc.truncated"
)

// Metrics is the sink's optional metrics hook; *metrics.Metrics implements it. An alias
// of an unnamed interface, as the PostgreSQL sink's is, so that the wiring sets both
// through one interface.
type Metrics = interface {
	// Quarantined counts n changes of resource that sink put in quarantine.
	Quarantined(sink, resource string, n int)
}

// SetMetrics installs the metrics hook (nil: none). Call it before the first Write.
func (s *Sink) SetMetrics(m Metrics) { s.metrics = m }

// DeadLetterTopicName expands the dead-letter topic template for one resource: {topic}
// is its data topic (TopicName of dataTemplate), the other placeholders are TopicName's.
func DeadLetterTopicName(template, dataTemplate, cluster string, res change.Resource) string {
	if template == "" {
		template = DefaultDeadLetterTopic
	}
	return TopicName(strings.ReplaceAll(template, "{topic}", TopicName(dataTemplate, cluster, res)), cluster, res)
}

// quarantine is the quarantined changes of one prepared write, from the first attempt
// to the commit: which records became stubs, which dead-letter records the brokers have
// not acknowledged yet, and what was reported.
type quarantine struct {
	s        *Sink
	res      change.Resource
	entries  []quarantined
	pending  []kafka.Message // dead-letter records not acknowledged yet, WriterData its entry's index
	built    int             // entries[:built] have their dead-letter record (or know why not)
	reported int
}

// quarantined is one change whose record the data topic cannot take.
type quarantined struct {
	c          *change.Change
	record     kafka.Message // the record, as it would have been
	reason     string
	deadLetter string // the dead-letter topic that holds it; "" when it could not be written
	truncated  bool
	err        error // why the dead-letter record was not written
}

// screenOversized quarantines each of msgs over maxBytes as one record batch, before the
// first send.
func (q *quarantine) screenOversized(msgs []kafka.Message, maxBytes int) error {
	for i := range msgs {
		if fits(msgs[i], maxBytes) {
			continue
		}
		why := "kafka.maxMessageBytes"
		if q.s.opts.MaxMessageBytes <= 0 {
			why = "its max.message.bytes"
		}
		reason := fmt.Sprintf("record of %d bytes is over the %d bytes topic %s accepts (%s)",
			batchOverhead+recordSize(msgs[i]), maxBytes, msgs[i].Topic, why)
		if err := q.add(&msgs[i], reason); err != nil {
			return err
		}
	}
	return nil
}

// add quarantines the change of m, a record of the batch, and turns m into its stub in
// place. m must be a record of a change (WriterData): a stub refused again is an error.
func (q *quarantine) add(m *kafka.Message, reason string) error {
	c, ok := m.WriterData.(*change.Change)
	if !ok {
		return retry.Terminal(fmt.Errorf("kafka sink %s: topic %s refuses even the quarantine stub of %s (%s): raise the topic's max.message.bytes",
			q.s.name, m.Topic, m.Key, reason))
	}
	q.entries = append(q.entries, quarantined{c: c, record: *m, reason: reason})
	*m = stubRecord(*m, c, reason)
	return nil
}

// stubRecord is the record that takes the place of m, the record of c: the same key,
// headers (and HeaderQuarantined) and time; an envelope whose object is c's identity only,
// with source.quarantined and source.quarantineReason.
func stubRecord(m kafka.Message, c *change.Change, reason string) kafka.Message {
	cc := *c
	cc.Object = stubObject(c)
	stub := appendMessages(make([]kafka.Message, 0, 2), m.Topic, &cc, nil)[0]
	if v := stub.Value; bytes.HasSuffix(v, []byte("}}")) { // the end of source and of the envelope
		v = append(v[:len(v)-2], `,"quarantined":true,"quarantineReason":`...)
		v = envelope.AppendString(v, reason)
		stub.Value = append(v, "}}"...)
	}
	stub.Headers = append(stub.Headers[:len(stub.Headers):len(stub.Headers)], kafka.Header{Key: HeaderQuarantined, Value: []byte("true")})
	return stub
}

// stubObject is c's object reduced to what names it: apiVersion, kind, and metadata's
// name, namespace, uid and resourceVersion.
func stubObject(c *change.Change) []byte {
	apiVersion := c.Resource.Version
	if c.Resource.Group != "" {
		apiVersion = c.Resource.Group + "/" + apiVersion
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"apiVersion":`...)
	b = envelope.AppendString(b, apiVersion)
	b = append(b, `,"kind":`...)
	b = envelope.AppendString(b, c.Resource.Kind)
	b = append(b, `,"metadata":{"name":`...)
	b = envelope.AppendString(b, c.Key.Name)
	if c.Key.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = envelope.AppendString(b, c.Key.Namespace)
	}
	b = append(b, `,"uid":`...)
	b = envelope.AppendString(b, c.UID)
	b = append(b, `,"resourceVersion":"`...)
	b = strconv.AppendUint(b, uint64(c.RV), 10)
	return append(b, `"}}`...)
}

// writeDeadLetters writes the dead-letter records not acknowledged yet. The stream must
// go on: when the dead-letter topic is missing (createTopics off) or refuses the sink for
// good, the changes are only logged, as report says; a retryable failure is returned, and
// the next attempt sends only what is still unacknowledged.
func (q *quarantine) writeDeadLetters(ctx context.Context) error {
	if q.built == len(q.entries) && len(q.pending) == 0 {
		return nil
	}
	topic := DeadLetterTopicName(q.s.opts.DeadLetterTopic, q.s.opts.Topic, q.s.cluster, q.res)
	t, err := q.s.ensureTopic(ctx, topic)
	if err != nil {
		return q.skip(err)
	}
	for ; q.built < len(q.entries); q.built++ {
		q.pending = append(q.pending, deadLetterRecord(topic, q.s.cluster, &q.entries[q.built], t.maxBytes, q.built))
	}
	rest, err := q.s.produce(ctx, topic, t, q.pending, shrinkDeadLetter)
	q.pending = rest
	if err != nil {
		return q.skip(fmt.Errorf("kafka sink %s: dead-letter topic %s: %w", q.s.name, topic, err))
	}
	return nil
}

// skip gives up on the dead-letter records not written yet when err is terminal, and
// returns err otherwise.
func (q *quarantine) skip(err error) error {
	if !retry.IsTerminal(err) {
		return err
	}
	for i := range q.entries[q.built:] {
		q.entries[q.built+i].err = err
	}
	q.built = len(q.entries)
	for _, m := range q.pending {
		e := &q.entries[m.WriterData.(int)]
		e.deadLetter, e.err = "", err
	}
	q.pending = nil
	return nil
}

// deadLetterRecord is e's record for the dead-letter topic: e's key and time, as much of
// the value as fits maxBytes, and headers that say what it is without the value.
func deadLetterRecord(topic, cluster string, e *quarantined, maxBytes, index int) kafka.Message {
	full := e.record.Value
	sum := sha256.Sum256(full)
	m := kafka.Message{Topic: topic, Key: e.record.Key, Time: e.record.Time, WriterData: index}
	for _, h := range e.record.Headers {
		if h.Key == HeaderOp || h.Key == HeaderRV || h.Key == HeaderResource || h.Key == HeaderEpoch {
			m.Headers = append(m.Headers, h)
		}
	}
	m.Headers = append(m.Headers,
		kafka.Header{Key: HeaderCluster, Value: []byte(cluster)},
		kafka.Header{Key: HeaderUID, Value: []byte(e.c.UID)},
		kafka.Header{Key: HeaderTopic, Value: []byte(e.record.Topic)},
		kafka.Header{Key: HeaderReason, Value: []byte(e.reason)},
		kafka.Header{Key: HeaderSize, Value: strconv.AppendInt(nil, int64(len(full)), 10)},
		kafka.Header{Key: HeaderSHA256, Value: []byte(hex.EncodeToString(sum[:]))},
		kafka.Header{Key: HeaderTruncated, Value: []byte("false")},
	)
	room := maxBytes - batchOverhead - recordSize(m)
	m.Value = full
	if len(full) > room {
		m.Value = full[:max(room, 1)]
		m.Headers[len(m.Headers)-1].Value = []byte("true")
		e.truncated = true
	}
	e.deadLetter = topic
	return m
}

// shrinkDeadLetterTo is what a dead-letter record the broker refused as too large keeps
// of its value (the broker's limit is below what it said): a prefix, enough to recognise
// the object.
const shrinkDeadLetterTo = 1 << 10

// shrinkDeadLetter is produce's answer to a dead-letter record refused as too large: its
// value cut to shrinkDeadLetterTo bytes, once.
func shrinkDeadLetter(m *kafka.Message, reason string) error {
	if len(m.Value) <= shrinkDeadLetterTo {
		return retry.Terminal(fmt.Errorf("record %s of %s refused even with %d bytes of its value: %s", m.Key, m.Topic, len(m.Value), reason))
	}
	m.Value = m.Value[:shrinkDeadLetterTo]
	hs := make([]kafka.Header, len(m.Headers))
	copy(hs, m.Headers)
	for i := range hs {
		if hs[i].Key == HeaderTruncated {
			hs[i].Value = []byte("true")
		}
	}
	m.Headers = hs
	return nil
}

// report logs each change quarantined since the last report at warn, naming it, and counts
// them in the metrics hook. It is called after the commit, so a retried write reports once.
func (q *quarantine) report(ctx context.Context) {
	n := len(q.entries) - q.reported
	for _, e := range q.entries[q.reported:] {
		c := e.c
		args := []any{"resource", q.res.ID(), "object", c.Key.String(), "uid", c.UID, "rv", c.RV.String(), "op", string(c.Op),
			"reason", e.reason, "bytes", len(e.record.Value), "topic", e.record.Topic}
		if e.err == nil {
			args = append(args, "deadLetterTopic", e.deadLetter, "truncated", e.truncated)
		} else {
			args = append(args, "deadLetterError", e.err.Error())
		}
		q.s.log.WarnContext(ctx, "quarantined a change the Kafka topic cannot take; a stub stands in for it", args...)
	}
	q.reported = len(q.entries)
	if n > 0 && q.s.metrics != nil {
		q.s.metrics.Quarantined(q.s.name, q.res.ID(), n)
	}
}

// refusedTooLarge is produceChunk's error for records refused as too large: by the broker
// (their partition's batch over its limit) or by the producer before sending anything
// (one record over its MaxMessageBytes, the sink's batchBytes; the reason still says
// "the writer's batch bytes", as it did when kafka-go's Writer refused it).
type refusedTooLarge struct {
	indexes []int // of the refused records among the unacknowledged ones
	reason  string
	single  bool // refused by kafka-go: indexes names the one record at fault
	err     error
}

func (e *refusedTooLarge) Error() string { return e.err.Error() }
func (e *refusedTooLarge) Unwrap() error { return e.err }

// brokerRefused returns the records werr refuses as too large, indexed among the refused
// records in their order (as produceChunk keeps them), or nil when none is.
func brokerRefused(werr kafka.WriteErrors) *refusedTooLarge {
	var r *refusedTooLarge
	j := 0
	for _, e := range werr {
		if e == nil {
			continue
		}
		if errors.Is(e, kafka.MessageSizeTooLarge) || errors.Is(e, kafka.RecordListTooLarge) {
			if r == nil {
				r = &refusedTooLarge{err: e, reason: "the broker refused it as too large"}
				var ke kafka.Error
				if errors.As(e, &ke) {
					r.reason += " (" + ke.Title() + ")"
				}
			}
			r.indexes = append(r.indexes, j)
		}
		j++
	}
	return r
}

// clientRefused is the refusedTooLarge of the producer's kafka.MessageTooLargeError for msgs.
func clientRefused(msgs []kafka.Message, e kafka.MessageTooLargeError, batchBytes int) *refusedTooLarge {
	r := &refusedTooLarge{single: true, err: e, reason: fmt.Sprintf("over the writer's %d batch bytes", batchBytes)}
	for i := range msgs {
		m := &msgs[i]
		if bytes.Equal(m.Key, e.Message.Key) && len(m.Value) == len(e.Message.Value) &&
			(len(m.Value) == 0 || &m.Value[0] == &e.Message.Value[0]) {
			r.indexes = []int{i}
			return r
		}
	}
	r.indexes = []int{0} // not found: kafka-go checks records in order, the first is as good
	return r
}

// alone reports whether each refused record was alone in its request: the broker refuses
// a partition's batch whole, so one refused record per partition was its batch. rest are
// the unacknowledged records the indexes point into.
func (e *refusedTooLarge) alone(rest []kafka.Message, partitions int) bool {
	if e.single || len(e.indexes) == 1 {
		return true
	}
	if partitions <= 0 {
		return false
	}
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	var balancer kafka.Hash
	seen := make(map[int]bool, len(e.indexes))
	for _, i := range e.indexes {
		p := balancer.Balance(rest[i], ids...)
		if seen[p] {
			return false
		}
		seen[p] = true
	}
	return true
}

// QuarantinedRecord is the newest dead-letter record of one key, as its headers describe
// it (the value is not decoded).
type QuarantinedRecord struct {
	Key       change.Key
	UID       string
	RV        change.RV
	Epoch     int    // the change's epoch (HeaderEpoch; 0 without it)
	Op        string // the envelope's op
	Reason    string
	Size      int    // bytes of the record's value
	Topic     string // the dead-letter topic
	Truncated bool
}

// Version is the quarantined change's position: (Epoch, RV).
func (r QuarantinedRecord) Version() change.Version { return change.Version{Epoch: r.Epoch, RV: r.RV} }

// ReadQuarantine reads the last tail offsets of each partition of res's dead-letter topic
// and returns the newest record (by RV) of each key of res and cluster. A missing topic
// holds none. Newest is by (epoch, RV): after a time travel RVs are issued again. Whether a
// later version replaced a record is for the caller to tell, from the key index: an entry
// with the same uid, epoch and RV is still the stub.
func ReadQuarantine(ctx context.Context, cluster string, opts Options, res change.Resource, tail int64) (map[change.Key]QuarantinedRecord, error) {
	opts = opts.withDefaults()
	topic := DeadLetterTopicName(opts.DeadLetterTopic, opts.Topic, cluster, res)
	tr, err := NewTransport(opts)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: tr, Timeout: opts.WriteTimeout}
	out := map[change.Key]QuarantinedRecord{}
	id := res.ID()
	err = kafkascan.Tail(ctx, client, topic, tail, func(m kafka.Message) error {
		r := QuarantinedRecord{Key: change.ParseKey(string(m.Key)), Topic: topic}
		var recCluster, resource string
		for _, h := range m.Headers {
			v := string(h.Value)
			switch h.Key {
			case HeaderCluster:
				recCluster = v
			case HeaderResource:
				resource = v
			case HeaderUID:
				r.UID = v
			case HeaderRV:
				r.RV, _ = change.ParseRV(v)
			case HeaderEpoch:
				r.Epoch, _ = strconv.Atoi(v)
			case HeaderOp:
				r.Op = v
			case HeaderReason:
				r.Reason = v
			case HeaderSize:
				r.Size, _ = strconv.Atoi(v)
			case HeaderTruncated:
				r.Truncated = v == "true"
			}
		}
		if recCluster != cluster || resource != id {
			return nil
		}
		if old, ok := out[r.Key]; !ok || old.Version().Compare(r.Version()) <= 0 {
			out[r.Key] = r
		}
		return nil
	})
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead-letter topic %s: %w", topic, err)
	}
	return out, nil
}

// DeadLetterTopicExists reports whether res's dead-letter topic exists on the brokers,
// with its name, for `kube-cdc check`: a missing one is created on the first quarantined
// change when CreateTopics is set, and otherwise leaves such changes in the log only.
func DeadLetterTopicExists(ctx context.Context, cluster string, opts Options, res change.Resource) (topic string, exists bool, err error) {
	opts = opts.withDefaults()
	topic = DeadLetterTopicName(opts.DeadLetterTopic, opts.Topic, cluster, res)
	tr, err := NewTransport(opts)
	if err != nil {
		return topic, false, err
	}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: tr, Timeout: opts.WriteTimeout}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return topic, false, fmt.Errorf("look up topic %s: %w", topic, err)
	}
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		switch {
		case t.Error == nil && len(t.Partitions) > 0:
			return topic, true, nil
		case t.Error != nil && !errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			return topic, false, fmt.Errorf("topic %s: %w", topic, t.Error)
		}
	}
	return topic, false, nil
}
