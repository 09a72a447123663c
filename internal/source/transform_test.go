package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

var (
	configMapType = typeOf(change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap"})
	secretType    = typeOf(change.Resource{Version: "v1", Resource: "secrets", Kind: "Secret"})
	testKey       = []byte("0123456789abcdef-test-key")
)

func TestTransformDropsManagedFieldsAndRecordsTheNewestManager(t *testing.T) {
	in := []byte(`{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"42","labels":{"app":"x"},
	"managedFields":[{"manager":"kubectl","operation":"Apply","time":"2026-01-01T00:00:00Z"},
	                 {"manager":"controller","operation":"Update","time":"2026-01-02T00:00:00Z"}]},"data":{"k":"v"}}`)
	out, m, err := (&Transform{}).apply(in, configMapType)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "metadata.managedFields").Exists() {
		t.Errorf("managedFields kept: %s", out)
	}
	if m.changedBy != "controller/Update" || m.name != "a" || m.namespace != "ns" || m.uid != "u1" || m.rv != "42" {
		t.Errorf("meta = %+v", m)
	}
	if string(m.labels) != `{"app":"x"}` {
		t.Errorf("labels = %s", m.labels)
	}
	if gjson.GetBytes(out, "data.k").Str != "v" {
		t.Errorf("data of a non-secret changed: %s", out)
	}
}

// A LIST's items lack apiVersion and kind; a watch event's object has them. Either way the
// transformed object has both, once, and is valid JSON.
func TestTransformGivesEveryObjectItsAPIVersionAndKind(t *testing.T) {
	deployments := typeOf(change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment"})
	mf := `,"managedFields":[{"manager":"m","operation":"Update","time":"2026-01-01T00:00:00Z"}]`
	for _, tc := range []struct {
		name, in     string
		typ          objectType
		version, knd string
	}{
		{"list item", `{"metadata":{"name":"a"},"data":{"k":"v"}}`, configMapType, "v1", "ConfigMap"},
		{"list item with managedFields", `{"metadata":{"name":"a"` + mf + `},"data":{"k":"v"}}`, configMapType, "v1", "ConfigMap"},
		{"list item of a group", ` { "metadata":{"name":"a"` + mf + `},"spec":{}}`, deployments, "apps/v1", "Deployment"},
		{"watch object", `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"` + mf + `}}`, configMapType, "v1", "ConfigMap"},
		{"only kind missing", `{"apiVersion":"v1","metadata":{"name":"a"}}`, configMapType, "v1", "ConfigMap"},
		{"only apiVersion missing", `{"kind":"ConfigMap","metadata":{"name":"a"}}`, configMapType, "v1", "ConfigMap"},
		{"a kind written by the server wins", `{"metadata":{"name":"a"},"kind":"Other","apiVersion":"x/v2"}`, configMapType, "x/v2", "Other"},
		{"empty object", `{ }`, configMapType, "v1", "ConfigMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := (&Transform{}).apply([]byte(tc.in), tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(out, &top); err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(out, "apiVersion").Str; got != tc.version {
				t.Errorf("apiVersion %q, want %q: %s", got, tc.version, out)
			}
			if got := gjson.GetBytes(out, "kind").Str; got != tc.knd {
				t.Errorf("kind %q, want %q: %s", got, tc.knd, out)
			}
			if n := strings.Count(string(out), `"kind":`); n != 1 {
				t.Errorf("%d kind members: %s", n, out)
			}
			if gjson.GetBytes(out, "metadata.managedFields").Exists() {
				t.Errorf("managedFields kept: %s", out)
			}
		})
	}
}

