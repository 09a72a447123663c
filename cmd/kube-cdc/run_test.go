package main

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
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

// ignoreRecorder is a sink that keeps a history: it records the ignore paths it is given.
type ignoreRecorder struct {
	pipeline.Sink
	got map[string][]string
}

func (r *ignoreRecorder) Name() string { return "warehouse" }
func (r *ignoreRecorder) SetIgnorePaths(res change.Resource, paths []string) {
	r.got[res.ID()+"#"+res.Scope] = paths
}

// Every target gets its entry's ignore paths with its resource's defaults: a node entry
// named by its short name gets the nodes' defaults, a pods entry its own paths only, an
// entry with the defaults off and no paths none; check asks for history_skipped then.
func TestEveryTargetGetsItsEntrysIgnorePathsWithItsResourcesDefaults(t *testing.T) {
	cfg := &config.Config{Resources: []config.Resource{
		{Name: "no", History: config.History{DefaultIgnorePaths: true}},
		{Name: "pods", Namespaces: []string{"a", "b"}, History: config.History{IgnorePaths: []string{"/status/x"}, DefaultIgnorePaths: true}},
		{Name: "pods", Namespaces: []string{"c"}, History: config.History{DefaultIgnorePaths: true}},
		{Name: "nodes", LabelSelector: "x=y", History: config.History{DefaultIgnorePaths: false}},
	}}
	disc := staticDiscovery{lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "Node", ShortNames: []string{"no"}, Verbs: metav1.Verbs{"list", "watch"}},
			{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}}},
	}}
	targets, err := source.Resolve(disc, sourceSpecs(cfg))
	if err != nil {
		t.Fatal(err)
	}
	r := &ignoreRecorder{got: map[string][]string{}}
	setIgnorePaths(cfg, targets, []pipeline.Sink{r}, slog.New(slog.DiscardHandler))
	var withPaths []string
	for _, tg := range targets {
		paths, ok := r.got[tg.Resource.ID()+"#"+tg.Resource.Scope]
		switch {
		case tg.Spec == 0 && !slices.Equal(paths, []string{"/status/conditions/*/lastHeartbeatTime", "/metadata/resourceVersion"}),
			tg.Spec == 1 && !slices.Equal(paths, []string{"/status/x", "/metadata/resourceVersion"}),
			tg.Spec >= 2 && ok:
			t.Errorf("target of resources[%d] (%s, scope %q): paths %v (given: %v)", tg.Spec, tg.Resource.ID(), tg.Resource.Scope, paths, ok)
		}
		if ok {
			withPaths = append(withPaths, tg.Resource.ID())
		}
	}
	if len(withPaths) != 3 { // nodes, and pods in a and in b
		t.Errorf("targets given paths: %v, want 3", withPaths)
	}
	if !hasIgnorePaths(cfg, targets) || hasIgnorePaths(cfg, targets[3:]) {
		t.Error("hasIgnorePaths")
	}
}
