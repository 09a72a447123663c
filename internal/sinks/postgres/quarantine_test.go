package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// The pre-check must agree with the server: everything it flags, PostgreSQL rejects
// with the SQLSTATE it names, and everything it passes, PostgreSQL stores.
func TestJsonbRejectsWhatPostgreSQLRejects(t *testing.T) {
	t.Parallel()
	conn := connect(t, pg.NewDatabase(t))
	for _, js := range []string{
		`{"a":"\u0000"}`,
		`{"\u0000":1}`,
		`{"a":"x\u0000"}`,
		`{"a":"\\u0000"}`,   // an escaped backslash, then the text u0000: fine
		`{"a":"\\\u0000"}`,  // an escaped backslash, then a NUL escape
		`{"a":"\\\\u0000"}`, // two escaped backslashes, then text
		`{"a":"\ud800"}`,
		`{"a":"\udc00"}`,
		`{"a":"\uDFFF"}`,
		`{"a":"\ud800x"}`,
		`{"a":"\ud800\ud800"}`,
		`{"a":"\udc00\ud800"}`,
		`{"a":"\ud800\u0041"}`,
		`{"a":"\ud83d\ude00"}`,
		`{"a":"\uD83D\uDE00"}`,
		`{"a":"\u0001\u001f\u00e9\u0026\uffff"}`,
		`{"a":"\"quoted\" \\ \/ \b\f\n\r\t"}`,
		`{"a":"\u0030\u0000"}`,
		`{"a":"é","b":[1,2.5e3,true,null]}`,
		`{}`,
	} {
		reason, state := jsonbRejects([]byte(js))
		var got string
		err := conn.QueryRow(testCtx(t), `SELECT ($1::text)::jsonb::text`, js).Scan(&got)
		var pgErr *pgconn.PgError
		switch {
		case err == nil && reason != "":
			t.Errorf("%s: pre-check says %q (%s), PostgreSQL stores it", js, reason, state)
		case err != nil && !errors.As(err, &pgErr):
			t.Fatalf("%s: %v", js, err)
		case err != nil && reason == "":
			t.Errorf("%s: pre-check passes it, PostgreSQL rejects it: %v", js, err)
		case err != nil && pgErr.Code != state:
			t.Errorf("%s: pre-check names SQLSTATE %s, PostgreSQL %s (%v)", js, state, pgErr.Code, err)
		}
	}
}

// poisonCM is cm with a data value holding a NUL, as the apiserver serves it.
func poisonCM(name, uid string, rv change.RV, op change.Op) change.Change {
	c := cm(name, uid, rv, op)
	c.Object = json.RawMessage(strings.Replace(string(c.Object), `"data":{`, `"data":{"bad":"a\u0000b",`, 1))
	return c
}

// hugeNumberCM is cm with a number jsonb cannot hold (numeric overflow, 22003): a value
// the pre-check does not know, for the bisecting safety net.
func hugeNumberCM(name, uid string, rv change.RV, op change.Op) change.Change {
	c := cm(name, uid, rv, op)
	c.Object = json.RawMessage(strings.Replace(string(c.Object), `"data":{`, `"spec":{"n":1e1000000},"data":{`, 1))
	return c
}

// countingMetrics is the sink's metrics hook, counting.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countingMetrics) Quarantined(sink, resource string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[sink+"/"+resource] += n
}

func (m *countingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}

// syncBuffer collects log lines from concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// observedSink is a migrated sink on a fresh database whose warn lines are collected
// (and shown in the test's output) and whose metrics hook counts.
func observedSink(t *testing.T, noPrecheck bool) (*Sink, string, *syncBuffer, *countingMetrics) {
	t.Helper()
	dsn := pg.NewDatabase(t)
	warns := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), warns), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	s.noPrecheck = noPrecheck
	m := &countingMetrics{}
	s.SetMetrics(m)
	return s, dsn, warns, m
}

// quarantineRow is what a test reads back of one quarantine row.
type quarantineRow struct {
	Name, Op, SQLState, Reason, UID string
	RV, ResolvedRV                  change.RV
	Raw                             []byte
	Resolved                        bool
}

