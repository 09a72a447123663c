package envelope

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Op codes of the envelope, as Debezium spells them.
const (
	OpCreate = "c"
	OpUpdate = "u"
	OpDelete = "d"
	OpRead   = "r" // a create or update written by a LIST (Change.Snapshot)
)

// OpCode returns the envelope's op for c: "d" for every delete (observed or inferred), "r"
// for snapshot rows (written by a LIST rather than a watch event), else "c" or "u".
func OpCode(c *change.Change) string {
	switch {
	case c.Op == change.OpDelete:
		return OpDelete
	case c.Snapshot:
		return OpRead
	case c.Op == change.OpCreate:
		return OpCreate
	default:
		return OpUpdate
	}
}

// Append appends c's envelope to dst and returns the extended slice. No trailing newline.
//
// A delete carries the last state in "before" and null "after"; anything else carries the
// object in "after" and null "before" (the previous state is not kept: no object cache, docs/architecture.md). An
// inferred delete has no last state: both are null. ts_ms is c.EventTime() in Unix
// milliseconds (0 when unset). source.reason says why an inferred delete happened
// (change.ReasonGone, change.ReasonOutOfScope); "" for observed changes.
// source.resourceVersion is a string, as in metadata, so
// consumers in languages with 53-bit numbers compare it exactly. source.epoch counts the
// time travels the sink has seen of the resource (change.Change.Epoch): versions of a key
// order by (epoch, resourceVersion).
//
// c.Object is copied verbatim and must be valid JSON; a nil or empty Object is written as null.
func Append(dst []byte, c *change.Change) []byte { return AppendWith(dst, c, nil) }

// Actors finds the actors of a batch's changes as the envelope is written, joined
// exactly (the event's response carried the change's resourceVersion, or a delete's
// uid): one entry per change of b, nil where none is known. It may wait a bounded time for actors still to
// come; an error leaves every actor unknown.
type Actors interface {
	Actors(ctx context.Context, b change.Batch) ([]*change.Actor, error)
}

// AppendWith is Append with the change's actor in source (user, impersonator, userAgent,
// auditID) when a is not nil.
func AppendWith(dst []byte, c *change.Change, a *change.Actor) []byte {
	dst = append(dst, `{"op":"`...)
	dst = append(dst, OpCode(c)...)
	dst = append(dst, `","ts_ms":`...)
	var ts int64
	if t := c.EventTime(); !t.IsZero() {
		ts = t.UnixMilli()
	}
	dst = strconv.AppendInt(dst, ts, 10)
	if c.Op == change.OpDelete {
		dst = append(dst, `,"before":`...)
		dst = appendRaw(dst, c.Object)
		dst = append(dst, `,"after":null`...)
	} else {
		dst = append(dst, `,"before":null,"after":`...)
		dst = appendRaw(dst, c.Object)
	}
	dst = append(dst, `,"source":{"cluster":`...)
	dst = AppendString(dst, c.Cluster)
	dst = append(dst, `,"group":`...)
	dst = AppendString(dst, c.Resource.Group)
	dst = append(dst, `,"version":`...)
	dst = AppendString(dst, c.Resource.Version)
	dst = append(dst, `,"resource":`...)
	dst = AppendString(dst, c.Resource.Resource)
	dst = append(dst, `,"kind":`...)
	dst = AppendString(dst, c.Resource.Kind)
	dst = append(dst, `,"namespace":`...)
	dst = AppendString(dst, c.Key.Namespace)
	dst = append(dst, `,"name":`...)
	dst = AppendString(dst, c.Key.Name)
	dst = append(dst, `,"uid":`...)
	dst = AppendString(dst, c.UID)
	dst = append(dst, `,"resourceVersion":"`...)
	dst = strconv.AppendUint(dst, uint64(c.RV), 10)
	dst = append(dst, `","epoch":`...)
	dst = strconv.AppendInt(dst, int64(c.Epoch), 10)
	dst = append(dst, `,"snapshot":`...)
	dst = strconv.AppendBool(dst, c.Snapshot)
	dst = append(dst, `,"inferred":`...)
	dst = strconv.AppendBool(dst, c.Inferred)
	dst = append(dst, `,"reason":`...)
	dst = AppendString(dst, c.Reason)
	dst = append(dst, `,"changedBy":`...)
	dst = AppendString(dst, c.ChangedBy)
	if a != nil {
		dst = append(dst, `,"user":`...)
		dst = AppendString(dst, a.Username)
		if a.Impersonator != "" {
			dst = append(dst, `,"impersonator":`...)
			dst = AppendString(dst, a.Impersonator)
		}
		dst = append(dst, `,"userAgent":`...)
		dst = AppendString(dst, a.UserAgent)
		dst = append(dst, `,"auditID":`...)
		dst = AppendString(dst, a.AuditID)
	}
	dst = append(dst, "}}"...)
	return dst
}

func appendRaw(dst, raw []byte) []byte {
	if len(raw) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string literal. Like encoding/json it escapes control
// characters, <, > and & (so a line is safe to embed in HTML logs), U+2028 and U+2029,
// and replaces invalid UTF-8 with U+FFFD, so the result is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
