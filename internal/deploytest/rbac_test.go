package deploytest

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// resources builds values with config.resources set to these entries: a string is a
// name, inNamespaces a name with its namespaces.
func resources(entries ...any) map[string]any {
	var rs []any
	for _, e := range entries {
		switch e := e.(type) {
		case string:
			rs = append(rs, map[string]any{"name": e})
		case []any:
			rs = append(rs, map[string]any{"name": e[0], "namespaces": e[1]})
		}
	}
	return map[string]any{"config": map[string]any{"resources": rs}}
}

func inNamespaces(name string, ns ...any) []any { return []any{name, ns} }

// rbacOf renders values and returns the ClusterRole's rules (nil without a ClusterRole) and
// each watched namespace's Role rules, checking every binding on the way.
func rbacOf(t *testing.T, vals map[string]any) (cluster []string, namespaced map[string][]string) {
	t.Helper()
	r, err := renderValues(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	if r.has("ClusterRole", "cdc-kube-cdc") {
		cluster = ruleSet(t, into[rbacv1.ClusterRole](t, r, "ClusterRole", "cdc-kube-cdc").Rules)
		crb := into[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "cdc-kube-cdc")
		checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole")
	} else if r.has("ClusterRoleBinding", "cdc-kube-cdc") {
		t.Error("a ClusterRoleBinding without its ClusterRole")
	}
	namespaced = map[string][]string{}
	for _, u := range r.objects {
		if u.GetKind() != "Role" || u.GetName() != "cdc-kube-cdc" {
			continue
		}
		ns := u.GetNamespace()
		role := into[rbacv1.Role](t, r, "Role", ns+"/cdc-kube-cdc")
		namespaced[ns] = ruleSet(t, role.Rules)
		rb := into[rbacv1.RoleBinding](t, r, "RoleBinding", ns+"/cdc-kube-cdc")
		checkBinding(t, rb.RoleRef, rb.Subjects, "Role")
	}
	return cluster, namespaced
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind string) {
	t.Helper()
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "cdc-kube-cdc", Namespace: "observability"}}
	if ref.Kind != kind || ref.Name != "cdc-kube-cdc" || ref.APIGroup != rbacv1.GroupName || !reflect.DeepEqual(subjects, want) {
		t.Errorf("binding to %+v for %+v", ref, subjects)
	}
}

// Every name form kube-cdc resolves becomes a rule on the group the apiserver serves it
// in: today's chart granted a bare "deployments" in the core group, so the pod was
// Forbidden in a cluster although `kube-cdc check` passed with a laptop's admin
// credentials.
func TestChartRBACGrantsTheGroupEachNameResolvesTo(t *testing.T) {
	for name, want := range map[string][]string{
		"deployments":                  {"apps/deployments list,watch"},
		"Deployment":                   {"apps/deployments list,watch"}, // a kind
		"deploy":                       {"apps/deployments list,watch"}, // a short name
		"deployments.apps":             {"apps/deployments list,watch"},
		"apps/v1/deployments":          {"apps/deployments list,watch"},
		"configmaps":                   {"/configmaps list,watch"},
		"cm":                           {"/configmaps list,watch"},
		"v1/configmaps":                {"/configmaps list,watch"}, // version/resource: core
		"Nodes":                        {"/nodes list,watch"},
		"cronjobs":                     {"batch/cronjobs list,watch"},
		"ingresses":                    {"networking.k8s.io/ingresses list,watch"},
		"hpa":                          {"autoscaling/horizontalpodautoscalers list,watch"},
		"poddisruptionbudgets":         {"policy/poddisruptionbudgets list,watch"},
		"clusterroles":                 {"rbac.authorization.k8s.io/clusterroles list,watch"},
		"storageclasses":               {"storage.k8s.io/storageclasses list,watch"},
		"leases":                       {"coordination.k8s.io/leases list,watch"},
		"endpointslices":               {"discovery.k8s.io/endpointslices list,watch"},
		"crd":                          {"apiextensions.k8s.io/customresourcedefinitions list,watch"},
		"priorityclasses":              {"scheduling.k8s.io/priorityclasses list,watch"},
		"events":                       {"/events list,watch", "events.k8s.io/events list,watch"},
		"widgets.example.com":          {"example.com/widgets list,watch"},
		"example.com/v1alpha1/widgets": {"example.com/widgets list,watch"},
	} {
		t.Run(name, func(t *testing.T) {
			cluster, namespaced := rbacOf(t, resources(name))
			if !reflect.DeepEqual(cluster, want) || len(namespaced) != 0 {
				t.Errorf("ClusterRole %v, Roles %v; want ClusterRole %v", cluster, namespaced, want)
			}
		})
	}
}

// Secrets configured for one namespace are readable there and nowhere else: today's chart
// put every resource in the ClusterRole, granting read on every Secret in the cluster.
func TestChartRBACKeepsANamespacedResourceInItsNamespaces(t *testing.T) {
	cluster, namespaced := rbacOf(t, resources(inNamespaces("secrets", "team-a")))
	if cluster != nil {
		t.Errorf("ClusterRole rendered with rules %v", cluster)
	}
	want := map[string][]string{"team-a": {"/secrets list,watch"}}
	if !reflect.DeepEqual(namespaced, want) {
		t.Errorf("Roles %v, want %v", namespaced, want)
	}
}

// Cluster-wide and namespaced resources side by side: the ClusterRole holds only what is
// streamed from all namespaces; each namespace's Role holds the rest, once per resource.
func TestChartRBACMixesClusterAndNamespacedResources(t *testing.T) {
	cluster, namespaced := rbacOf(t, resources(
		"namespaces",
		"deployments",
		inNamespaces("secrets", "team-a", "team-b"),
		inNamespaces("configmaps", "team-a"),
		inNamespaces("cm", "team-b"),
		inNamespaces("deployments.apps", "team-a"), // already granted everywhere
		inNamespaces("example.com/v1/widgets", "team-b"),
	))
	wantCluster := []string{"/namespaces list,watch", "apps/deployments list,watch"}
	if !reflect.DeepEqual(cluster, wantCluster) {
		t.Errorf("ClusterRole %v, want %v", cluster, wantCluster)
	}
	wantRoles := map[string][]string{
		"team-a": {"/configmaps list,watch", "/secrets list,watch"},
		"team-b": {"/configmaps list,watch", "/secrets list,watch", "example.com/widgets list,watch"},
	}
	if !reflect.DeepEqual(namespaced, wantRoles) {
		t.Errorf("Roles\n got %v\nwant %v", namespaced, wantRoles)
	}
}

// A name the chart cannot place in a group fails the render, naming it, rather than
// granting a guess; so does a malformed name or a cluster-scoped resource with namespaces.
func TestChartRBACRejectsWhatItCannotGrant(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want []string
	}{
		{resources("configmaps", "widgets"), []string{`config.resources[1]`, `"widgets"`, "plural.group"}},
		{resources("a/b/c/d"), []string{`"a/b/c/d"`, "group/version/resource"}},
		{resources(inNamespaces("nodes", "team-a")), []string{`"nodes"`, "cluster-scoped"}},
		{map[string]any{"config": map[string]any{"resources": []any{}}}, []string{"config.resources is empty"}},
		{map[string]any{"config": map[string]any{"resources": []any{"deployments"}}}, []string{"config.resources[0]", "{name: deployments}"}},
	} {
		_, err := renderValues(t, c.vals)
		t.Logf("%v: %v", c.vals, err)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: got error %v, want it to mention %s", c.vals, err, w)
				break
			}
		}
	}
}