func quarantineRows(t *testing.T, dsn string) []quarantineRow {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT name, op, sqlstate, reason, uid, resource_version,
			resolved_rv, raw, resolved_at IS NOT NULL
		  FROM kube_cdc.quarantine WHERE cluster = $1 AND api_group = '' AND resource = 'configmaps' AND namespace = 'ns'
		 ORDER BY name, resource_version`, cluster)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quarantineRow, error) {
		var r quarantineRow
		err := row.Scan(&r.Name, &r.Op, &r.SQLState, &r.Reason, &r.UID, &r.RV, &r.ResolvedRV, &r.Raw, &r.Resolved)
		return r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func quarantinedStatus(t *testing.T, s *Sink) int64 {
	t.Helper()
	st, err := readerOf(t, s).Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st {
		if r.Resource == "configmaps" && r.Scope == "" {
			return r.Quarantined
		}
	}
	t.Fatalf("no status line for configmaps: %+v", st)
	return 0
}

// goodChanges are n creates of distinct keys, a few with an update, from RV base on.
func goodChanges(n int, base change.RV) []change.Change {
	var out []change.Change
	for i := range n {
		out = append(out, cm(fmt.Sprintf("good-%03d", i), fmt.Sprintf("uid-g%d", i), base+change.RV(i), change.OpCreate))
	}
	return out
}

// The ConfigMap with a NUL in a value: the batch commits without it, it waits in
// quarantine with its raw bytes, named in a warn line and the metric, and the checkpoint
// moves on; a replay adds nothing; a later good version lands and resolves it. On both
// write paths.
func TestAPoisonObjectIsQuarantinedWhileTheRestOfItsBatchCommits(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, smallBatch + 10} {
		t.Run(fmt.Sprintf("%d changes", n), func(t *testing.T) {
			s, dsn, warns, metrics := observedSink(t, false)
			write(t, s, batch(5, cm("victim", "uid-v", 5, change.OpCreate)))

			changes := goodChanges(n-1, 100)
			poison := poisonCM("victim", "uid-v", 150, change.OpUpdate)
			changes = slices.Insert(changes, n/2, poison)
			b := batch(500, changes...)
			write(t, s, b)

			var wantChanges []string
			for _, c := range changes {
				if c.Key.Name != "victim" {
					wantChanges = append(wantChanges, fmt.Sprintf("%s@%d:%s", c.Key.Name, c.RV, c.Op))
				}
			}
			wantChanges = append([]string{"victim@5:create"}, wantChanges...)
			if got := changesRows(t, dsn); !slices.Equal(got, wantChanges) {
				t.Errorf("changes = %v\nwant %v", got, wantChanges)
			}
			if got := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects WHERE deleted_at IS NULL AND name LIKE 'good-%'`); got != n-1 {
				t.Errorf("%d good objects, want %d", got, n-1)
			}
			if r := mustObject(t, dsn, "victim"); r.RV != 5 {
				t.Errorf("victim's objects row = %+v, want the last good version (RV 5)", r)
			}
			if rv := checkpoint(t, s, configmaps); rv != 500 {
				t.Errorf("checkpoint = %d, want 500: the poison object held it back", rv)
			}
			q := quarantineRows(t, dsn)
			if len(q) != 1 {
				t.Fatalf("quarantine = %+v, want the poison change", q)
			}
			if got := q[0]; got.Name != "victim" || got.RV != 150 || got.Op != "update" || got.UID != "uid-v" ||
				got.SQLState != "22P05" || !strings.Contains(got.Reason, `\u0000`) || got.Resolved {
				t.Errorf("quarantine row = %+v", got)
			}
			if !bytes.Equal(q[0].Raw, poison.Object) {
				t.Errorf("raw = %q, want the object as received %q", q[0].Raw, poison.Object)
			}
			if got := metrics.get("warehouse/configmaps"); got != 1 {
				t.Errorf("metrics hook counted %d quarantined, want 1", got)
			}
			for _, want := range []string{"level=WARN", "quarantined", "sink=warehouse", "resource=configmaps", "object=ns/victim", "uid=uid-v", "rv=150", "22P05"} {
				if !strings.Contains(warns.String(), want) {
					t.Errorf("warn log lacks %q:\n%s", want, warns.String())
				}
			}
			if got := quarantinedStatus(t, s); got != 1 {
				t.Errorf("Status says %d quarantined, want 1", got)
			}

			// The watch replays the batch after a restart: nothing twice, nothing counted again.
			write(t, s, b)
			if q := quarantineRows(t, dsn); len(q) != 1 {
				t.Errorf("after a replay, quarantine = %+v, want 1 row", q)
			}
			if got := len(changesRows(t, dsn)); got != len(wantChanges) {
				t.Errorf("after a replay, %d changes rows, want %d", got, len(wantChanges))
			}
			if got := metrics.get("warehouse/configmaps"); got != 1 {
				t.Errorf("after a replay the hook counted %d, want still 1", got)
			}

			// The object is fixed: its next version lands and resolves the quarantine row.
			write(t, s, batch(601, cm("victim", "uid-v", 601, change.OpUpdate)))
			if r := mustObject(t, dsn, "victim"); r.RV != 601 || r.DataRV != "601" {
				t.Errorf("victim after a good version = %+v, want RV 601", r)
			}
			q = quarantineRows(t, dsn)
			if len(q) != 1 || !q[0].Resolved || q[0].ResolvedRV != 601 {
				t.Errorf("quarantine after a good version = %+v, want the row resolved by RV 601", q)
			}
			if got := quarantinedStatus(t, s); got != 0 {
				t.Errorf("Status says %d quarantined after the good version, want 0", got)
			}
		})
	}
}

