package source_test

import (
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Time travel (issue 12): after an etcd restore the checkpoint is ahead of the server. A
// watch from it would wait, silently, until the cluster's RVs reach it, and then deliver
// other changes under RVs the sink already holds. Before watching, the stream asks the
// server where it is (a one-object LIST) and relists from the present instead; the
// pipeline, seeing the LIST below its checkpoint, starts a new epoch.
func TestAStreamFromAnRVTheServerHasNotReachedRelistsInsteadOfWaiting(t *testing.T) {
	e := newEnv(t, time.Minute)
	cm := e.configMap("", "present", nil)
	future := parseRV(t, cm.ResourceVersion) + 1_000_000
	r := e.run(e.stream(e.configMaps()), future, nil)
	evs := r.waitFor(e, "a relist", relistEnded(1))
	end, _ := last(evs, change.RelistEnd)
	if end.RV >= future {
		t.Errorf("relisted at RV %d, want the server's present, below %d", end.RV, future)
	}
	if got := names(evs, change.Listed); len(got) != 1 || got[0] != "present" {
		t.Errorf("listed %q, want the one object", got)
	}
	for _, w := range e.requests.watches("configmaps") {
		if parseRV(t, w.Query.Get("resourceVersion")) >= future {
			t.Errorf("a watch was opened from the future RV %s", w.Query.Get("resourceVersion"))
		}
	}
}
