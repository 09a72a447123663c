package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// asOfAt returns "name uid rv/epoch" of each object as_of shows at the moment, through
// Sink.AsOf (and so the SQL function).
func asOfAt(t *testing.T, s *Sink, at time.Time) []string {
	t.Helper()
	objs, err := readerOf(t, s).AsOf(testCtx(t), store.AsOfQuery{At: at, Resource: "configmaps", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if !strings.Contains(string(o.Object), fmt.Sprintf(`"rv": "%d"`, o.RV)) {
			t.Errorf("%s: object %s is not the version at rv %d", o.Name, o.Object, o.RV)
		}
		out = append(out, fmt.Sprintf("%s %s %d/%d", o.Name, o.UID, o.RV, o.Epoch))
	}
	return out
}

// The sink's own write path with observation times set by the test: each moment shows the
// versions observed by then, in observation order, across an epoch whose RVs go back, an
// inferred delete, a recreated key and retention.
func TestAsOfShowsTheNewestVersionObservedByEachMomentAcrossEpochsDeletesAndRecreates(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	obs := func(c change.Change, i, epoch int) change.Change {
		c.ObservedAt, c.Epoch = at(i), epoch
		return c
	}
	write(t, s, batch(12, obs(cm("a", "ua", 10, change.OpCreate), 1, 0), obs(cm("b", "ub", 11, change.OpCreate), 1, 0),
		obs(cm("c", "uc", 12, change.OpCreate), 1, 0)))
	write(t, s, batch(21, obs(cm("a", "ua", 20, change.OpUpdate), 2, 0), obs(cm("b", "ub", 21, change.OpDelete), 2, 0)))
	// A relist that lacked c (gone while unwatched), and found d deleted and created
	// again under its name: the old uid's delete, then the new uid's create, observed at
	// the same instant.
	write(t, s, batch(25, obs(cm("d", "ud1", 22, change.OpCreate), 2, 0)))
	recreated := obs(inferredDelete("d", "ud1", 29), 3, 0)
	recreated.Reason = change.ReasonRecreated
	gone := obs(inferredDelete("c", "uc", 30), 3, 0)
	gone.Reason = change.ReasonGone
	write(t, s, batch(30, gone, recreated, obs(cm("d", "ud2", 30, change.OpCreate), 3, 0)))
	// An etcd restore: epoch 1 issues RVs below the ones held; a's version at RV 15 is
	// newer than its epoch-0 version at RV 20.
	b := batch(16, obs(cm("a", "ua", 15, change.OpUpdate), 4, 1), obs(cm("e", "ue", 16, change.OpCreate), 4, 1))
	b.Epoch = 1
	write(t, s, b)

	for i, want := range [][]string{
		0: nil,
		1: {"a ua 10/0", "b ub 11/0", "c uc 12/0"},
		2: {"a ua 20/0", "c uc 12/0", "d ud1 22/0"},
		3: {"a ua 20/0", "d ud2 30/0"},
		4: {"a ua 15/1", "d ud2 30/0", "e ue 16/1"},
	} {
		if got := asOfAt(t, s, at(i)); !slices.Equal(got, want) {
			t.Errorf("as of minute %d: %v, want %v", i, got, want)
		}
		// Between two moments, the earlier one's answer.
		if i > 0 {
			if got := asOfAt(t, s, at(i).Add(30*time.Second)); !slices.Equal(got, want) {
				t.Errorf("as of minute %d and a half: %v, want %v", i, got, want)
			}
		}
	}

	// Retention deletes every changes row: the objects rows not written since a moment
	// stand for their keys then; before they were written nothing is known.
	if _, err := s.DeleteExpiredChanges(testCtx(t), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 0 {
		t.Fatalf("%d changes rows after retention, want 0", n)
	}
	if got, want := asOfAt(t, s, time.Now()), []string{"a ua 15/1", "d ud2 30/0", "e ue 16/1"}; !slices.Equal(got, want) {
		t.Errorf("as of now after retention: %v, want %v", got, want)
	}
	if got := asOfAt(t, s, at(4)); got != nil {
		t.Errorf("as of minute 4 after retention: %v, want nothing (known only since the objects rows were written)", got)
	}
	// At or after the last write: the moment of the last write (updated_at, written by
	// a and e's batch) shows them, a microsecond (PostgreSQL's precision) before it does not.
	var last time.Time
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT max(updated_at) FROM kube_cdc.objects WHERE name IN ('a', 'e')`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if got, want := asOfAt(t, s, last), []string{"a ua 15/1", "d ud2 30/0", "e ue 16/1"}; !slices.Equal(got, want) {
		t.Errorf("as of a and e's last write after retention: %v, want %v", got, want)
	}
	if got, want := asOfAt(t, s, last.Add(-time.Microsecond)), []string{"d ud2 30/0"}; !slices.Equal(got, want) {
		t.Errorf("as of just before a and e's last write after retention: %v, want %v", got, want)
	}
}
