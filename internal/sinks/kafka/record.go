package kafka

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Header names (contract).
const (
	HeaderOp       = "kube-cdc.op"
	HeaderRV       = "kube-cdc.rv"
	HeaderResource = "kube-cdc.resource"
)

// DefaultTopic is the default topic template.
const DefaultTopic = "kube.{cluster}.{group}.{resource}"

// TopicName expands a topic template for one resource of one cluster.
func TopicName(template, cluster string, res change.Resource) string {
	if template == "" {
		template = DefaultTopic
	}
	group := res.Group
	if group == "" {
		group = "core"
	}
	return strings.NewReplacer(
		"{cluster}", cluster,
		"{group}", group,
		"{version}", res.Version,
		"{resource}", res.Resource,
	).Replace(template)
}

// envelopeOp is the Debezium op letter: r for snapshot reads, c, u, d.
func envelopeOp(c *change.Change) string {
	switch {
	case c.Op == change.OpDelete:
		return "d"
	case c.Snapshot:
		return "r"
	case c.Op == change.OpCreate:
		return "c"
	}
	return "u"
}

// recordTime is the record timestamp and ts_ms: when kube-cdc observed the change, so a
// re-emit of the same change is byte-identical. A zero ObservedAt becomes the epoch (kafka-go
// would stamp a zero time with time.Now()).
func recordTime(c *change.Change) time.Time {
	if c.ObservedAt.IsZero() {
		return time.UnixMilli(0)
	}
	return c.ObservedAt
}

// appendMessages appends the records of one change: the envelope, and for a delete a
// second record with the same key and a null value so compaction can drop the key.
func appendMessages(dst []kafka.Message, cluster, topic string, c *change.Change) []kafka.Message {
	key := []byte(c.Key.String())
	op := envelopeOp(c)
	headers := []kafka.Header{
		{Key: HeaderOp, Value: []byte(op)},
		{Key: HeaderRV, Value: []byte(c.RV.String())},
		{Key: HeaderResource, Value: []byte(c.Resource.ID())},
	}
	t := recordTime(c)
	dst = append(dst, kafka.Message{Topic: topic, Key: key, Value: appendEnvelope(nil, cluster, op, c), Headers: headers, Time: t})
	if c.Op == change.OpDelete {
		dst = append(dst, kafka.Message{Topic: topic, Key: key, Value: nil, Headers: headers, Time: t})
	}
	return dst
}

// appendEnvelope appends the Debezium-style envelope of c. c.Object is already JSON and is
// copied as is, never decoded.
func appendEnvelope(b []byte, cluster, op string, c *change.Change) []byte {
	obj := []byte(c.Object)
	if len(obj) == 0 {
		obj = []byte("null")
	}
	b = append(b, `{"op":"`...)
	b = append(b, op...)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, recordTime(c).UnixMilli(), 10)
	if c.Op == change.OpDelete {
		b = append(b, `,"before":`...)
		b = append(b, obj...)
		b = append(b, `,"after":null`...)
	} else {
		// No object cache, so no before image of updates.
		b = append(b, `,"before":null,"after":`...)
		b = append(b, obj...)
	}
	r := &c.Resource
	b = append(b, `,"source":{"cluster":`...)
	b = appendString(b, cluster)
	b = append(b, `,"group":`...)
	b = appendString(b, r.Group)
	b = append(b, `,"version":`...)
	b = appendString(b, r.Version)
	b = append(b, `,"resource":`...)
	b = appendString(b, r.Resource)
	b = append(b, `,"kind":`...)
	b = appendString(b, r.Kind)
	b = append(b, `,"namespace":`...)
	b = appendString(b, c.Key.Namespace)
	b = append(b, `,"name":`...)
	b = appendString(b, c.Key.Name)
	b = append(b, `,"uid":`...)
	b = appendString(b, c.UID)
	b = append(b, `,"resourceVersion":`...)
	b = appendString(b, c.RV.String())
	b = append(b, `,"snapshot":`...)
	b = strconv.AppendBool(b, c.Snapshot)
	b = append(b, `,"inferred":`...)
	b = strconv.AppendBool(b, c.Inferred)
	b = append(b, `,"changedBy":`...)
	b = appendString(b, c.ChangedBy)
	return append(b, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping what JSON requires and replacing
// invalid UTF-8 with U+FFFD, as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
