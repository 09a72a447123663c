package source_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
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

// An apiserver restarting on a restored etcd answers 503 (or refuses connections) for a
// while. A probe it leaves unanswered must not let the watch open unchecked from an RV the
// restored server has not reached (answered, after a wait, as history expired, by when the
// server's own writes may have passed the checkpoint: the restore passes unseen): the
// probe fails like a watch, and is asked again after the backoff.
func TestAProbeTheServerLeavesUnansweredIsAskedAgainBeforeAnyWatchOpens(t *testing.T) {
	e := newEnv(t, time.Minute)
	cm := e.configMap("", "present", nil)
	future := parseRV(t, cm.ResourceVersion) + 1_000_000
	log := &requestLog{}
	log.fail = func(r *request) int {
		if r.isProbe() && len(log.matching((*request).isProbe)) <= 2 {
			return http.StatusServiceUnavailable // the first two probes
		}
		return 0
	}
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(e.kube.Config, log)
	s.Backoff = retry.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}
	r := e.run(s, future, nil)
	evs := r.waitFor(e, "a relist", relistEnded(1))
	if end, _ := last(evs, change.RelistEnd); end.RV >= future {
		t.Errorf("relisted at RV %d, want the server's present, below %d", end.RV, future)
	}
	if n := len(log.matching((*request).isProbe)); n < 3 {
		t.Errorf("%d probes, want the two unanswered and one answered at least", n)
	}
	for _, w := range log.watches("configmaps") {
		if parseRV(t, w.Query.Get("resourceVersion")) >= future {
			t.Errorf("a watch was opened from the future RV %s after an unanswered probe", w.Query.Get("resourceVersion"))
		}
	}
}

// Issue 24 (3.1): the cluster's identity read by a user who may not list namespaces used to
// fail as "read the kube-system namespace: unknown" — the apiserver's Status hidden behind
// the generic error client-go makes of a JSON error body. The refusal must be a Forbidden
// error that names the permission missing and the user refused.
func TestTheClusterIdentityOfAUserWhoMayNotListNamespacesIsForbiddenAndNamesThePermission(t *testing.T) {
	e := newEnv(t, time.Minute)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}
	cfg, _, err := e.kube.RestrictedUser(e.ctx, "identity-no-namespaces", rules)
	if err != nil {
		t.Fatal(err)
	}
	uid, err := source.ClusterIdentity(e.ctx, e.clientsFor(cfg, e.requests))
	if err == nil {
		t.Fatalf("read the cluster identity %q without list on namespaces", uid)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("error %q is no Forbidden error", err)
	}
	for _, want := range []string{"forbidden", "list namespaces (cluster-wide) not allowed",
		`cannot list resource "namespaces"`, "system:serviceaccount:kube-cdc-testenv:identity-no-namespaces"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "unknown") {
		t.Errorf("error %q still says unknown", err)
	}

	// An admin reads it: the uid of kube-system.
	uid, err = source.ClusterIdentity(e.ctx, e.clients)
	system, gerr := e.kube.Clientset().CoreV1().Namespaces().Get(e.ctx, "kube-system", metav1.GetOptions{})
	if err != nil || gerr != nil || uid != string(system.UID) {
		t.Errorf("admin's cluster identity %q, %v; want kube-system's uid %s (%v)", uid, err, system.UID, gerr)
	}
}
