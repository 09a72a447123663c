package signal_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/signal"
)

func TestAResultIsATableSortedBySinkResourceAndScopeWithWhoAnswered(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := signal.Result{State: signal.StateDone, By: "kube-cdc-0", Started: at, Finished: at.Add(1500 * time.Millisecond), Outcomes: []signal.Outcome{
		{Sink: "wh", Resource: "secrets", Skipped: "not streamed"},
		{Sink: "wh", Resource: "configmaps", Scope: "b", Listed: 3, Written: 1, Drift: map[string]int{"stale": 1, "missing": 2}},
		{Sink: "wh", Resource: "configmaps", Scope: "a", Listed: 2},
	}}
	var out bytes.Buffer
	res.Write(&out, func(id string) string { return "scope-" + id })
	want := `SINK  RESOURCE    SCOPE    LISTED  WRITTEN  DELETED  DRIFT
wh    configmaps  scope-a  2       0        0        -
wh    configmaps  scope-b  3       1        0        missing=2,stale=1
wh    secrets     scope-   -       -        -        skipped: not streamed
answered by kube-cdc-0 in 1.5s
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	(signal.Result{State: signal.StateFailed, Error: "no leader"}).Write(&out, nil)
	if out.Len() != 0 {
		t.Errorf("a failed request without outcomes printed %q; its error says everything", out.String())
	}
}
