package source_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// Scopes decide from the cluster which held keys are gone, which left every scope, and
// which another scope streams: label selectors are evaluated locally, a field selector on
// another field than metadata.name/namespace by the apiserver, and namespaces no scope
// covers are owned by the sweeping target only. Many keys are read with one LIST.
func TestScopesTellGoneOutOfScopeAndAnotherScopesObjectsApart(t *testing.T) {
	e := newEnv(t, time.Minute)
	other := e.namespace()
	secrets := e.kube.Clientset().CoreV1().Secrets(e.ns)
	uid := map[string]string{}
	put := func(name string, labels map[string]string, typ corev1.SecretType) {
		t.Helper()
		s, err := secrets.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Type: typ}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid[name] = string(s.UID)
	}
	put("labelled", map[string]string{"app": "a"}, corev1.SecretTypeOpaque)
	put("typed", nil, "example.com/x")
	put("neither", nil, corev1.SecretTypeOpaque)
	put("recreated", nil, corev1.SecretTypeOpaque)

	targets, err := source.Resolve(e.clients.Discovery, []source.Spec{
		{Name: "secrets", Namespaces: []string{e.ns}, LabelSelector: "app=a"},
		{Name: "secrets", Namespaces: []string{e.ns}, FieldSelector: "type=example.com/x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	scopes := source.GroupScopes(e.clients, targets, nil)
	if scopes[0] != scopes[1] {
		t.Fatal("two targets of one resource got different Scopes")
	}
	key := func(name string) change.Key { return change.Key{Namespace: e.ns, Name: name} }
	held := map[change.Key]change.Entry{
		key("labelled"):                          {UID: uid["labelled"]},
		key("typed"):                             {UID: uid["typed"]},
		key("neither"):                           {UID: uid["neither"]},
		key("recreated"):                         {UID: "an-older-uid"},
		key("deleted"):                           {UID: "uid-deleted"},
		{Namespace: other, Name: "unconfigured"}: {UID: "uid-u"},
	}
	want := map[change.Key]string{
		key("neither"):                           change.ReasonOutOfScope,
		key("recreated"):                         change.ReasonGone,
		key("deleted"):                           change.ReasonGone,
		{Namespace: other, Name: "unconfigured"}: change.ReasonGone,
	}
	found, err := scopes[0].Lookup(e.ctx, targets[0], held)
	if err != nil {
		t.Fatal(err)
	}
	got := ends(found, held)
	if !maps.Equal(got, want) {
		t.Errorf("Lookup = %v, want %v", got, want)
	}

	// Many keys of one namespace: one paged LIST instead of one per key; same answer.
	for i := range 20 {
		name := fmt.Sprintf("bulk-%02d", i)
		put(name, nil, corev1.SecretTypeOpaque)
		held[key(name)] = change.Entry{UID: uid[name]}
		want[key(name)] = change.ReasonOutOfScope
	}
	if found, err = scopes[0].Lookup(e.ctx, targets[0], held); err != nil {
		t.Fatal(err)
	}
	got = ends(found, held)
	if !maps.Equal(got, want) {
		t.Errorf("Lookup of many keys = %v, want %v", got, want)
	}

	// A watch's DELETED: the same uid moved to a scope is kept; another uid under the key
	// means the deleted object is gone.
	if v, err := scopes[0].Verdict(e.ctx, key("typed"), uid["typed"]); err != nil || v != "" {
		t.Errorf("Verdict(typed) = %q, %v; want kept", v, err)
	}
	if v, err := scopes[0].Verdict(e.ctx, key("labelled"), "another-uid"); err != nil || v != change.ReasonGone {
		t.Errorf("Verdict(labelled, another uid) = %q, %v; want gone", v, err)
	}

	// A held uid replaced by another object in some scope (deleted and created again
	// around a relist's LIST): the lookup says which scope streams the new one, and the
	// pipeline tombstones the old uid as recreated (issue 24).
	for _, tc := range []struct {
		name   string
		target int
		want   change.Presence
	}{
		{"labelled", 0, change.Presence{UID: uid["labelled"], InScope: true, Here: true}},
		{"labelled", 1, change.Presence{UID: uid["labelled"], InScope: true}},
		{"typed", 1, change.Presence{UID: uid["typed"], InScope: true, Here: true}},
		{"typed", 0, change.Presence{UID: uid["typed"], InScope: true}},
	} {
		found, err := scopes[0].Lookup(e.ctx, targets[tc.target], map[change.Key]change.Entry{key(tc.name): {UID: "an-older-uid"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := found[key(tc.name)]; got != tc.want || got.End("an-older-uid") != change.ReasonRecreated {
			t.Errorf("Lookup(%s under another uid) from target %d = %+v (ends %q), want %+v (recreated)",
				tc.name, tc.target, got, got.End("an-older-uid"), tc.want)
		}
	}

	// The first target sweeps the namespaces no target covers; the second does not.
	if own := scopes[0].Owns(targets[0]); !own(change.Key{Namespace: other, Name: "x"}) || !own(key("x")) {
		t.Error("the sweeping target does not own an unconfigured namespace's keys")
	}
	if own := scopes[1].Owns(targets[1]); own(change.Key{Namespace: other, Name: "x"}) || !own(key("x")) {
		t.Error("the second target owns an unconfigured namespace's keys, or not its own")
	}
}

// ends is the reason each held key's object ends with, as the pipeline reads a lookup
// (change.Presence.End); keys whose object lives on in some scope are left out.
func ends(found map[change.Key]change.Presence, held map[change.Key]change.Entry) map[change.Key]string {
	out := map[change.Key]string{}
	for k, p := range found {
		if r := p.End(held[k].UID); r != "" {
			out[k] = r
		}
	}
	return out
}

// A watch under a selector turns a DELETED event into a tombstone only once the scopes
// have said whether the object was deleted or left the selector. When the stream is
// stopped (SIGTERM) while that lookup is under way, the event is nothing: not a delete
// recorded as observed. The next run watches again from the checkpoint, before it.
func TestADeletedEventWhoseScopeLookupIsCutShortByShutdownEmitsNothing(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.configMap("", "leaving", map[string]string{"app": "a"})
	targets, err := source.Resolve(e.clients.Discovery, []source.Spec{
		{Name: "configmaps", Namespaces: []string{e.ns}, LabelSelector: "app=a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scopes' lookup (a LIST narrowed to the name) hangs until its request ends.
	lookups := make(chan struct{}, 1)
	cfg := rest.CopyConfig(e.kube.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasPrefix(req.URL.Query().Get("fieldSelector"), "metadata.name=") {
				select {
				case lookups <- struct{}{}:
				default:
				}
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return rt.RoundTrip(req)
		})
	})
	s := e.stream(targets[0])
	s.Scopes = source.GroupScopes(e.clientsFor(cfg, &requestLog{}), targets, nil)[0]

	r, cancel := e.start(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	if err := e.kube.Clientset().CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lookups:
	case <-e.ctx.Done():
		t.Fatalf("the DELETED event's scope lookup never started; events: %s", describe(r.snapshot()))
	}
	cancel()
	if err := r.wait(e); err != nil {
		t.Errorf("Run returned %v after its context was cancelled, want nil", err)
	}
	if evs := r.snapshot(); has(evs, change.OpDelete, "leaving") {
		t.Errorf("a DELETED whose lookup the shutdown cut short was emitted as a delete; events: %s", describe(evs))
	}
}
