package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// store.Why with Objects (the web UI's /why page) reads why()'s rows, each with the
// version's object and the one it changed as object_versions() gives them: the edit of
// a ConfigMap in the window is compared with its version from before the window, and the
// rows are the same as without Objects.
func TestWhyWithObjectsGivesEachChangeItsObjectAndTheVersionBeforeItEvenFromBeforeTheWindow(t *testing.T) {
	s, _ := newSink(t, Options{})
	configMaps := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	pods := change.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}
	cfg := func(rv change.RV, op change.Op, mode string, at time.Time, by string) change.Change {
		return change.Change{Cluster: cluster, Resource: configMaps, Key: change.Key{Namespace: "shop", Name: "cfg"}, UID: "uid-cfg", RV: rv,
			Op: op, Labels: json.RawMessage(`{}`), ChangedBy: by, ObservedAt: at,
			Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"shop","uid":"uid-cfg"},"data":{"mode":"` + mode + `"}}`)}
	}
	now := time.Now()
	// Created two hours ago, outside the window; edited twice in it.
	write(t, s, change.Batch{Resource: configMaps, Changes: []change.Change{cfg(10, change.OpCreate, "fast", now.Add(-2*time.Hour), "")}, Checkpoint: 10})
	write(t, s, change.Batch{Resource: configMaps, Changes: []change.Change{cfg(20, change.OpUpdate, "broken", now.Add(-time.Minute), "kubectl-edit/Update")}, Checkpoint: 20})
	write(t, s, change.Batch{Resource: configMaps, Changes: []change.Change{cfg(21, change.OpUpdate, "worse", now, "kubectl-edit/Update")}, Checkpoint: 21})
	pod := change.Change{Cluster: cluster, Resource: pods, Key: change.Key{Namespace: "shop", Name: "web"}, UID: "uid-web", RV: 22,
		Op: change.OpCreate, Labels: json.RawMessage(`{}`), ObservedAt: now,
		Object: json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop","uid":"uid-web"},
			"spec":{"containers":[{"name":"app","envFrom":[{"configMapRef":{"name":"cfg"}}]}]}}`)}
	write(t, s, change.Batch{Resource: pods, Changes: []change.Change{pod}, Checkpoint: 22})

	r := readerOf(t, s)
	q := store.WhyQuery{Resource: "pods", Namespace: "shop", Name: "web", At: now.Add(time.Second)}
	plain, err := r.Why(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	q.Objects = true
	rows, err := r.Why(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	mode := func(doc json.RawMessage) string {
		if doc == nil {
			return "<nil>"
		}
		var o struct{ Data map[string]string }
		if err := json.Unmarshal(doc, &o); err != nil {
			return "undecodable: " + err.Error()
		}
		return o.Data["mode"]
	}
	var got, gotPlain []string
	for _, w := range rows {
		line := fmt.Sprintf("%s %s %s %d", w.Relation, w.Key.Name, w.Op, w.RV)
		got = append(got, line)
		if w.Relation == "configmap" {
			got = append(got, fmt.Sprintf("  %s -> %s", mode(w.Previous), mode(w.Object)))
		}
		if w.Relation == "self" && (w.Object == nil || w.Previous != nil) {
			t.Errorf("the pod's create: object %s, previous %s; want its object and none before it", w.Object, w.Previous)
		}
	}
	for _, w := range plain {
		gotPlain = append(gotPlain, fmt.Sprintf("%s %s %s %d", w.Relation, w.Key.Name, w.Op, w.RV))
		if w.Object != nil || w.Previous != nil {
			t.Errorf("without Objects, %s %s carries objects", w.Key.Name, w.Op)
		}
	}
	want := []string{"configmap cfg update 20", "  fast -> broken", "configmap cfg update 21", "  broken -> worse", "self web create 22"}
	if !slices.Equal(got, want) {
		t.Errorf("store.Why(pods shop/web, Objects) =\n  %q\nwant\n  %q", got, want)
	}
	if want := []string{"configmap cfg update 20", "configmap cfg update 21", "self web create 22"}; !slices.Equal(gotPlain, want) {
		t.Errorf("store.Why(pods shop/web) = %q, want %q: the same rows as with Objects", gotPlain, want)
	}
}
