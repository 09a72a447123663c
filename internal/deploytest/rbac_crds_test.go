package deploytest

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// A configured custom resource (a group with a dot that is not Kubernetes' own) gets
// read-only list and watch on CustomResourceDefinitions, in a ClusterRole of its own,
// whether the resource is streamed cluster-wide or in namespaces: kube-cdc watches CRDs to
// follow one created, deleted or changing versions while it runs. Built-in resources
// alone, dotted groups included, get nothing more.
func TestChartRBACGrantsWatchingCRDsOnlyWhenACustomResourceIsConfigured(t *testing.T) {
	crdRule := []string{"apiextensions.k8s.io/customresourcedefinitions list,watch"}
	for _, c := range []struct {
		name string
		vals map[string]any
		want []string // the -crds ClusterRole's rules; nil: no such ClusterRole
	}{
		{"built-in resources only", resources("configmaps", "ingresses", "clusterroles"), nil},
		{"a custom resource cluster-wide", resources("configmaps", "widgets.example.com"), crdRule},
		{"a custom resource in a namespace", resources("configmaps", inNamespaces("example.com/v1/widgets", "shop")), crdRule},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := renderValues(t, c.vals)
			if err != nil {
				t.Fatal(err)
			}
			if !r.has("ClusterRole", "cdc-kube-cdc-crds") {
				if c.want != nil {
					t.Fatalf("no ClusterRole cdc-kube-cdc-crds, want one with %v", c.want)
				}
				if r.has("ClusterRoleBinding", "cdc-kube-cdc-crds") {
					t.Error("a ClusterRoleBinding cdc-kube-cdc-crds without its ClusterRole")
				}
				return
			}
			if c.want == nil {
				t.Fatalf("a ClusterRole cdc-kube-cdc-crds for built-in resources only")
			}
			if got := ruleSet(t, into[rbacv1.ClusterRole](t, r, "ClusterRole", "cdc-kube-cdc-crds").Rules); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ClusterRole cdc-kube-cdc-crds rules %v, want %v", got, c.want)
			}
			crb := into[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "cdc-kube-cdc-crds")
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "cdc-kube-cdc", Namespace: "observability"}}
			if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != "cdc-kube-cdc-crds" || !reflect.DeepEqual(crb.Subjects, want) {
				t.Errorf("ClusterRoleBinding cdc-kube-cdc-crds binds %+v to %+v", crb.RoleRef, crb.Subjects)
			}
		})
	}
}