func TestTransformRedactsSecretValuesAndTheLastAppliedAnnotation(t *testing.T) {
	in := []byte(`{"metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"aHVudGVyMg==\"}}","keep":"me"}},
	"data":{"password":"aHVudGVyMg==","tls.crt":"Y2VydA=="},"stringData":{"token":"plain"}}`)
	tr := &Transform{RedactSecrets: true, DigestKey: testKey}
	out, _, err := tr.apply(in, secretType)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"aHVudGVyMg==", "Y2VydA==", "plain"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("secret value %q leaked: %s", secret, out)
		}
	}
	for _, p := range []string{"data.password", `data.tls\.crt`, "stringData.token", lastAppliedPath} {
		if v := gjson.GetBytes(out, p).Str; !strings.HasPrefix(v, DigestPrefix) || len(v) != len(DigestPrefix)+64 {
			t.Errorf("%s = %q, want an hmac-sha256: digest", p, v)
		}
	}
	// The digest is HMAC-SHA256 under the key of the value as the object holds it, so a
	// holder of the key can check a candidate and nobody else can.
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte("aHVudGVyMg=="))
	if got, want := gjson.GetBytes(out, "data.password").Str, DigestPrefix+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("data.password = %q, want %q", got, want)
	}
	if gjson.GetBytes(out, "metadata.annotations.keep").Str != "me" {
		t.Errorf("unrelated annotation lost: %s", out)
	}
	changed := []byte(strings.Replace(string(in), `"password":"aHVudGVyMg=="`, `"password":"b3RoZXI="`, 1))
	out2, _, _ := tr.apply(changed, secretType)
	if gjson.GetBytes(out, "data.password").Str == gjson.GetBytes(out2, "data.password").Str {
		t.Error("a changed secret value kept the same digest")
	}
}

func TestSecretDigestsAreKeyed(t *testing.T) {
	const value = "YWRtaW4xMjM=" // base64("admin123"), the weak value an attacker would try
	in := []byte(`{"metadata":{"name":"s"},"data":{"password":"` + value + `"}}`)
	redact := func(key string) string {
		t.Helper()
		out, _, err := (&Transform{RedactSecrets: true, DigestKey: []byte(key)}).apply(in, secretType)
		if err != nil {
			t.Fatal(err)
		}
		return gjson.GetBytes(out, "data.password").Str
	}
	a, again, other := redact("key-one-0123456789"), redact("key-one-0123456789"), redact("key-two-0123456789")
	if a != again {
		t.Errorf("same value and key gave %q then %q: digests must be stable across restarts and replicas", a, again)
	}
	if a == other {
		t.Errorf("two keys gave the same digest %q", a)
	}
	unkeyed := sha256.Sum256([]byte(value))
	for _, d := range []string{a, other} {
		if strings.Contains(d, hex.EncodeToString(unkeyed[:])) || strings.HasPrefix(d, "sha256:") {
			t.Errorf("digest %q is the unkeyed sha256 of the value, which a dictionary reverses", d)
		}
	}
}

func TestASecretIsNeverRedactedWithoutAKey(t *testing.T) {
	in := []byte(`{"metadata":{"name":"s"},"data":{"password":"YWRtaW4xMjM="}}`)
	out, _, err := (&Transform{RedactSecrets: true}).apply(in, secretType)
	if !errors.Is(err, errNoDigestKey) || out != nil {
		t.Errorf("apply without a key = %s, %v; want no object and errNoDigestKey", out, err)
	}
	if !strings.Contains(errNoDigestKey.Error(), "KUBE_CDC_TRANSFORMS__DIGESTKEY") {
		t.Errorf("%q does not say how to set the key", errNoDigestKey)
	}
	// Without redaction a key is not needed, and other resources never need one.
	if _, _, err := (&Transform{}).apply(in, secretType); err != nil {
		t.Errorf("redactSecrets off: %v", err)
	}
	if _, _, err := (&Transform{RedactSecrets: true}).apply(in, configMapType); err != nil {
		t.Errorf("a configmap: %v", err)
	}
}

func TestTransformDropsConfiguredPaths(t *testing.T) {
	in := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","annotations":{"x":"1","y":"2"}},"status":{"phase":"Running"}}`)
	out, _, err := (&Transform{Drop: []string{"status", "metadata.annotations.x", "spec.missing"}}).apply(in, configMapType)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","annotations":{"y":"2"}}}` {
		t.Errorf("got %s", got)
	}
}
