package postgres

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// variedObject gives c an object of about size bytes that pglz cannot compress (random
// base64), so the staged row really is that wide: rows between 50 B and 1.8 KB (below
// the 2 KB TOAST threshold, above which a row would shrink to a pointer) leave free
// space on full pages that PostgreSQL hands to a later, smaller row.
func variedObject(c change.Change, size int, rnd *rand.Rand) change.Change {
	raw := make([]byte, size*3/4)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	c.Object = json.RawMessage(fmt.Sprintf(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d"},"data":{"rv":"%d","pad":%q}}`,
		c.Key.Name, c.UID, c.RV, c.RV, base64.StdEncoding.EncodeToString(raw)))
	return c
}

// The 1,000-node cluster: with objects of varied sizes, a sequential scan of the
// stage returned later rows from earlier pages, and changes ids left watch order. Several
// batches go through one sink (one pooled connection, so one stage table), on both write
// paths, each mixing creates, updates and deletes of a few keys with sizes from 50 B to
// 1.8 KB; changes.id must follow batch order exactly, across the batch and per key.
func TestChangesIdsFollowBatchOrderWhateverTheObjectSizes(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{MaxConns: 1})
	rnd := rand.New(rand.NewPCG(12, 1))
	sizes := []int{10, 1800, 50, 1200, 900, 60, 1700, 400, 1500, 80}
	rv := change.RV(100)
	var want []string
	var ends []int // where each batch ends in want
	for round, n := range []int{smallBatch, 500, smallBatch - 4, 700, 40, 300} {
		var changes []change.Change
		for i := range n {
			rv++
			key := fmt.Sprintf("cm-%02d", (i*7+round)%23) // a few keys, each changed many times per batch
			op := change.OpUpdate
			switch i % 9 {
			case 4:
				op = change.OpDelete
			case 5:
				op = change.OpCreate
			}
			size := sizes[(i+round)%len(sizes)] + rnd.IntN(40)
			if i%2 == 0 {
				size = sizes[rnd.IntN(len(sizes))]
			}
			c := variedObject(cm(key, "uid-"+key, rv, op), size, rnd)
			if i%31 == 30 { // an inferred delete: no object at all, the narrowest row
				c.Object, c.Inferred, c.Op = nil, true, change.OpDelete
			}
			changes = append(changes, c)
			want = append(want, fmt.Sprintf("%s@%d:%s", key, rv, c.Op))
		}
		write(t, s, batch(rv, changes...))
		ends = append(ends, len(want))
	}

	rows := changesRowsPlain(t, dsn)
	if len(rows) != len(want) {
		t.Fatalf("%d changes rows, want %d", len(rows), len(want))
	}
	for r, end := range ends {
		start := 0
		if r > 0 {
			start = ends[r-1]
		}
		path := "pipelined"
		if end-start > smallBatch {
			path = "COPY"
		}
		outOfOrder, first := 0, -1
		for i := start; i < end; i++ {
			if rows[i] != want[i] {
				if first < 0 {
					first = i
				}
				outOfOrder++
			}
		}
		if outOfOrder > 0 {
			t.Errorf("batch %d (%d changes, %s path): %d changes rows out of batch order; first: got %v, want %v",
				r, end-start, path, outOfOrder, rows[first:min(first+3, end)], want[first:min(first+3, end)])
		}
	}
	// Per key, the RV never goes backwards in id order (what a history reader relies on).
	regressions := count(t, dsn, `SELECT count(*) FROM (
		SELECT resource_version < lag(resource_version) OVER (PARTITION BY namespace, name ORDER BY id) AS back
		  FROM kube_cdc.changes) x WHERE back`)
	if regressions != 0 {
		t.Errorf("%d per-key RV regressions in id order", regressions)
	}
}

// changesRowsPlain lists name@rv:op of every changes row in id order.
func changesRowsPlain(t *testing.T, dsn string) []string {
	t.Helper()
	rows := changesRows(t, dsn)
	for i, r := range rows {
		rows[i] = strings.TrimSuffix(r, "(inferred)")
	}
	return rows
}
