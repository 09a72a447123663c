package postgres

import (
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Several clusters may share one database, each kube-cdc with its own retention: one
// cluster's retention must not delete another cluster's history.
func TestRetentionDeletesOnlyItsOwnClustersHistory(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, dsn := newSink(t, Options{})
	other, err := New(ctx, "warehouse", "other", Options{DSN: dsn, Migrate: true}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	old := cm("old", "uid-old", 10, change.OpCreate)
	old.Cluster, old.ObservedAt = "other", time.Now().Add(-48*time.Hour)
	write(t, other, batch(10, old))

	mine, _ := newSink(t, Options{DSN: dsn, Migrate: true})
	mineOld := cm("mine", "uid-mine", 11, change.OpCreate)
	mineOld.ObservedAt = time.Now().Add(-48 * time.Hour)
	write(t, mine, batch(11, mineOld))
	n, err := mine.DeleteExpiredChanges(ctx, time.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("retention of cluster %q deleted %d rows, want its own 1", cluster, n)
	}
	if got := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE cluster = 'other'`); got != 1 {
		t.Errorf("cluster other keeps %d changes rows after cluster %q's retention, want 1", got, cluster)
	}
}

// An inferred delete carries the RV of the LIST that revealed it, above the object's own
// RV. When it was wrong (the object was alive, in some scope), the RV guard used to keep
// the row tombstoned forever: every later LIST shows the object at its own, lower, RV.
// A snapshot revives a row an inferred delete tombstoned at or below its LIST's RV; a
// tombstone above it (made after that LIST) and an observed delete stand.
func TestASnapshotRevivesARowAnInferredDeleteTombstonedBeforeItsList(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(10, cm("wrong", "uid-w", 5, change.OpCreate), cm("later", "uid-l", 6, change.OpCreate),
		cm("observed", "uid-o", 7, change.OpCreate)))
	gone := inferredDelete("wrong", "uid-w", 20)
	gone.Reason = change.ReasonGone
	later := inferredDelete("later", "uid-l", 40)
	later.Reason = change.ReasonGone
	write(t, s, batch(40, gone, later, cm("observed", "uid-o", 25, change.OpDelete)))

	snap := func(name, uid string, rv change.RV) change.Change {
		c := cm(name, uid, rv, change.OpCreate)
		c.Snapshot, c.ListRV = true, 30
		return c
	}
	write(t, s, batch(40, snap("wrong", "uid-w", 5), snap("later", "uid-l", 6), snap("observed", "uid-o", 7)))

	if r := mustObject(t, dsn, "wrong"); r.Deleted || r.RV != 5 || r.DataRV != "5" {
		t.Errorf("wrongly tombstoned row after a later LIST showed it: %+v, want alive at RV 5", r)
	}
	if r := mustObject(t, dsn, "later"); !r.Deleted || r.RV != 40 {
		t.Errorf("row tombstoned after the LIST: %+v, want still deleted at RV 40", r)
	}
	if r := mustObject(t, dsn, "observed"); !r.Deleted || r.RV != 25 {
		t.Errorf("row deleted by an observed delete: %+v, want still deleted at RV 25", r)
	}
	var reason string
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT coalesce(reason, '<null>') FROM kube_cdc.changes
		WHERE name = 'wrong' AND op = 'delete'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != change.ReasonGone {
		t.Errorf("changes.reason of the inferred delete = %q, want %q", reason, change.ReasonGone)
	}
}
