package source_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// The objects of the change log (docs/contract.md, Change log) as the real apiserver
// sends them: a LIST's items omit apiVersion and kind (a CRD's do not), a watch event's
// object has both, and kube-cdc gives every object both.
func TestListedObjectsCarryTheAPIVersionAndKindTheWatchDelivers(t *testing.T) {
	e := newEnv(t, time.Minute)
	if err := e.kube.CreateCRD(e.ctx, gadgetCRD()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gadgets := e.kube.Dynamic().Resource(schema.GroupVersionResource{Group: "source.kube-cdc.io", Version: "v1", Resource: "gadgets"}).Namespace(e.ns)
	roles := e.kube.Clientset().RbacV1().Roles(e.ns)
	e.configMap("", "cm", nil)
	if _, err := roles.Create(e.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "role"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.kube-cdc.io/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "gadget"}, "spec": map[string]any{"size": int64(1)},
	}}
	if _, err := gadgets.Create(e.ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		resource, name, apiVersion, kind string
		update                           func() error
	}{
		{"configmaps", "cm", "v1", "ConfigMap", func() error { e.touch("", "cm", "1"); return nil }},
		{"roles.rbac.authorization.k8s.io", "role", "rbac.authorization.k8s.io/v1", "Role", func() error {
			r, err := roles.Get(e.ctx, "role", metav1.GetOptions{})
			if err == nil {
				r.Labels = map[string]string{"touched": "yes"}
				_, err = roles.Update(e.ctx, r, metav1.UpdateOptions{})
			}
			return err
		}},
		{"gadgets.source.kube-cdc.io", "gadget", "source.kube-cdc.io/v1", "Gadget", func() error {
			u, err := gadgets.Get(e.ctx, "gadget", metav1.GetOptions{})
			if err == nil {
				u.Object["spec"] = map[string]any{"size": int64(2)}
				_, err = gadgets.Update(e.ctx, u, metav1.UpdateOptions{})
			}
			return err
		}},
	} {
		r := e.run(e.stream(e.target(source.Spec{Name: tc.resource, Namespaces: []string{e.ns}})), 0, nil)
		r.waitFor(e, "the relist", relistEnded(1))
		if err := tc.update(); err != nil {
			t.Fatalf("update %s: %v", tc.resource, err)
		}
		evs := r.waitFor(e, tc.resource+" update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, tc.name) })
		listed, _ := last(evs, change.Listed)
		watched, _ := last(evs, change.Changed)
		for _, ev := range []change.Event{listed, watched} {
			obj := ev.Change.Object
			got := gjson.GetManyBytes(obj, "apiVersion", "kind")
			if got[0].Str != tc.apiVersion || got[1].Str != tc.kind {
				t.Errorf("%s %s: apiVersion %q kind %q, want %q %q: %s", ev.Type, ev.Change.Key, got[0].Str, got[1].Str, tc.apiVersion, tc.kind, obj)
			}
			if n := strings.Count(string(obj), `"kind":`); n != 1 || !gjson.ValidBytes(obj) {
				t.Errorf("%s %s: %d kind members or invalid JSON: %s", ev.Type, ev.Change.Key, n, obj)
			}
		}
	}
}

func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.source.kube-cdc.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "source.kube-cdc.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// A Secret leaves the source with keyed digests: HMAC-SHA256 under the configured key,
// never the value and never the unkeyed sha256 a dictionary of weak values reverses.
func TestASecretIsStreamedWithKeyedDigests(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	key := []byte("source-test-digest-key-0123456789")
	secrets := e.kube.Clientset().CoreV1().Secrets(e.ns)
	if _, err := secrets.Create(e.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"password":"admin123"}}`,
		}},
		Data: map[string][]byte{"password": []byte("admin123")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := e.stream(e.target(source.Spec{Name: "secrets", Namespaces: []string{e.ns}}))
	s.Transform = &source.Transform{RedactSecrets: true, DigestKey: key}
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	sec, err := secrets.Get(e.ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("admin124")
	if _, err := secrets.Update(e.ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := r.waitFor(e, "the update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "db") })
	listed, _ := last(evs, change.Listed)
	watched, _ := last(evs, change.Changed)

	hmacOf := func(v string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(v))
		return source.DigestPrefix + hex.EncodeToString(m.Sum(nil))
	}
	for _, tc := range []struct {
		ev    change.Event
		value string
	}{{listed, "admin123"}, {watched, "admin124"}} {
		obj := string(tc.ev.Change.Object)
		b64 := base64.StdEncoding.EncodeToString([]byte(tc.value))
		if got, want := gjson.Get(obj, "data.password").Str, hmacOf(b64); got != want {
			t.Errorf("%s: data.password = %q, want HMAC-SHA256(key, %q) = %q", tc.ev.Type, got, b64, want)
		}
		unkeyed := sha256.Sum256([]byte(b64))
		for _, leak := range []string{tc.value, b64, hex.EncodeToString(unkeyed[:]), "sha256:"} {
			if strings.Contains(strings.ReplaceAll(obj, source.DigestPrefix, ""), leak) {
				t.Errorf("%s: %q reached the change: %s", tc.ev.Type, leak, obj)
			}
		}
		annotation := gjson.Get(obj, `metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration`).Str
		if !strings.HasPrefix(annotation, source.DigestPrefix) {
			t.Errorf("%s: last-applied annotation %q, want a keyed digest", tc.ev.Type, annotation)
		}
		if k := gjson.GetMany(obj, "apiVersion", "kind"); k[0].Str != "v1" || k[1].Str != "Secret" {
			t.Errorf("%s: apiVersion %q kind %q, want v1 Secret", tc.ev.Type, k[0].Str, k[1].Str)
		}
	}
}

// Without a key the stream of a Secret resource stops before reading a single Secret: a
// Secret is never digested unkeyed, nor streamed in clear.
func TestASecretStreamWithoutADigestKeyFailsBeforeListing(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	s := e.stream(e.target(source.Spec{Name: "secrets", Namespaces: []string{e.ns}}))
	s.Transform = &source.Transform{RedactSecrets: true}
	err := e.run(s, 0, nil).wait(e)
	if err == nil || !retry.IsTerminal(err) || !strings.Contains(err.Error(), "KUBE_CDC_TRANSFORMS__DIGESTKEY") {
		t.Errorf("Run = %v, want a terminal error naming the digest key", err)
	}
	if n := len(e.requests.lists("secrets")) + len(e.requests.watches("secrets")); n != 0 {
		t.Errorf("%d requests for secrets, want none", n)
	}
}