// A poison object that is created and never fixed, then deleted: the delete event
// carries the poison as its last state. The delete is still stored (without that state),
// so no deleted object stays alive in objects, and the create's row is resolved by it.
func TestADeleteWhoseLastStateIsPoisonIsStoredWithoutIt(t *testing.T) {
	t.Parallel()
	for _, noPrecheck := range []bool{false, true} {
		t.Run(fmt.Sprintf("precheck %v", !noPrecheck), func(t *testing.T) {
			s, dsn, _, metrics := observedSink(t, noPrecheck)
			write(t, s, batch(10, cm("a", "uid-a", 10, change.OpCreate)))
			write(t, s, batch(12, poisonCM("a", "uid-a", 11, change.OpUpdate), cm("b", "uid-b", 12, change.OpCreate)))
			write(t, s, batch(14, cm("c", "uid-c", 13, change.OpCreate), poisonCM("a", "uid-a", 14, change.OpDelete)))

			r := mustObject(t, dsn, "a")
			if !r.Deleted || r.RV != 14 || r.DataRV != "10" {
				t.Errorf("a = %+v, want deleted at RV 14 keeping the last good object (RV 10)", r)
			}
			if got, want := changesRows(t, dsn), []string{"a@10:create", "b@12:create", "c@13:create", "a@14:delete"}; !slices.Equal(got, want) {
				t.Errorf("changes = %v, want %v", got, want)
			}
			if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE name = 'a' AND op = 'delete' AND object IS NULL`); n != 1 {
				t.Errorf("the delete's changes row holds an object")
			}
			q := quarantineRows(t, dsn)
			if len(q) != 2 || q[0].RV != 11 || q[0].ResolvedRV != 14 || q[1].RV != 14 || q[1].Op != "delete" ||
				q[1].ResolvedRV != 14 || !strings.Contains(q[1].Reason, "without its last state") || len(q[1].Raw) == 0 {
				t.Errorf("quarantine = %+v, want the update resolved by the delete and the delete's last state, resolved", q)
			}
			if got := metrics.get("warehouse/configmaps"); got != 2 {
				t.Errorf("metrics hook counted %d, want 2", got)
			}
			if got := quarantinedStatus(t, s); got != 0 {
				t.Errorf("Status says %d quarantined, want 0", got)
			}
		})
	}
}

// The safety net: a value the pre-check does not know (a number beyond numeric's range)
// and, with the pre-check off, a NUL escape. The batch fails, is bisected in its
// transaction, and every other change lands in batch order with the checkpoint.
func TestBisectingQuarantinesWhatThePrecheckMissed(t *testing.T) {
	t.Parallel()
	for _, n := range []int{6, smallBatch + 40} {
		t.Run(fmt.Sprintf("%d changes", n), func(t *testing.T) {
			s, dsn, warns, metrics := observedSink(t, true)
			changes := goodChanges(n-3, 100)
			changes = slices.Insert(changes, 1, hugeNumberCM("huge", "uid-h", 90, change.OpCreate))
			changes = slices.Insert(changes, n-2, poisonCM("nul", "uid-n", 95, change.OpCreate))
			changes = append(changes, cm("nul", "uid-n", 900, change.OpUpdate)) // fixed in the same batch
			write(t, s, batch(1000, changes...))

			var want []string
			for _, c := range changes {
				if c.Key.Name != "huge" && c.RV != 95 {
					want = append(want, fmt.Sprintf("%s@%d:%s", c.Key.Name, c.RV, c.Op))
				}
			}
			if got := changesRows(t, dsn); !slices.Equal(got, want) {
				t.Errorf("changes = %v\nwant %v", got, want)
			}
			if rv := checkpoint(t, s, configmaps); rv != 1000 {
				t.Errorf("checkpoint = %d, want 1000", rv)
			}
			if _, ok := readObject(t, dsn, "huge"); ok {
				t.Error("the object jsonb rejects is in objects")
			}
			if r := mustObject(t, dsn, "nul"); r.RV != 900 {
				t.Errorf("nul = %+v, want its good version RV 900", r)
			}
			q := quarantineRows(t, dsn)
			if len(q) != 2 {
				t.Fatalf("quarantine = %+v, want huge and nul", q)
			}
			if q[0].Name != "huge" || q[0].SQLState != "22003" || q[0].Resolved || !bytes.Equal(q[0].Raw, changes[1].Object) {
				t.Errorf("huge's quarantine row = %+v", q[0])
			}
			if q[1].Name != "nul" || q[1].SQLState != "22P05" || !q[1].Resolved || q[1].ResolvedRV != 900 {
				t.Errorf("nul's quarantine row = %+v, want 22P05 resolved by RV 900", q[1])
			}
			if got := metrics.get("warehouse/configmaps"); got != 2 {
				t.Errorf("metrics hook counted %d, want 2", got)
			}
			if !strings.Contains(warns.String(), "bisecting") || !strings.Contains(warns.String(), "object=ns/huge") {
				t.Errorf("warn log does not tell of the bisection and name huge:\n%s", warns.String())
			}
			// A replay goes through the bisection again and changes nothing.
			write(t, s, batch(1000, changes...))
			if got := changesRows(t, dsn); !slices.Equal(got, want) {
				t.Errorf("after a replay, changes = %v", got)
			}
			if q := quarantineRows(t, dsn); len(q) != 2 {
				t.Errorf("after a replay, quarantine = %+v", q)
			}
			if got := metrics.get("warehouse/configmaps"); got != 2 {
				t.Errorf("after a replay the hook counted %d, want still 2", got)
			}
		})
	}
}

// A batch of nothing but poison still commits its checkpoint.
func TestABatchOfOnlyPoisonMovesTheCheckpoint(t *testing.T) {
	t.Parallel()
	s, dsn, _, _ := observedSink(t, false)
	write(t, s, batch(20, poisonCM("a", "uid-a", 10, change.OpCreate), poisonCM("b", "uid-b", 11, change.OpCreate)))
	if rv := checkpoint(t, s, configmaps); rv != 20 {
		t.Errorf("checkpoint = %d, want 20", rv)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects`); n != 0 {
		t.Errorf("%d objects rows, want 0", n)
	}
	if q := quarantineRows(t, dsn); len(q) != 2 {
		t.Errorf("quarantine = %+v, want 2 rows", q)
	}
}
