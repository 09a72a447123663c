package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
)

// beat is a ConfigMap change whose object has a heartbeat-like field in each of two
// conditions-like list items (the ignored path is "/data/items/*/beat") and a label.
func beat(name string, rv change.RV, op change.Op, beatAt, label string) change.Change {
	c := cm(name, "uid-"+name, rv, op)
	c.Object = json.RawMessage(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s",`+
		`"resourceVersion":"%d","labels":{"l":%q}},"data":{"items":[{"type":"a","beat":%q},{"type":"b","beat":%q}]}}`,
		name, name, rv, label, beatAt, beatAt))
	return c
}

// skipCounter is the metrics hook's noise count.
type skipCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *skipCounter) Quarantined(sink, resource string, n int) {}
func (c *skipCounter) HistorySkipped(sink, resource string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[sink+"/"+resource] += n
}

func changedRVs(t *testing.T, dsn, name string) []int64 {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT resource_version FROM kube_cdc.changes
		WHERE namespace = 'ns' AND name = $1 ORDER BY id`, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for rows.Next() {
		var rv int64
		if err := rows.Scan(&rv); err != nil {
			t.Fatal(err)
		}
		out = append(out, rv)
	}
	return out
}

func TestAnUpdateOfIgnoredPathsAloneUpdatesObjectsButAddsNoChangesRowInEveryWriteMode(t *testing.T) {
	for _, size := range []struct {
		name    string
		padding int // other keys' creates in the same batch: 0 is a small batch, 100 a COPY
	}{{"small batch", 0}, {"copied batch", 100}} {
		t.Run(size.name, func(t *testing.T) {
			s, dsn := newSink(t, Options{})
			hook := &skipCounter{n: map[string]int{}}
			s.SetMetrics(hook)
			s.SetIgnorePaths(configmaps, ignorepaths.For("", "configmaps", []string{"/data/items/*/beat"}, true))
			pad := func(rv change.RV) []change.Change {
				var out []change.Change
				for i := range size.padding {
					out = append(out, cm(fmt.Sprintf("pad-%d-%d", rv, i), fmt.Sprintf("pad-%d-%d", rv, i), rv, change.OpCreate))
				}
				return out
			}
			write(t, s, batch(10, append(pad(10), beat("n", 10, change.OpCreate, "t0", "x"))...))
			// Against the objects row: a heartbeat alone is noise.
			write(t, s, batch(11, append(pad(11), beat("n", 11, change.OpUpdate, "t1", "x"))...))
			// Several versions of the key in one batch: each against the one before it.
			write(t, s, batch(15, append(pad(15),
				beat("n", 12, change.OpUpdate, "t2", "x"), // noise (objects row: 11)
				beat("n", 13, change.OpUpdate, "t3", "y"), // a label: a row
				beat("n", 14, change.OpUpdate, "t4", "y"), // noise (the batch's 13)
				beat("n", 15, change.OpUpdate, "t4", "y"), // nothing but the RV: noise
			)...))
			// A snapshot and a delete are always rows, heartbeats or not.
			snap := beat("n", 16, change.OpUpdate, "t5", "y")
			snap.Snapshot, snap.ListRV = true, 16
			write(t, s, batch(16, snap))
			write(t, s, batch(17, beat("n", 17, change.OpDelete, "t6", "y")))
			// A new uid under the key (recreated) is a create: a row.
			re := beat("n", 18, change.OpCreate, "t6", "y")
			re.UID = "uid-n2"
			write(t, s, batch(18, re))

			if got, want := changedRVs(t, dsn, "n"), []int64{10, 13, 16, 17, 18}; !slices.Equal(got, want) {
				t.Errorf("changes rows at RVs %v, want %v", got, want)
			}
			if r, _ := readObject(t, dsn, "n"); r.RV != 18 {
				t.Errorf("objects row at RV %d, want 18: objects takes every version", r.RV)
			}
			if got := hook.n["warehouse/configmaps"]; got != 4 {
				t.Errorf("metrics hook counted %d skipped, want 4", got)
			}
			st, err := s.Status(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 1 || st[0].HistorySkipped != 4 {
				t.Errorf("status %+v, want 4 skipped", st)
			}
		})
	}
}

func TestWithoutIgnorePathsEveryVersionIsAChangesRow(t *testing.T) {
	s, dsn := newSink(t, Options{})
	// Paths for another scope of the resource do not apply.
	other := configmaps
	other.Scope = "0123456789ab"
	s.SetIgnorePaths(other, []string{"/data/items/*/beat"})
	write(t, s, batch(10, beat("n", 10, change.OpCreate, "t0", "x")))
	write(t, s, batch(11, beat("n", 11, change.OpUpdate, "t1", "x")))
	write(t, s, batch(13, beat("n", 12, change.OpUpdate, "t2", "x"), beat("n", 13, change.OpUpdate, "t3", "x")))
	if got, want := changedRVs(t, dsn, "n"), []int64{10, 11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("changes rows at RVs %v, want %v", got, want)
	}
}
