package postgres

import (
	"slices"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// changes has no UNIQUE key since migration 012, and the insert's replay guard reads
// changes as it was before the statement: two copies of one (key, epoch, RV, op) in one
// batch must still make one row, in each write path.
func TestTwoCopiesOfOneChangeInOneBatchWriteOneChangesRowInEveryWritePath(t *testing.T) {
	t.Parallel()
	snapshot := func(c change.Change) change.Change {
		c.Snapshot, c.ListRV = true, 20
		return c
	}
	for _, tc := range []struct {
		name string
		opts Options
		dup  []change.Change
	}{
		// Two small watch batches' worth: the inline statement.
		{"inline", Options{}, []change.Change{cm("a", "u1", 12, change.OpUpdate), cm("a", "u1", 12, change.OpUpdate)}},
		// A watch event and a relist's snapshot of the same version: the staged path.
		{"staged", Options{}, []change.Change{cm("a", "u1", 12, change.OpUpdate), snapshot(cm("a", "u1", 12, change.OpUpdate))}},
		// Hard deletes never inline; a delete twice.
		{"hard delete", Options{DSN: migrated.NewDatabase(t), Migrate: true, HardDelete: true},
			[]change.Change{cm("a", "u1", 12, change.OpDelete), cm("a", "u1", 12, change.OpDelete)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dsn := newSink(t, tc.opts)
			write(t, s, batch(10, cm("a", "u1", 10, change.OpCreate)))
			write(t, s, batch(12, tc.dup...))
			if got, want := changedRVs(t, dsn, "a"), []int64{10, 12}; !slices.Equal(got, want) {
				t.Errorf("changes rows at RVs %v, want %v", got, want)
			}
		})
	}
}
