package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// epochQuarantine lists "epoch/rv resolved-by" of every quarantine row of ns/victim.
func epochQuarantine(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT epoch || '/' || resource_version || ' ' || coalesce(resolved_rv::text, 'unresolved')
		FROM kube_cdc.quarantine WHERE name = 'victim' ORDER BY epoch, resource_version`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// After a time travel the restored cluster issues its RVs again: a poison version in the
// new epoch at the RV of one quarantined (and resolved) in the old epoch is another
// change, quarantined, counted and left unresolved although objects holds a higher RV of
// the old epoch; and a good version of the new epoch resolves the old epoch's row even at
// a lower RV. Versions in quarantine order by (epoch, RV), as everywhere else.
func TestAQuarantinedVersionOfAnEarlierEpochIsNotTakenForAReusedRVOfALaterOne(t *testing.T) {
	t.Parallel()
	s, dsn, _, metrics := observedSink(t, false)
	write(t, s, batch(150, inEpoch(0, poisonCM("victim", "uid-v", 150, change.OpCreate))...))
	write(t, s, batch(160, inEpoch(0, cm("victim", "uid-v", 160, change.OpUpdate))...))
	write(t, s, batch(170, inEpoch(0, poisonCM("victim", "uid-v", 170, change.OpUpdate))...))

	// The restore: the cluster is back before RV 150, and reissues it for another poison.
	travel := batch(0, inEpoch(1, cm("victim", "uid-v", 100, change.OpUpdate))...)
	travel.Epoch = 1
	travel.TimeTravel = &change.TimeTravel{Epoch: 1, Reason: change.TravelListBelowCheckpoint, Checkpoint: 170, ListRV: 120}
	write(t, s, travel)
	reused := batch(150, inEpoch(1, poisonCM("victim", "uid-v", 150, change.OpUpdate))...)
	reused.Epoch = 1
	write(t, s, reused)

	want := []string{"0/150 160", "0/170 100", "1/150 unresolved"}
	if got := epochQuarantine(t, dsn); !slices.Equal(got, want) {
		t.Errorf("quarantine (epoch/rv resolved_rv)\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if got := metrics.get("warehouse/configmaps"); got != 3 {
		t.Errorf("metrics hook counted %d quarantined, want 3 (the reused RV is a new change)", got)
	}
	if got := quarantinedStatus(t, s); got != 1 {
		t.Errorf("Status says %d quarantined, want 1", got)
	}
	fix := batch(151, inEpoch(1, cm("victim", "uid-v", 151, change.OpUpdate))...)
	fix.Epoch = 1
	write(t, s, fix)
	if got, want := epochQuarantine(t, dsn), fmt.Sprint([]string{"0/150 160", "0/170 100", "1/150 151"}); fmt.Sprint(got) != want {
		t.Errorf("quarantine after the fix: %v, want %s", got, want)
	}
}
