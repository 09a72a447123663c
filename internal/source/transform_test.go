package source

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTransformDropsManagedFieldsAndRecordsTheNewestManager(t *testing.T) {
	in := []byte(`{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"42","labels":{"app":"x"},
	"managedFields":[{"manager":"kubectl","operation":"Apply","time":"2026-01-01T00:00:00Z"},
	                 {"manager":"controller","operation":"Update","time":"2026-01-02T00:00:00Z"}]},"data":{"k":"v"}}`)
	out, m, err := (&Transform{}).apply(in, false)
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

func TestTransformRedactsSecretValuesAndTheLastAppliedAnnotation(t *testing.T) {
	in := []byte(`{"metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"aHVudGVyMg==\"}}","keep":"me"}},
	"data":{"password":"aHVudGVyMg==","tls.crt":"Y2VydA=="},"stringData":{"token":"plain"}}`)
	out, _, err := (&Transform{RedactSecrets: true}).apply(in, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"aHVudGVyMg==", "Y2VydA==", "plain"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("secret value %q leaked: %s", secret, out)
		}
	}
	for _, p := range []string{"data.password", `data.tls\.crt`, "stringData.token", lastAppliedPath} {
		if v := gjson.GetBytes(out, p).Str; !strings.HasPrefix(v, "sha256:") {
			t.Errorf("%s = %q, want a sha256: digest", p, v)
		}
	}
	if gjson.GetBytes(out, "metadata.annotations.keep").Str != "me" {
		t.Errorf("unrelated annotation lost: %s", out)
	}
	changed := []byte(strings.Replace(string(in), `"password":"aHVudGVyMg=="`, `"password":"b3RoZXI="`, 1))
	out2, _, _ := (&Transform{RedactSecrets: true}).apply(changed, true)
	if gjson.GetBytes(out, "data.password").Str == gjson.GetBytes(out2, "data.password").Str {
		t.Error("a changed secret value kept the same digest")
	}
}

func TestTransformDropsConfiguredPaths(t *testing.T) {
	in := []byte(`{"metadata":{"name":"a","annotations":{"x":"1","y":"2"}},"status":{"phase":"Running"}}`)
	out, _, err := (&Transform{Drop: []string{"status", "metadata.annotations.x", "spec.missing"}}).apply(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != `{"metadata":{"name":"a","annotations":{"y":"2"}}}` {
		t.Errorf("got %s", got)
	}
}
