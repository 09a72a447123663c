package postgres

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// TestABulkLoadLeavesStatisticsBehindItWithoutWaitingForAutovacuum: after an initial
// sync's COPY batches into a fresh database, objects and changes (the partitioned parent,
// which autovacuum never analyzes, and the partition that took the rows) get statistics
// from the sink itself. Autovacuum is off for these tables, so nothing else gives them any.
func TestABulkLoadLeavesStatisticsBehindItWithoutWaitingForAutovacuum(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DO $$ DECLARE r regclass; BEGIN
		FOR r IN SELECT 'kube_cdc.objects'::regclass UNION ALL
		         SELECT relid FROM pg_partition_tree('kube_cdc.changes') WHERE isleaf LOOP
			EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
		END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}
	stats := func(table string) int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_statistic WHERE starelid = $1::regclass`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var month string
	if err := conn.QueryRow(ctx, `SELECT 'kube_cdc.changes_' || to_char(now() AT TIME ZONE 'UTC', 'YYYY_MM')`).Scan(&month); err != nil {
		t.Fatal(err)
	}
	tables := []string{"kube_cdc.objects", "kube_cdc.changes", month}
	for _, table := range tables {
		if n := stats(table); n != 0 {
			t.Fatalf("%s has %d pg_statistic rows before any load: the test needs tables without statistics", table, n)
		}
	}

	rv := change.RV(1)
	for range 2 {
		var snap []change.Change
		for range 1500 {
			rv++
			name := "cm-" + strconv.Itoa(int(rv))
			c := cm(name, "uid-"+name, rv, change.OpCreate)
			c.Snapshot, c.ListRV = true, 1<<40
			snap = append(snap, c)
		}
		write(t, s, change.Batch{Resource: configmaps, Changes: snap})
	}

	deadline := time.Now().Add(time.Minute)
	for {
		var missing []string
		for _, table := range tables {
			if stats(table) == 0 {
				missing = append(missing, table)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after a bulk load of 3,000 rows these tables still have no statistics: %v", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var tuples float64
	if err := conn.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'kube_cdc.objects'::regclass`).Scan(&tuples); err != nil {
		t.Fatal(err)
	}
	if tuples < 1500 {
		t.Errorf("objects' statistics count %.0f rows of the 3,000 loaded: the analysis ran before the load it follows", tuples)
	}
}

// TestEveryPartitionOfChangesIsAnalyzedWhenCreated: the partitions the migrations and
// EnsurePartitions create are analyzed at once, empty, so plans know them empty (a
// never-analyzed table is assumed to hold ten pages of rows).
func TestEveryPartitionOfChangesIsAnalyzedWhenCreated(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// A month far ahead, as EnsurePartitions makes them when the calendar moves on.
	if _, err := conn.Exec(ctx, `SELECT kube_cdc.changes_partition_create((now() + interval '3 years')::timestamp)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsurePartitions(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_partition_tree('kube_cdc.changes') p JOIN pg_class c ON c.oid = p.relid
		WHERE p.isleaf AND c.reltuples < 0`)
	if err != nil {
		t.Fatal(err)
	}
	never, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(never) > 0 {
		t.Errorf("partitions of changes never analyzed after EnsurePartitions: %v", never)
	}
}
