package postgres

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

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

// writeMode is a way a batch is written: padded with other keys' creates in the same
// batch, 0 for a small batch (one statement), 100 for a COPY into the stage.
type writeMode struct {
	name    string
	padding int
}

var writeModes = []writeMode{{"small batch", 0}, {"copied batch", 100}}

// pad is the mode's creates of other keys, for a batch at rv.
func (m writeMode) pad(rv change.RV) []change.Change {
	var out []change.Change
	for i := range m.padding {
		out = append(out, cm(fmt.Sprintf("pad-%d-%d", rv, i), fmt.Sprintf("pad-%d-%d", rv, i), rv, change.OpCreate))
	}
	return out
}

func TestAnUpdateOfIgnoredPathsAloneUpdatesObjectsButAddsNoChangesRowInEveryWriteMode(t *testing.T) {
	t.Parallel()
	for _, size := range writeModes {
		t.Run(size.name, func(t *testing.T) {
			s, dsn := newSink(t, Options{})
			hook := &skipCounter{n: map[string]int{}}
			s.SetMetrics(hook)
			s.SetIgnorePaths(configmaps, ignorepaths.For("", "configmaps", []string{"/data/items/*/beat"}, true))
			pad := size.pad
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
			st, err := readerOf(t, s).Status(testCtx(t))
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
	t.Parallel()
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

// EqualSQL (what the noise statement runs) and the comparison of StripSQLs say "only
// ignored paths changed" exactly when changed_paths() does, every path it lists matching
// the ignore paths' Regexp: checked on random pairs of documents, one a mutation of the
// other.
func TestStrippedDocumentsAreEqualExactlyWhenEveryChangedPathIsIgnored(t *testing.T) {
	t.Parallel()
	_, dsn := newSink(t, Options{})
	conn := connect(t, dsn)
	for _, paths := range [][]string{
		// Wildcards beside literal keys, at the root too.
		{"/status/conditions/*/beat", "/metadata/resourceVersion", "/spec/*", "/spec/keep/x", "/list/1", "/list/2/y",
			"/metadata/annotations/a~1b", "/*/deep/*/z"},
		// Wildcards alone at their level, array indexes, a whole subtree.
		{"/status/conditions/*/beat", "/metadata/resourceVersion", "/list/1", "/list/2/y", "/metadata/annotations/a~1b",
			"/z/deep/*/z", "/spec/keep/*", "/other/0/annotations"},
	} {
		t.Run(strings.Join(paths, ","), func(t *testing.T) { stripAgreesWithChangedPaths(t, conn, paths) })
	}
}

func stripAgreesWithChangedPaths(t *testing.T, conn *pgx.Conn, paths []string) {
	strip := func(col string) string { return ignorepaths.StripSQL(paths, col) }
	re := ignorepaths.Regexp(paths)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"status", "conditions", "beat", "type", "metadata", "resourceVersion", "spec", "keep", "x", "list", "y", "z",
		"deep", "annotations", "a/b", "other", "1", "2"}
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := rng.IntN(10); {
		case depth > 3 || n < 3:
			return []any{nil, true, 1.0, "s", "t"}[rng.IntN(5)]
		case n < 5:
			var a []any
			for range rng.IntN(4) {
				a = append(a, gen(depth+1))
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[keys[rng.IntN(len(keys))]] = gen(depth + 1)
			}
			return m
		}
	}
	var mutate func(v any, depth int) any
	mutate = func(v any, depth int) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				out[k] = e
			}
			if len(x) > 0 && rng.IntN(3) > 0 {
				ks := slices.Sorted(maps.Keys(x))
				k := ks[rng.IntN(len(ks))]
				out[k] = mutate(x[k], depth+1)
			} else {
				out[keys[rng.IntN(len(keys))]] = gen(depth + 1)
			}
			return out
		case []any:
			out := slices.Clone(x)
			if len(x) > 0 && rng.IntN(4) > 0 {
				i := rng.IntN(len(x))
				out[i] = mutate(x[i], depth+1)
			} else {
				out = append(out, gen(depth+1))
			}
			return out
		}
		return gen(depth)
	}
	// Every pair is judged in one query (a round trip per pair cost most of the test).
	const pairs = 3000
	as, bs := make([]string, pairs), make([]string, pairs)
	for i := range pairs {
		// Documents shaped like the paths often enough to hit them.
		a := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "a", "beat": "1"}, gen(2)}},
			"metadata": map[string]any{"resourceVersion": "1", "annotations": map[string]any{"a/b": "1", "c": "2"}},
			"spec":     map[string]any{"keep": map[string]any{"x": 1.0, "y": 2.0}}, "list": []any{"0", "1", map[string]any{"y": 1.0, "z": 2.0}},
			"other": gen(0), "z": map[string]any{"deep": []any{map[string]any{"z": 1.0, "w": 2.0}}}}
		b := any(a)
		for range 1 + rng.IntN(3) {
			b = mutate(b, 0)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		as[i], bs[i] = string(ja), string(jb)
	}
	rows, err := conn.Query(testCtx(t), fmt.Sprintf(`SELECT d.i, %s = %s, %s, NOT EXISTS (SELECT 1 FROM unnest(kube_cdc.changed_paths(d.a, d.b)) p WHERE p !~ $3)
		FROM unnest($1::jsonb[], $2::jsonb[]) WITH ORDINALITY AS d(a, b, i) ORDER BY d.i`,
		strip("d.a"), strip("d.b"), ignorepaths.EqualSQL(paths, "d.a", "d.b")), as, bs, re)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	agree, noise := 0, 0
	for rows.Next() {
		var i int
		var byStrip, byEqual, byPaths bool
		if err := rows.Scan(&i, &byStrip, &byEqual, &byPaths); err != nil {
			t.Fatal(err)
		}
		if byStrip != byPaths || byEqual != byPaths {
			t.Fatalf("pair %d: stripped equal %v, EqualSQL %v, changed_paths all ignored %v\n%s\n%s", i-1, byStrip, byEqual, byPaths, as[i-1], bs[i-1])
		}
		agree++
		if byPaths {
			noise++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if agree != pairs {
		t.Fatalf("%d pairs judged of %d", agree, pairs)
	}
	t.Logf("%d pairs agree, %d of them noise", agree, noise)
	if noise < 100 || noise > agree-100 {
		t.Errorf("%d noise pairs of %d: the generator misses one side", noise, agree)
	}
}

// In a batch of several keys' versions interleaved, each version is compared with its own
// key's previous one; the batch written again records nothing twice and leaves out
// nothing it recorded.
func TestInterleavedKeysAreComparedEachWithItsOwnPreviousVersionAndAReplayRecordsNoFewer(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	s.SetIgnorePaths(configmaps, ignorepaths.For("", "configmaps", []string{"/data/items/*/beat"}, true))
	write(t, s, batch(11, beat("a", 10, change.OpCreate, "t0", "x"), beat("b", 11, change.OpCreate, "t0", "x")))
	b := batch(16,
		beat("a", 12, change.OpUpdate, "t1", "x"), // noise against a's objects row
		beat("b", 13, change.OpUpdate, "t0", "y"), // a label: a row
		beat("a", 14, change.OpUpdate, "t1", "z"), // a label: a row
		beat("b", 15, change.OpUpdate, "t2", "y"), // noise against b@13, not a@14
		beat("a", 16, change.OpUpdate, "t3", "z"), // noise against a@14
	)
	write(t, s, b)
	wantA, wantB := []int64{10, 14}, []int64{11, 13}
	if got := changedRVs(t, dsn, "a"); !slices.Equal(got, wantA) {
		t.Errorf("a: changes rows at RVs %v, want %v", got, wantA)
	}
	if got := changedRVs(t, dsn, "b"); !slices.Equal(got, wantB) {
		t.Errorf("b: changes rows at RVs %v, want %v", got, wantB)
	}
	write(t, s, b) // written again, as after an unknown outcome
	for name, want := range map[string][]int64{"a": wantA, "b": wantB} {
		got := changedRVs(t, dsn, name)
		for _, rv := range want {
			if !slices.Contains(got, rv) {
				t.Errorf("%s: the replay lost the row at RV %d: %v", name, rv, got)
			}
		}
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("%s: a row twice after the replay: %v", name, got)
		}
	}
}
