package source_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/sjson"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// Faults (design §1.8): what time may heal — RBAC revoked, a CRD deleted or not created
// yet, an RV that is no integer — ends a stream with a source.Fault naming the reason,
// which the pipeline turns into a degraded resource rather than the end of kube-cdc.

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// thingCRD is a namespaced CRD "gadgets" of group, served in the given versions (the
// first is the storage version).
func thingCRD(group string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
		})
	}
	return crd
}

// group is a CRD group of the test's own.
func (e *env) group() string { return e.ns + ".faults.kube-cdc.io" }

func (e *env) createCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	e.t.Helper()
	if err := e.kube.CreateCRD(e.ctx, crd); err != nil {
		e.t.Fatal(err)
	}
}

// deleteCRD deletes the CRD and waits until it is gone (its objects deleted with it).
func (e *env) deleteCRD(name string) {
	e.t.Helper()
	crds := e.kube.Dynamic().Resource(crdGVR)
	if err := crds.Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("CRD "+name+" gone", func() bool {
		_, err := crds.Get(e.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func (e *env) gadget(group, version, name string) {
	e.t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: "gadgets"}
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/" + version, "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
	}}
	if _, err := e.kube.Dynamic().Resource(gvr).Namespace(e.ns).Create(e.ctx, o, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// faultOf is the Fault err carries, or fails the test.
func faultOf(t *testing.T, err error) *source.Fault {
	t.Helper()
	var f *source.Fault
	if !errors.As(err, &f) {
		t.Fatalf("Run returned %v, want a source.Fault", err)
	}
	return f
}

func TestAStreamWhoseCRDIsDeletedEndsWithANotServedFaultInsteadOfRetryingForever(t *testing.T) {
	e := newEnv(t, time.Minute)
	group := e.group()
	e.createCRD(thingCRD(group, "v1"))
	e.gadget(group, "v1", "a")
	s := e.stream(e.target(source.Spec{Name: "gadgets." + group, Namespaces: []string{e.ns}}))
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))

	e.deleteCRD("gadgets." + group)
	err := r.wait(e)
	f := faultOf(t, err)
	if f.Reason != source.ReasonNotServed || f.Resource != "gadgets."+group || !strings.Contains(f.Error(), "does not serve it") {
		t.Errorf("fault %q (reason %q, resource %q), want %q of gadgets.%s", f, f.Reason, f.Resource, source.ReasonNotServed, group)
	}
	if !retry.IsTerminal(err) {
		t.Error("the fault is not marked retry.Terminal: a caller that knows no faults would retry it at once")
	}
}

func TestAWatchRefusedAfterRBACIsRevokedEndsWithAForbiddenFault(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.configMap("", "a", nil)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}
	cfg, _, err := e.kube.RestrictedUser(e.ctx, "fault-revoked", rules)
	if err != nil {
		t.Fatal(err)
	}
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(cfg, e.requests)
	// The apiserver does not ask RBAC again for an open watch: the revocation shows when
	// the watch is re-opened, here after 2 s.
	s.WatchTimeout = 2 * time.Second
	accepted := make(chan struct{}, 100)
	s.NotifyAccepted(func() { accepted <- struct{}{} })
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	select {
	case <-accepted:
	case <-e.ctx.Done():
		t.Fatal("the stream did not tell that the server accepted its watch")
	}
	if _, _, err := e.kube.RestrictedUser(e.ctx, "fault-revoked", nil); err != nil {
		t.Fatal(err)
	}
	f := faultOf(t, r.wait(e))
	if f.Reason != source.ReasonForbidden || !strings.Contains(f.Error(), "resource configmaps: watch") {
		t.Errorf("fault %q with reason %q, want a forbidden watch of configmaps", f, f.Reason)
	}
}

func TestAListResourceVersionThatIsNoIntegerIsAFaultOfTheResource(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.configMap("", "a", nil)
	cfg := rest.CopyConfig(e.kube.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") != "" || !strings.HasSuffix(req.URL.Path, "/configmaps") {
				return resp, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			body, _ = sjson.SetBytes(body, "metadata.resourceVersion", "not-a-number")
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header.Del("Content-Length")
			return resp, nil
		})
	})
	clients, err := source.NewClients(cfg, source.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := e.stream(e.configMaps())
	s.Clients = clients
	f := faultOf(t, e.run(s, 0, nil).wait(e))
	if f.Reason != source.ReasonInvalidRV || !strings.Contains(f.Error(), "not-a-number") {
		t.Errorf("fault %q with reason %q, want %q naming the RV", f, f.Reason, source.ReasonInvalidRV)
	}
}

