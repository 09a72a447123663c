package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// A resource entry with several namespaces is streamed as one target per namespace; each
// of them resyncs at that entry's interval, and an entry without one at pipeline.resync.
func TestEveryTargetOfAResourceEntryResyncsAtThatEntrysInterval(t *testing.T) {
	minute, off := time.Minute, time.Duration(0)
	cfg := &config.Config{
		Pipeline: config.Pipeline{Resync: time.Hour},
		Resources: []config.Resource{
			{Name: "configmaps", Namespaces: []string{"shop", "billing", "shop"}, Resync: &minute},
			{Name: "deployments.apps"},
			{Name: "configmaps", Namespaces: []string{"ops"}, LabelSelector: "app=web", Resync: &off},
		},
	}
	disc := staticDiscovery{lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}}},
	}}
	targets, err := source.Resolve(disc, sourceSpecs(cfg))
	if err != nil {
		t.Fatal(err)
	}
	feeds := source.NewResolution(&source.Clients{Discovery: disc}, targets, nil).Feeds(source.Stream{})
	want := []time.Duration{time.Minute, time.Minute, time.Hour, 0}
	if len(feeds) != len(want) {
		t.Fatalf("%d targets, want %d (two namespaces give two)", len(feeds), len(want))
	}
	for i, f := range feeds {
		if got := f.Resync(); got != want[i] {
			t.Errorf("target %d (%s, scope %q) resyncs every %v, want %v", i, f.Resource().ID(), f.Resource().Scope, got, want[i])
		}
	}
}
