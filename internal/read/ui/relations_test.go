package ui_test

import (
	"strings"
	"testing"
)

// An owner's page lists what it owns in every namespace (a cluster-scoped owner's
// dependents may live anywhere), an object naming it as its first owner or among several.
// The rows are written by SQL under a cluster of their own: the shared daemon streams no
// cluster-scoped resource.
func TestAClusterScopedOwnersPageListsTheDependentsItOwnsInEveryNamespace(t *testing.T) {
	const c = "relations-cluster"
	execSQL(t, `SET search_path = kube_cdc;
	INSERT INTO objects (cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version, object) VALUES
	  ('`+c+`', '', 'v1', 'namespaces', 'Namespace', '', 'team-a', 'ns-uid', 1, '{"metadata":{"name":"team-a","uid":"ns-uid"}}'),
	  ('`+c+`', '', 'v1', 'configmaps', 'ConfigMap', 'team-a', 'owned-a', 'cm-a', 2,
	   '{"metadata":{"name":"owned-a","namespace":"team-a","ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"ns-uid"}]}}'),
	  ('`+c+`', '', 'v1', 'configmaps', 'ConfigMap', 'team-b', 'owned-b', 'cm-b', 3,
	   '{"metadata":{"name":"owned-b","namespace":"team-b","ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"ns-uid"}]}}'),
	  ('`+c+`', '', 'v1', 'configmaps', 'ConfigMap', 'team-b', 'not-owned', 'cm-c', 4, '{"metadata":{"name":"not-owned","namespace":"team-b"}}'),
	  ('`+c+`', '', 'v1', 'configmaps', 'ConfigMap', 'team-b', 'second-owner', 'cm-d', 5,
	   '{"metadata":{"name":"second-owner","namespace":"team-b","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"other"},{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"ns-uid"}]}}');
	INSERT INTO changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, observed_at) VALUES
	  ('`+c+`', '', 'namespaces', '', 'team-a', 'ns-uid', 1, 'create', '{"metadata":{"name":"team-a","uid":"ns-uid"}}', now()),
	  ('`+c+`', '', 'configmaps', 'team-a', 'owned-a', 'cm-a', 2, 'create',
	   '{"metadata":{"name":"owned-a","namespace":"team-a","ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"ns-uid"}]}}', now());`)
	t.Cleanup(func() {
		execSQL(t, `DELETE FROM kube_cdc.objects WHERE cluster = '`+c+`'; DELETE FROM kube_cdc.changes WHERE cluster = '`+c+`';`)
	})
	srv := newServer(t, nil)
	_, body := get(t, srv, "/object?cluster="+c+"&resource=namespaces&name=team-a")
	for _, want := range []string{"ConfigMap owned-a</a>", "ConfigMap owned-b</a>", "ConfigMap second-owner</a>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the Namespace's page does not list %q among what it owns", want)
		}
	}
	if strings.Contains(body, "not-owned") {
		t.Error("the Namespace's page lists a ConfigMap it does not own")
	}
	// owned-a's page links its cluster-scoped owner.
	_, body = get(t, srv, "/object?cluster="+c+"&resource=configmaps&ns=team-a&name=owned-a")
	if !strings.Contains(body, `<a class="owner"`) || !strings.Contains(body, "Namespace team-a</a>") {
		t.Error("owned-a's page does not link its cluster-scoped owner")
	}
}
