package postgres

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func inEpoch(epoch int, cs ...change.Change) []change.Change {
	for i := range cs {
		cs[i].Epoch = epoch
	}
	return cs
}

// epochChanges lists (name, epoch/rv, op) of every changes row in id order.
func epochChanges(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t),
		`SELECT name || ' ' || epoch || '/' || resource_version || ' ' || op FROM kube_cdc.changes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 12, time travel, as the PostgreSQL sink sees it: after an etcd restore the
// pipeline writes the cluster's versions in a new epoch. They replace the rows' higher
// RVs of the old epoch (the RV guard orders (epoch, RV)), an RV the restored cluster
// issues again for another change is a new changes row (not a replay), the checkpoint
// goes down to the new epoch's RV, the epoch survives a restart (Epoch), and the time
// travel is recorded in epochs. A replay of an old epoch's batch changes nothing.
func TestANewEpochsVersionsReplaceHigherRVsOfTheOldEpochAndReusedRVsAreKept(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	old := batch(100, inEpoch(0, cm("restored", "u-r", 90, change.OpUpdate), cm("reused", "u-u", 45, change.OpCreate))...)
	write(t, s, old)

	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	travel := batch(0, inEpoch(1, cm("restored", "u-r", 40, change.OpUpdate), cm("reused", "u-u", 45, change.OpUpdate))...)
	travel.Epoch = 1
	travel.TimeTravel = &change.TimeTravel{Epoch: 1, Reason: change.TravelListBelowCheckpoint, Checkpoint: 100, ListRV: 50, At: at}
	write(t, s, travel)
	if ck, ep := checkpoint(t, s, configmaps), epochOf(t, s); ck != 0 || ep != 1 {
		t.Errorf("mid-relist of the new epoch: checkpoint %d in epoch %d, want 0 (a crash relists) in epoch 1", ck, ep)
	}
	end := batch(50)
	end.Epoch = 1
	write(t, s, end)
	write(t, s, old) // a replay of the old epoch

	if r := mustObject(t, dsn, "restored"); r.RV != 40 || r.DataRV != "40" {
		t.Errorf("restored holds RV %d (object of %s), want the new epoch's 40", r.RV, r.DataRV)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects WHERE epoch = 1`); n != 2 {
		t.Errorf("%d objects rows in epoch 1, want 2", n)
	}
	want := []string{"restored 0/90 update", "reused 0/45 create", "restored 1/40 update", "reused 1/45 update"}
	if got := epochChanges(t, dsn); !slices.Equal(got, want) {
		t.Errorf("changes\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if ck, ep := checkpoint(t, s, configmaps), epochOf(t, s); ck != 50 || ep != 1 {
		t.Errorf("checkpoint %d in epoch %d, want 50 in epoch 1 (below the old epoch's 100)", ck, ep)
	}
	var reason string
	var ckRV, listRV int64
	var detected time.Time
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT reason, checkpoint_rv, list_rv, detected_at FROM kube_cdc.epochs
		WHERE cluster = $1 AND sink = 'warehouse' AND resource = 'configmaps' AND epoch = 1`, cluster).Scan(&reason, &ckRV, &listRV, &detected); err != nil {
		t.Fatalf("the epochs row: %v", err)
	}
	if reason != change.TravelListBelowCheckpoint || ckRV != 100 || listRV != 50 || !detected.Equal(at) {
		t.Errorf("epochs row: %s %d %d %v, want list-below-checkpoint 100 50 %v", reason, ckRV, listRV, detected, at)
	}
}

func epochOf(t *testing.T, s *Sink) int {
	t.Helper()
	e, err := s.Epoch(testCtx(t), configmaps)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
