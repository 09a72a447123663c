package postgres

import (
	"slices"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
)

// changedRow is one row of history() beside what the sink stored in changes.changed and
// what history() computes when nothing is stored (the diff against the previous row).
type changedRow struct {
	rv              int64
	stored          bool
	shown, whenRead []string
}

func changedRows(t *testing.T, dsn, name string) []changedRow {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `
		SELECT h.rv, c.changed IS NOT NULL, coalesce(h.changed, '{}'),
		       coalesce(array_remove(kube_cdc.changed_paths(coalesce(c.previous, '{}'), c.object), '/metadata/resourceVersion'), '{}')
		  FROM kube_cdc.history('configmaps', 'ns', $1) h
		  JOIN (SELECT id, changed, object,
		               CASE WHEN lag(op) OVER w <> 'delete' AND lag(uid) OVER w = uid THEN lag(object) OVER w END AS previous
		          FROM kube_cdc.changes WHERE namespace = 'ns' AND name = $1
		        WINDOW w AS (ORDER BY id)) c ON c.id = h.id
		 ORDER BY h.id`, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []changedRow
	for rows.Next() {
		var r changedRow
		if err := rows.Scan(&r.rv, &r.stored, &r.shown, &r.whenRead); err != nil {
			t.Fatal(err)
		}
		slices.Sort(r.shown)
		slices.Sort(r.whenRead)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The sink stores a watch update's changed paths where it holds the version before it,
// and they are what history() would compute when read: after a version left out as
// noise (the objects row is not that version), after several versions of the key in one
// batch (some noise), after a snapshot, a delete and a recreate. Checked in both write
// modes; breaking either rule (objects.in_changes taken as always true, or the batch's
// previous version taken with the noise in it) stores a diff against a version history
// does not show, and the test fails.
func TestAWatchUpdatesChangedPathsAreStoredWhenWrittenAndEqualTheDiffAgainstThePreviousRow(t *testing.T) {
	t.Parallel()
	for _, size := range writeModes {
		t.Run(size.name, func(t *testing.T) { changedPathsStory(t, size, Options{}) })
	}
}

// With changedPaths: read nothing is stored, in either write mode, and history() shows
// the same paths, computed when read.
func TestWithChangedPathsReadNothingIsStoredAndHistoryShowsTheSamePaths(t *testing.T) {
	t.Parallel()
	for _, size := range writeModes {
		t.Run(size.name, func(t *testing.T) { changedPathsStory(t, size, Options{ChangedPaths: ChangedPathsRead}) })
	}
}

// changedPathsStory writes the versions of one ConfigMap that the tests above read back,
// with a sink of opts, and checks history()'s paths and which rows stored theirs.
func changedPathsStory(t *testing.T, size writeMode, opts Options) {
	opts.DSN, opts.Migrate = migrated.NewDatabase(t), true
	s, dsn := newSink(t, opts)
	s.SetIgnorePaths(configmaps, ignorepaths.For("", "configmaps", []string{"/data/items/*/beat"}, true))
	pad := size.pad
	write(t, s, batch(10, append(pad(10), beat("n", 10, change.OpCreate, "t0", "a"))...))
	write(t, s, batch(11, append(pad(11), beat("n", 11, change.OpUpdate, "t0", "b"))...)) // a label: against the objects row
	write(t, s, batch(12, append(pad(12), beat("n", 12, change.OpUpdate, "t1", "b"))...)) // noise: no row
	write(t, s, batch(13, append(pad(13), beat("n", 13, change.OpUpdate, "t1", "c"))...)) // the objects row (12) has no changes row
	write(t, s, batch(16, append(pad(16),
		beat("n", 14, change.OpUpdate, "t2", "d"), // against the objects row (13)
		beat("n", 15, change.OpUpdate, "t3", "d"), // noise
		beat("n", 16, change.OpUpdate, "t3", "e"), // against 14, not 15
	)...))
	snap := beat("n", 17, change.OpUpdate, "t4", "e")
	snap.Snapshot, snap.ListRV = true, 17
	write(t, s, batch(17, snap))
	write(t, s, batch(18, beat("n", 18, change.OpUpdate, "t4", "f"))) // against the snapshot
	write(t, s, batch(19, beat("n", 19, change.OpDelete, "t4", "f")))
	re := beat("n", 20, change.OpCreate, "t5", "f")
	re.UID = "uid-n2"
	write(t, s, batch(21, re, func() change.Change { c := beat("n", 21, change.OpUpdate, "t6", "g"); c.UID = "uid-n2"; return c }()))

	got := changedRows(t, dsn, "n")
	var rvs, stored []int64
	for _, r := range got {
		rvs = append(rvs, r.rv)
		if r.stored {
			stored = append(stored, r.rv)
		}
		if !slices.Equal(r.shown, r.whenRead) {
			t.Errorf("RV %d: history() shows %v changed, the diff against the previous row is %v", r.rv, r.shown, r.whenRead)
		}
	}
	if want := []int64{10, 11, 13, 14, 16, 17, 18, 19, 20, 21}; !slices.Equal(rvs, want) {
		t.Fatalf("history rows at RVs %v, want %v", rvs, want)
	}
	// 13 follows a version left out as noise: the sink does not hold the row before.
	want := []int64{11, 14, 16, 18, 21}
	if opts.ChangedPaths == ChangedPathsRead {
		want = nil
	}
	if !slices.Equal(stored, want) {
		t.Errorf("changed stored at RVs %v, want %v", stored, want)
	}
}
