package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/pgtext"
)

// Metrics is the sink's optional metrics hook, for what only the sink sees;
// *metrics.Metrics implements it. See SetMetrics. An alias of an unnamed interface, as
// the Kafka sink's is, so that the wiring sets both through one interface.
type Metrics = interface {
	// Quarantined counts n changes of resource that sink put in quarantine.
	Quarantined(sink, resource string, n int)
}

// SetMetrics installs the metrics hook (nil: none). Call it before the first Write.
func (s *Sink) SetMetrics(m Metrics) { s.metrics = m }

// quarantined is a change of a batch that goes to the quarantine table instead of
// objects and changes.
type quarantined struct {
	c        change.Change // as received: c.Object holds the raw bytes
	reason   string
	sqlstate string
	// stripped: a delete whose last state PostgreSQL rejects was staged without it, so
	// objects still records the delete; the quarantine row keeps the state, resolved.
	stripped bool
	// inserted: the row is new in this Write (false on a replay), so it is logged and counted.
	inserted bool
}

// screen splits a batch into the changes to stage and those PostgreSQL would reject
// (jsonbRejects). A rejected delete is staged without its object and quarantined as
// stripped. The batch's slice is returned as it is when nothing is rejected.
func screen(changes []change.Change, precheck bool) (staged []change.Change, bad []quarantined) {
	if !precheck {
		return changes, nil
	}
	copied := false
	for i := range changes {
		c := &changes[i]
		reason, state := jsonbRejects(c.Object)
		if reason == "" {
			if reason, state = jsonbRejects(c.Labels); reason != "" {
				reason = "labels: " + reason
			}
		}
		if reason == "" {
			if copied {
				staged = append(staged, *c)
			}
			continue
		}
		if !copied {
			staged, copied = append(make([]change.Change, 0, len(changes)), changes[:i]...), true
		}
		q := quarantined{c: *c, reason: reason, sqlstate: state}
		if c.Op == change.OpDelete {
			q.stripped = true
			staged = append(staged, stripObject(*c))
		}
		bad = append(bad, q)
	}
	if !copied {
		return changes, nil
	}
	return staged, bad
}

// stripObject is a delete without its last state: the upsert then keeps the objects
// row's last stored object and labels, as for an inferred delete.
func stripObject(c change.Change) change.Change {
	c.Object, c.Labels = nil, nil
	return c
}

var backslashU = []byte(`\u`)

// jsonbRejects says why PostgreSQL's jsonb input would reject the JSON text js, which
// the apiserver and encoding/json accept: the escape \u0000 (a jsonb string is text,
// which cannot hold NUL: SQLSTATE 22P05), or a UTF-16 surrogate escape that is not half
// of a high-low pair (22P02). It returns "" when neither occurs. Checked against the
// server in TestJsonbRejectsWhatPostgreSQLRejects; anything else the server refuses is
// found by bisecting the batch (writeBisecting).
func jsonbRejects(js []byte) (reason, sqlstate string) {
	if !bytes.Contains(js, backslashU) {
		return "", "" // the usual case: one fast scan
	}
	for i := 0; i < len(js); {
		j := bytes.IndexByte(js[i:], '\\')
		if j < 0 || i+j+1 >= len(js) {
			break
		}
		i += j
		if js[i+1] != 'u' {
			i += 2 // \" \\ \n …: the escaped byte cannot start another escape
			continue
		}
		r, ok := hex4(js, i+2)
		switch {
		case !ok:
			i += 2 // not JSON: the server's error will say what is wrong
		case r == 0:
			return fmt.Sprintf(`jsonb cannot store the escape \u0000 (byte %d of the JSON)`, i), "22P05"
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := rune(0), false
			if i+7 < len(js) && js[i+6] == '\\' && js[i+7] == 'u' {
				lo, ok = hex4(js, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf(`jsonb cannot store the lone surrogate escape \u%04x (byte %d of the JSON)`, r, i), "22P02"
			}
			i += 12
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Sprintf(`jsonb cannot store the lone surrogate escape \u%04x (byte %d of the JSON)`, r, i), "22P02"
		default:
			i += 6
		}
	}
	return "", ""
}

// hex4 reads the four hex digits at js[i:].
func hex4(js []byte, i int) (rune, bool) {
	if i+4 > len(js) {
		return 0, false
	}
	var r rune
	for _, b := range js[i : i+4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			b = b - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}

// dataException returns err's PostgreSQL error when it is a data exception (SQLSTATE
// class 22: a value the server cannot take, such as JSON jsonb rejects or text with a
// NUL byte). Retrying never fixes one; bisecting the batch finds the change at fault.
func dataException(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return pgErr
	}
	return nil
}

// pgReason is the server's message for a quarantine row: message and detail.
func pgReason(e *pgconn.PgError) string {
	if e.Detail == "" {
		return e.Message
	}
	return e.Message + ": " + e.Detail
}

// quarantineArgs are the arguments of statements.quarantine for q. Text columns are
// made valid for PostgreSQL (no NUL, valid UTF-8), so that a value the server rejected
// in a key column still lands here, marked; Kubernetes' validation keeps such values
// out of keys in practice.
func quarantineArgs(cluster string, res change.Resource, q *quarantined) []any {
	c := &q.c
	var resolvedRV any
	if q.stripped {
		resolvedRV = c.RV
	}
	var raw []byte
	if c.Object != nil {
		raw = []byte(c.Object)
	}
	reason := q.reason
	if q.stripped {
		reason += "; the delete was stored without its last state"
	}
	return []any{
		pgtext.Valid(cluster), pgtext.Valid(res.Group), pgtext.Valid(res.Version), pgtext.Valid(res.Resource), pgtext.Valid(res.Kind),
		pgtext.Valid(c.Key.Namespace), pgtext.Valid(c.Key.Name), pgtext.Valid(c.UID), c.RV, pgtext.Valid(string(c.Op)),
		c.Inferred, c.Snapshot, pgtext.Valid(c.ChangedBy), observedAt(c), pgtext.Valid(reason), pgtext.Valid(q.sqlstate),
		raw, resolvedRV, c.Epoch,
	}
}

// reportQuarantined logs each change this Write newly quarantined at warn, naming it,
// and counts them in the metrics hook; replays of rows already there stay quiet.
func (s *Sink) reportQuarantined(ctx context.Context, res change.Resource, bad []quarantined) {
	n := 0
	for i := range bad {
		q := &bad[i]
		if !q.inserted {
			continue
		}
		n++
		stored := "quarantine only"
		if q.stripped {
			stored = "delete without its last state, and quarantine"
		}
		s.log.WarnContext(ctx, "quarantined a change PostgreSQL cannot store", "sink", s.name, "resource", res.ID(),
			"object", q.c.Key.String(), "uid", q.c.UID, "rv", q.c.RV.String(), "op", string(q.c.Op),
			"reason", q.reason, "sqlstate", q.sqlstate, "stored", stored)
	}
	if n > 0 && s.metrics != nil {
		s.metrics.Quarantined(s.name, res.ID(), n)
	}
}
