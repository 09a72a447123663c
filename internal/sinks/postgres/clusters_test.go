package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// The read functions' last argument, cluster, defaults to NULL: every cluster with a
// checkpoint (the clusters kube-cdc writes), not every cluster with rows. A cluster whose
// checkpoints were deleted (decommissioned) is read only when named.
func TestWithoutAClusterAsOfHistoryAndLineageReadEveryClusterWithACheckpoint(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	other, err := New(testCtx(t), "warehouse", "other", Options{DSN: dsn}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	write(t, s, batch(10, cm("a", "ua", 10, change.OpCreate)))
	b := cm("a", "ub", 20, change.OpCreate)
	b.Cluster = "other"
	write(t, other, batch(20, b))
	conn := connect(t, dsn)
	clusters := func(sql string, args ...any) []string {
		t.Helper()
		rows, err := conn.Query(testCtx(t), sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		slices.Sort(out)
		return out
	}
	now := time.Now().Add(time.Minute)
	reads := []struct {
		name, all, named string
		args             []any
	}{
		{"as_of", `SELECT cluster FROM kube_cdc.as_of($1, 'configmaps', 'ns')`, `SELECT cluster FROM kube_cdc.as_of($1, 'configmaps', 'ns', 'other')`, []any{now}},
		{"history", `SELECT cluster FROM kube_cdc.history('configmaps', 'ns', 'a')`, `SELECT cluster FROM kube_cdc.history('configmaps', 'ns', 'a', 'other')`, nil},
		{"lineage", `SELECT cluster FROM kube_cdc.lineage('configmaps', 'ns', 'a')`, `SELECT cluster FROM kube_cdc.lineage('configmaps', 'ns', 'a', 'other')`, nil},
	}
	for _, r := range reads {
		if got := clusters(r.all, r.args...); !slices.Equal(got, []string{"other", "test"}) {
			t.Errorf("%s without a cluster, both checkpointed: %v, want [other test]", r.name, got)
		}
	}
	if _, err := conn.Exec(testCtx(t), `DELETE FROM kube_cdc.checkpoints WHERE cluster = 'other'`); err != nil {
		t.Fatal(err)
	}
	for _, r := range reads {
		if got := clusters(r.all, r.args...); !slices.Equal(got, []string{"test"}) {
			t.Errorf("%s without a cluster, other's checkpoints deleted: %v, want [test]", r.name, got)
		}
		if got := clusters(r.named, r.args...); !slices.Equal(got, []string{"other"}) {
			t.Errorf("%s of cluster other, its checkpoints deleted: %v, want [other]", r.name, got)
		}
	}
}