func TestANameACRDCouldServeWaitsForItAndIsResolvedOnceItIsCreated(t *testing.T) {
	e := newEnv(t, time.Minute)
	group := e.group()
	specs := []source.Spec{{Name: "configmaps", Namespaces: []string{e.ns}}, {Name: "gadgets." + group, Namespaces: []string{e.ns}}}
	if _, err := source.Resolve(e.clients.Discovery, specs); err == nil || !strings.Contains(err.Error(), "unknown resource") {
		t.Errorf("Resolve = %v, want unknown resource (check and status keep failing it)", err)
	}
	targets, err := source.ResolveOrWait(e.clients.Discovery, specs)
	if err != nil {
		t.Fatal(err)
	}
	if targets[0].Waiting || !targets[1].Waiting || targets[1].Resource.ID() != "gadgets."+group || targets[1].Resource.Scope == "" {
		t.Fatalf("targets %+v, want configmaps resolved and gadgets waiting, with its scope", targets)
	}
	res := source.NewResolution(e.clients, targets, nil).Feeds(source.Stream{})
	if got, err := res[0].Resolve(e.ctx); err != nil || got != targets[0].Resource {
		t.Errorf("Resolve(configmaps) = %+v, %v; want the resolution made at start", got, err)
	}
	_, err = res[1].Resolve(e.ctx)
	if f := faultOf(t, err); f.Reason != source.ReasonNotServed {
		t.Errorf("Resolve(gadgets) before its CRD exists: %v, want reason %q", f, source.ReasonNotServed)
	}
	// A stream of the waiting target fails the same way, without a request.
	s := e.stream(targets[1])
	if f := faultOf(t, e.run(s, 0, nil).wait(e)); f.Reason != source.ReasonNotServed {
		t.Errorf("stream of a waiting target: %v, want reason %q", f, source.ReasonNotServed)
	}

	e.createCRD(thingCRD(group, "v1"))
	e.gadget(group, "v1", "g")
	got, err := res[1].Resolve(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := change.Resource{Group: group, Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true, Scope: targets[1].Resource.Scope}
	if got != want {
		t.Errorf("Resolve(gadgets) after its CRD was created = %+v, want %+v", got, want)
	}
	tg, scopes := res[1].Target()
	if tg.Waiting || tg.Resource != want {
		t.Errorf("Target(gadgets) = %+v, want it resolved", tg)
	}
	// The lookups of the reconcile diff read through the version served now.
	verdicts, err := scopes.Lookup(e.ctx, tg, map[change.Key]change.Entry{{Namespace: e.ns, Name: "gone"}: {UID: "x"}})
	if err != nil || verdicts[change.Key{Namespace: e.ns, Name: "gone"}].End("x") != change.ReasonGone {
		t.Errorf("lookup through the resolved Scopes: %v, %v; want gone", verdicts, err)
	}
	r := e.run(e.stream(tg), 0, nil)
	evs := r.waitFor(e, "the relist", relistEnded(1))
	if got := names(evs, change.Listed); len(got) != 1 || got[0] != "g" {
		t.Errorf("listed %v, want g", got)
	}
}

func TestACRDRecreatedWithAnotherVersionIsResolvedInThatVersion(t *testing.T) {
	e := newEnv(t, time.Minute)
	group := e.group()
	e.createCRD(thingCRD(group, "v1"))
	targets, err := source.ResolveOrWait(e.clients.Discovery, []source.Spec{{Name: "gadgets." + group}})
	if err != nil {
		t.Fatal(err)
	}
	res := source.NewResolution(e.clients, targets, nil).Feeds(source.Stream{})
	if got, err := res[0].Resolve(e.ctx); err != nil || got.Version != "v1" {
		t.Fatalf("Resolve = %+v, %v; want v1", got, err)
	}
	e.deleteCRD("gadgets." + group)
	e.eventually("discovery to drop the group", func() bool {
		_, err := res[0].Resolve(e.ctx)
		var f *source.Fault
		return errors.As(err, &f) && f.Reason == source.ReasonNotServed
	})
	e.createCRD(thingCRD(group, "v2beta1"))
	got, err := res[0].Resolve(e.ctx)
	if err != nil || got.Version != "v2beta1" || got.Kind != "Gadget" {
		t.Errorf("Resolve after the CRD came back in v2beta1 = %+v, %v", got, err)
	}
}

func TestANameNoCRDCouldServeIsStillAnError(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	for name, want := range map[string]string{
		"confgimaps":                    "did you mean configmaps",             // a bare name says no group to wait for
		"deploymnets.apps":              `unknown resource "deploymnets.apps"`, // no CRD's group lacks a dot
		"v1/confgimaps":                 `unknown resource "v1/confgimaps"`,    // the core group is the apiserver's
		"gadget_s.faults.kube-cdc.io":   "plural.group",                        // no plural has an underscore
		"faults.kube-cdc.io/v1/gadgets": "",                                    // waits
	} {
		_, err := source.ResolveOrWait(e.clients.Discovery, []source.Spec{{Name: name}})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want it to wait", name, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error containing %q", name, err, want)
		}
	}
}

func TestTheCRDWatchTellsWhenACRDOfAConfiguredResourceIsCreated(t *testing.T) {
	e := newEnv(t, time.Minute)
	group := e.group()
	w := &source.CRDWatch{Clients: e.clients, Resources: []change.Resource{{Group: group, Resource: "gadgets"}},
		Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
	changed := w.Changed()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// The LIST it starts with tells once (a CRD may have come since the resolution).
	select {
	case <-changed:
	case <-e.ctx.Done():
		t.Fatal("the CRD watch did not tell after its first LIST")
	}
	changed = w.Changed()
	e.createCRD(thingCRD(group, "v1"))
	select {
	case <-changed:
	case <-e.ctx.Done():
		t.Fatal("the CRD watch did not tell of the CRD created")
	}
}
