package postgres

import (
	"encoding/json"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func keyIndexOf(t *testing.T, s *Sink) map[string]change.Entry {
	t.Helper()
	out := map[string]change.Entry{}
	if err := s.KeyIndex(testCtx(t), configmaps, func(k change.Key, e change.Entry) error {
		out[k.Name] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Drift checks, as the PostgreSQL sink sees them: a row whose object is edited by hand is
// Drifted in the key index; the same version written again (the reconcile diff's repair)
// restores it, while a replay of that version over an untouched row changes nothing.
func TestARowEditedByHandIsDriftedInTheKeyIndexAndTheSameVersionRepairsIt(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	ctx := testCtx(t)
	edited, kept := cm("edited", "u-e", 10, change.OpCreate), cm("kept", "u-k", 11, change.OpCreate)
	write(t, s, batch(20, edited, kept))
	if idx := keyIndexOf(t, s); idx["edited"].Drifted || idx["kept"].Drifted {
		t.Fatalf("rows as written are Drifted in the key index: %+v", idx)
	}
	db := connect(t, dsn)
	if _, err := db.Exec(ctx, `UPDATE kube_cdc.objects SET object = jsonb_set(object, '{data,rv}', '"hand"') WHERE name = 'edited'`); err != nil {
		t.Fatal(err)
	}
	idx := keyIndexOf(t, s)
	if !idx["edited"].Drifted || idx["kept"].Drifted {
		t.Fatalf("after editing one row by hand the key index says %+v; want only edited Drifted", idx)
	}
	if idx["edited"].RV != 10 || idx["edited"].UID != "u-e" {
		t.Errorf("the edited row's entry is %+v, want its version (u-e, 10)", idx["edited"])
	}
	updatedAt := func() string {
		var at string
		if err := db.QueryRow(ctx, `SELECT updated_at::text FROM kube_cdc.objects WHERE name = 'kept'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	keptAt := updatedAt()

	edited.Op, edited.Snapshot, kept.Op, kept.Snapshot = change.OpUpdate, true, change.OpUpdate, true
	write(t, s, batch(20, edited, kept))
	if r := mustObject(t, dsn, "edited"); r.DataRV != "10" {
		t.Errorf("the edited row holds data.rv %q after the repair, want the written %q", r.DataRV, "10")
	}
	if idx := keyIndexOf(t, s); idx["edited"].Drifted {
		t.Errorf("the repaired row is still Drifted")
	}
	if at := updatedAt(); at != keptAt {
		t.Errorf("writing an untouched row's version again updated it (updated_at %s, was %s)", at, keptAt)
	}
}

// The key index hashes again only rows another transaction wrote last, and reads them as
// drifted only when their object changed: a row touched without changing its object (an
// UPDATE of another column, as a restore or a maintenance script does) and rows written
// by the bisecting safety net (under savepoints, whose xmin is not the transaction's id)
// are not drifted; a row whose object was edited, or set to NULL, is.
func TestOnlyARowWhoseObjectChangedBehindKubeCDCsBackIsDriftedNotOneTouchedOrWrittenUnderSavepoints(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	s.noPrecheck = true // the poison object below reaches PostgreSQL: the batch is bisected
	ctx := testCtx(t)
	poison := cm("poison", "u-p", 12, change.OpCreate)
	poison.Object = json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","data":{"v":"a\u0000b"}}`)
	write(t, s, batch(20, cm("touched", "u-t", 10, change.OpCreate), cm("edited", "u-e", 11, change.OpCreate), poison,
		cm("nulled", "u-n", 13, change.OpCreate), cm("bisected", "u-b", 14, change.OpCreate)))
	db := connect(t, dsn)
	var underSavepoint bool
	if err := db.QueryRow(ctx, `SELECT xmin::text::bigint <> object_xmin FROM kube_cdc.objects WHERE name = 'bisected'`).Scan(&underSavepoint); err != nil {
		t.Fatal(err)
	}
	if !underSavepoint {
		t.Fatal("the batch with a poison object was not written under savepoints; this test needs it to be")
	}
	if idx := keyIndexOf(t, s); idx["touched"].Drifted || idx["edited"].Drifted || idx["bisected"].Drifted || idx["nulled"].Drifted {
		t.Fatalf("rows as written (under savepoints) are Drifted in the key index: %+v", idx)
	}
	for _, q := range []string{
		`UPDATE kube_cdc.objects SET updated_at = updated_at, labels = labels WHERE name = 'touched'`,
		`UPDATE kube_cdc.objects SET object = jsonb_set(object, '{data,extra}', '"hand"') WHERE name = 'edited'`,
		`UPDATE kube_cdc.objects SET object = NULL WHERE name = 'nulled'`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	idx := keyIndexOf(t, s)
	for name, want := range map[string]bool{"touched": false, "edited": true, "nulled": true, "bisected": false} {
		if idx[name].Drifted != want {
			t.Errorf("%s: Drifted = %v in the key index, want %v", name, idx[name].Drifted, want)
		}
	}
}

// A repair or a resnapshot --full sends a version the audit trail already has as a
// snapshot update; changes records each version once, whatever op it was first seen as.
func TestASnapshotUpdateOfAVersionAlreadyInChangesAddsNoRowAndANewerOneDoes(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	ctx := testCtx(t)
	first := cm("a", "u-a", 10, change.OpCreate)
	write(t, s, batch(10, first))
	again := first
	again.Op, again.Snapshot = change.OpUpdate, true
	write(t, s, batch(10, again))
	newer := cm("a", "u-a", 12, change.OpUpdate)
	newer.Snapshot = true
	write(t, s, batch(12, newer))
	rows, err := connect(t, dsn).Query(ctx, `SELECT op || '@' || resource_version FROM kube_cdc.changes WHERE name = 'a' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if want := []string{"create@10", "update@12"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("changes of a = %v, want %v: the repair of version 10 is no new version", got, want)
	}
}
