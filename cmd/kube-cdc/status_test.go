package main

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/status"
)

// The ids status computes from the config alone must be the ids the daemon's resolution
// gives the same entries of a real resource: checkpoints are keyed by them.
func TestStatusNamesEveryConfiguredScopeByTheIDTheDaemonKeysItsCheckpointBy(t *testing.T) {
	cfg := &config.Config{Resources: []config.Resource{
		{Name: "configmaps"},
		{Name: "configmaps", Namespaces: []string{"shop", "billing"}, LabelSelector: "app=web"},
		{Name: "deployments.apps", Namespaces: []string{"shop"}, FieldSelector: "metadata.name=checkout"},
	}}
	scopes := configuredScopes(cfg)

	disc := staticDiscovery{lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}}},
	}}
	targets, err := source.Resolve(disc, sourceSpecs(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 4 {
		t.Fatalf("%d targets, want 4 (two namespaces give two scopes)", len(targets))
	}
	for _, tg := range targets {
		got, ok := scopes[tg.Resource.Scope]
		if !ok {
			t.Errorf("%s scope %q: status does not know the id", tg.Resource.ID(), tg.Resource.Scope)
			continue
		}
		if want := contentOf(tg.Scope()); !reflect.DeepEqual(got, want) {
			t.Errorf("%s scope %q: content %+v, want %+v", tg.Resource.ID(), tg.Resource.Scope, got, want)
		}
	}
	if got := status.ScopeColumn(status.ScopeOf(scopes, targets[2].Resource.Scope), targets[2].Resource.Scope); got != "namespace=billing labels=app=web" {
		t.Errorf("SCOPE column %q, want the namespace and the selector", got)
	}
	if got := status.ScopeColumn(status.ScopeOf(scopes, ""), ""); got != "all" {
		t.Errorf("SCOPE column of the whole resource %q, want all", got)
	}
	if got := status.ScopeColumn(status.ScopeOf(scopes, "0123456789ab"), "0123456789ab"); got != "id 0123456789ab (not in this config)" {
		t.Errorf("SCOPE column of an unknown scope %q", got)
	}
}

// staticDiscovery serves a fixed list of resources, as an apiserver's discovery would.
type staticDiscovery struct {
	discovery.DiscoveryInterface // nil: Resolve asks only for the preferred resources
	lists                        []*metav1.APIResourceList
}

func (d staticDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return d.lists, nil
}
