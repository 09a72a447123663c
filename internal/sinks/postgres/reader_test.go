package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// readerOf is the read store over s's database, schema and cluster, as `kube-cdc status`,
// history and as-of open it: the sink's tests read what it wrote through it.
func readerOf(t *testing.T, s *Sink) *store.Store {
	t.Helper()
	r, err := store.Open(testCtx(t), store.Options{DSN: s.opts.DSN, Schema: s.opts.Schema, Cluster: s.cluster, Sink: s.name,
		VerifySchema: VerifySchema, Ping: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// The versions `kube-cdc history` and the web UI's object page read (store.History) are
// history()'s rows, from one definition (object_versions, migration 020): the same ids in
// the same order, each compared with the version before it of the same uid, none after a
// delete or across a recreate, and the version before the first shown even when --since
// leaves it out.
func TestTheStoresHistoryAndHistorySQLAreOneReadOfTheVersions(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(10, cm("web", "uid-1", 10, change.OpCreate)))
	write(t, s, batch(11, cm("web", "uid-1", 11, change.OpUpdate)))
	write(t, s, batch(12, cm("web", "uid-1", 12, change.OpDelete)))
	write(t, s, batch(13, cm("web", "uid-2", 13, change.OpCreate))) // recreated
	write(t, s, batch(14, cm("web", "uid-2", 14, change.OpUpdate)))
	// Deleted, then back with the same uid (it left the scope and returned): a fresh start.
	write(t, s, batch(15, cm("web", "uid-2", 15, change.OpDelete)))
	write(t, s, batch(16, cm("web", "uid-2", 16, change.OpCreate)))
	r := readerOf(t, s)
	revs, err := r.History(testCtx(t), store.HistoryQuery{Resource: "configmaps", Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range revs {
		prev := "-"
		if v.Previous != nil {
			var o struct {
				Data struct{ RV string } `json:"data"`
			}
			if err := json.Unmarshal(v.Previous, &o); err != nil {
				t.Fatal(err)
			}
			prev = o.Data.RV
		}
		got = append(got, fmt.Sprintf("%d %s %s prev %s", v.ID, v.Op, v.RV, prev))
	}
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT id, op, rv FROM kube_cdc.history('configmaps', 'ns', 'web', $1)`, cluster)
	if err != nil {
		t.Fatal(err)
	}
	sqlRows, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var id, rv int64
		var op string
		err := row.Scan(&id, &op, &rv)
		return fmt.Sprintf("%d %s %d", id, op, rv), err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create 10 prev -", "update 11 prev 10", "delete 12 prev 11", "create 13 prev -", "update 14 prev 13",
		"delete 15 prev 14", "create 16 prev -"}
	if len(got) != len(want) || len(sqlRows) != len(want) {
		t.Fatalf("the store read\n%s\nhistory() read\n%s\nwant %d versions", strings.Join(got, "\n"), strings.Join(sqlRows, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], sqlRows[i]+" ") || !strings.HasSuffix(got[i], want[i][strings.Index(want[i], " "):]) {
			t.Errorf("version %d: the store read %q, history() %q, want %q", i, got[i], sqlRows[i], want[i])
		}
	}
	// Since the second version: the first shown still compares with the one before.
	var since time.Time
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT observed_at FROM kube_cdc.changes WHERE id = $1`, revs[1].ID).Scan(&since); err != nil {
		t.Fatal(err)
	}
	later, err := r.History(testCtx(t), store.HistoryQuery{Resource: "configmaps", Namespace: "ns", Name: "web", Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if len(later) != 6 || later[0].ID != revs[1].ID || !bytes.Equal(later[0].Previous, revs[1].Previous) {
		t.Errorf("since the second version: %d versions, the first %d with previous %s; want 6 from %d with previous %s",
			len(later), later[0].ID, later[0].Previous, revs[1].ID, revs[1].Previous)
	}
	if _, err := r.History(testCtx(t), store.HistoryQuery{Resource: "configmaps", Namespace: "ns", Name: "never"}); !errors.Is(err, store.ErrNoHistory) {
		t.Errorf("History of a key without changes: %v, want ErrNoHistory", err)
	}
}
