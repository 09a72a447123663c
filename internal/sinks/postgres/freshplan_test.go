package postgres

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// TestASteadyUpdateOnAFreshDatabaseReadsOnlyItsOwnObjectsRow is the first minute after an
// install: an initial sync has bulk-loaded objects, no ANALYZE has run, and a watch update
// arrives. Its single statement (the one writeInline sends) must read the key's objects
// row and no other: without statistics a lookup whose WHERE implied a partial index's
// predicate was planned on objects_live and filtered every row of the resource, per
// change (29 ms p50 per one-change write at 20k objects, 6 s for a COPY batch of 200).
// EXPLAIN ANALYZE of the statement counts the rows each plan node read and threw away.
func TestASteadyUpdateOnAFreshDatabaseReadsOnlyItsOwnObjectsRow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	s.noAnalyze = true // the minute before the sink's own ANALYZE (analyze.go) has run
	// ... and before autovacuum's: under load the bulk write below lasted long enough for
	// autovacuum to analyze objects, and the test had no fresh database to read.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE kube_cdc.objects SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	rv := change.RV(1)
	var snap []change.Change
	for i := range n {
		rv++
		name := "cm-" + strconv.Itoa(i)
		c := cm(name, "uid-"+name, rv, change.OpCreate)
		c.Snapshot, c.ListRV = true, 1<<40
		snap = append(snap, c)
	}
	write(t, s, change.Batch{Resource: configmaps, Changes: snap})
	write(t, s, batch(rv))

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var analyzed int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_statistic WHERE starelid = 'kube_cdc.objects'::regclass`).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if analyzed != 0 {
		t.Fatalf("objects has statistics already (%d pg_statistic rows): the test needs a database no ANALYZE has run on", analyzed)
	}

	rv++
	up := cm("cm-2500", "uid-cm-2500", rv, change.OpUpdate)
	w := &batchWrite{res: configmaps, checkpoint: rv}
	w.staged, w.bad = screen([]change.Change{up}, true)
	if !s.inlines(w) {
		t.Fatal("one watch update is not written as a single statement: the test reads the wrong plan")
	}
	st, err := s.inline.statement(1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := s.inlineArgs(w, st)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.sql, args...).Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN the steady write: %v", err)
	}
	var root []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &root); err != nil {
		t.Fatal(err)
	}
	var wasted []string
	root[0].Plan.walk(func(p planNode) {
		if p.Relation == "objects" && p.RowsRemovedByFilter*max(p.Loops, 1) > 1 {
			wasted = append(wasted, p.NodeType+" using "+p.Index+": "+strconv.Itoa(p.RowsRemovedByFilter)+" rows read and filtered out")
		}
	})
	if len(wasted) > 0 {
		t.Errorf("one update on a fresh database of %d objects read other keys' objects rows:\n%s", n, strings.Join(wasted, "\n"))
	}
}

// planNode is the part of EXPLAIN's JSON a test reads.
type planNode struct {
	NodeType            string     `json:"Node Type"`
	Relation            string     `json:"Relation Name"`
	Index               string     `json:"Index Name"`
	RowsRemovedByFilter int        `json:"Rows Removed by Filter"`
	Loops               int        `json:"Actual Loops"`
	Plans               []planNode `json:"Plans"`
}

func (p planNode) walk(f func(planNode)) {
	f(p)
	for _, c := range p.Plans {
		c.walk(f)
	}
}
