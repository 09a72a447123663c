package history

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

func TestShownVersionsPrintAHeaderAndADiffEachAndTheirPatchesRebuildEveryVersion(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	v1 := `{"metadata":{"name":"web","resourceVersion":"11"},"spec":{"replicas":1}}`
	v2 := `{"metadata":{"name":"web","resourceVersion":"12"},"spec":{"replicas":2}}`
	versions := []store.Revision{
		{ID: 1, ObservedAt: at, Op: change.OpCreate, RV: 11, UID: "u1", ChangedBy: "kubectl/Update", Object: json.RawMessage(v1)},
		{ID: 2, ObservedAt: at.Add(time.Second), Op: change.OpUpdate, RV: 12, UID: "u1", Object: json.RawMessage(v2), Previous: json.RawMessage(v1)},
		{ID: 3, ObservedAt: at.Add(2 * time.Second), Op: change.OpDelete, RV: 13, UID: "u1", Inferred: true, Reason: "relist"},
	}
	shown, err := Show(versions)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := Print(&text, "configmaps default/web: 3 versions", shown, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"configmaps default/web: 3 versions\n\n#1  2026-01-02T03:04:05.123456Z  create  rv 11  by kubectl/Update\n",
		"+  replicas: 1\n",
		"#2  2026-01-02T03:04:06.123456Z  update  rv 12\n",
		"-  replicas: 1\n+  replicas: 2\n",
		"#3  2026-01-02T03:04:07.123456Z  delete  rv 13  inferred (relist)\n(no object: kube-cdc inferred this delete",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "resourceVersion") {
		t.Errorf("the diff shows metadata.resourceVersion, which the header has:\n%s", text.String())
	}

	var out bytes.Buffer
	if err := Print(&out, "ignored", shown, "json"); err != nil {
		t.Fatal(err)
	}
	var decoded []struct {
		Patch []PatchOp `json:"patch"`
	}
	if err := json.Unmarshal(out.Bytes(), &decoded); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(decoded) != 3 || decoded[2].Patch != nil {
		t.Fatalf("want 3 versions, the inferred delete without a patch:\n%s", out.String())
	}
	doc := "{}"
	for i, want := range []string{v1, v2} {
		if doc = applyPatch(t, doc, decoded[i].Patch); !sameJSON(t, doc, want) {
			t.Errorf("the patches up to #%d rebuild %s, want %s", i+1, doc, want)
		}
	}
}

func TestAVersionWithAnActorSaysWhoMadeItHowItWasJoinedAndTheFieldManager(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	obj := json.RawMessage(`{"metadata":{"name":"web"}}`)
	shown, err := Show([]store.Revision{
		{ID: 1, ObservedAt: at, Op: change.OpCreate, RV: 11, ChangedBy: "kubectl-create/Update", Object: obj,
			Actor: &change.Actor{Username: "dev-a@example.com", UserAgent: "kubectl/v1.36.5 (linux/amd64) kubernetes/0123abc", Match: "exact", AuditID: "a1", Verb: "create"}},
		{ID: 2, ObservedAt: at, Op: change.OpUpdate, RV: 12, Object: obj, Previous: obj,
			Actor: &change.Actor{Username: "system:serviceaccount:ci:deployer", Impersonator: "dev-b@example.com", UserAgent: "deployer/1.0",
				Match: "nearest", Distance: 1234 * time.Millisecond, Verb: "patch"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := Print(&text, "t", shown, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"create  rv 11  by dev-a@example.com (kubectl/v1.36.5)  manager kubectl-create/Update\n",
		"update  rv 12  by system:serviceaccount:ci:deployer (deployer/1.0, impersonated by dev-b@example.com)  nearest ±1.234s\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	var out bytes.Buffer
	if err := Print(&out, "t", shown, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"actor": {`) || !strings.Contains(out.String(), `"match": "nearest"`) ||
		!strings.Contains(out.String(), `"impersonator": "dev-b@example.com"`) {
		t.Errorf("-o json lacks the actors:\n%s", out.String())
	}
}
