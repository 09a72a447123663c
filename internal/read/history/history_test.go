package history

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func TestJSONPatchRebuildsTheNewVersionAndNamesEachChangedLeaf(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		paths          []string
	}{
		{"equal", `{"a":1,"b":[1,{"c":2}]}`, `{"b":[1,{"c":2}],"a":1}`, nil},
		{"numbers compare by value", `{"a":1.0}`, `{"a":1}`, nil},
		{"a leaf in a nested object", `{"spec":{"replicas":1,"x":"y"}}`, `{"spec":{"replicas":2,"x":"y"}}`, []string{"/spec/replicas"}},
		{"keys added and removed, escaped",
			`{"metadata":{"labels":{"app.kubernetes.io/name":"a","gone":"x"}}}`,
			`{"metadata":{"labels":{"app.kubernetes.io/name":"b","t~x":"y"}}}`,
			[]string{"/metadata/labels/app.kubernetes.io~1name", "/metadata/labels/gone", "/metadata/labels/t~0x"}},
		{"an array element walked into", `{"c":[{"image":"a"},{"image":"b"}]}`, `{"c":[{"image":"a"},{"image":"c"}]}`, []string{"/c/1/image"}},
		{"an array grows at the end", `{"c":[1]}`, `{"c":[1,2,3]}`, []string{"/c/1", "/c/2"}},
		{"an array shrinks from the end", `{"c":[1,2,3]}`, `{"c":[0]}`, []string{"/c/0", "/c/2", "/c/1"}},
		{"a value changes type", `{"a":{"b":1},"n":null}`, `{"a":[1],"n":0}`, []string{"/a", "/n"}},
		{"null added", `{}`, `{"a":null}`, []string{"/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := JSONPatch(mustDecode(t, tc.from), mustDecode(t, tc.to))
			var paths []string
			for _, op := range ops {
				paths = append(paths, op.Path)
			}
			if !reflect.DeepEqual(paths, tc.paths) {
				t.Errorf("paths %q, want %q", paths, tc.paths)
			}
			if got := applyPatch(t, tc.from, ops); !sameJSON(t, got, tc.to) {
				t.Errorf("the patch turns %s into %s, want %s", tc.from, got, tc.to)
			}
		})
	}
}

func TestJSONPatchOfAVersionWithNothingToCompareWithReplacesTheWholeDocument(t *testing.T) {
	to := `{"kind":"Deployment","spec":{"replicas":3}}`
	ops := JSONPatch(nil, mustDecode(t, to))
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "" {
		t.Fatalf("patch %+v, want one replace of the root", ops)
	}
	// Applied to the previous incarnation, it leaves nothing of it behind.
	if got := applyPatch(t, `{"kind":"Deployment","status":{"old":true}}`, ops); !sameJSON(t, got, to) {
		t.Errorf("got %s, want %s", got, to)
	}
}

func TestTheYAMLDiffLeavesTheResourceVersionOutAndShowsAVersionWithoutPredecessorWhole(t *testing.T) {
	v1 := mustDecode(t, `{"metadata":{"name":"web","resourceVersion":"10"},"spec":{"replicas":1}}`)
	v2 := mustDecode(t, `{"metadata":{"name":"web","resourceVersion":"11"},"spec":{"replicas":2}}`)
	whole, err := yamlDiff(nil, v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "@@ -0,0 +1,4 @@\n+metadata:\n+  name: web\n+spec:\n+  replicas: 1\n"; whole != want {
		t.Errorf("first version:\n%s\nwant:\n%s", whole, want)
	}
	d, err := yamlDiff(v1, v2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d, "-  replicas: 1\n+  replicas: 2\n") || strings.Contains(d, "resourceVersion") {
		t.Errorf("diff:\n%s\nwant replicas 1→2 and no resourceVersion", d)
	}
	if d, _ := yamlDiff(v1, mustDecode(t, `{"metadata":{"name":"web","resourceVersion":"12"},"spec":{"replicas":1}}`)); d != "" {
		t.Errorf("a new resourceVersion alone gave a diff:\n%s", d)
	}
	if v1.(map[string]any)["metadata"].(map[string]any)["resourceVersion"] != "10" {
		t.Error("yamlDiff removed resourceVersion from its input")
	}
}

func TestARecordedResourceIsMatchedByPluralKindOrGroupAndTheCoreGroupWinsATie(t *testing.T) {
	recorded := []change.Resource{
		{Group: "", Resource: "events", Kind: "Event"},
		{Group: "apps", Resource: "deployments", Kind: "Deployment"},
		{Group: "events.k8s.io", Resource: "events", Kind: "Event"},
		{Group: "example.com", Resource: "widgets", Kind: "Widget"},
		{Group: "other.com", Resource: "widgets", Kind: "Widget"},
	}
	for name, want := range map[string]string{
		"deployments":                  "deployments.apps",
		"Deployment":                   "deployments.apps",
		"deployments.apps":             "deployments.apps",
		"apps/v1/deployments":          "deployments.apps",
		"v1/configmaps":                "configmaps", // the group is given: taken as it is
		"events":                       "events",
		"events.events.k8s.io":         "events.events.k8s.io",
		"events.k8s.io/v1/events":      "events.events.k8s.io",
		"widgets.example.com":          "widgets.example.com",
		"example.com/v1alpha1/widgets": "widgets.example.com",
	} {
		r, err := MatchRecorded(name, recorded)
		if err != nil || r.ID() != want {
			t.Errorf("%s: %s, %v; want %s", name, r.ID(), err, want)
		}
	}
	for name, want := range map[string]string{
		"widgets": `resource "widgets" is ambiguous: widgets.example.com, widgets.other.com`,
		"deploy":  `resource "deploy" is none of the resources recorded (events, deployments.apps, events.events.k8s.io, widgets.example.com, widgets.other.com)`,
	} {
		if _, err := MatchRecorded(name, recorded); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", name, err, want)
		}
	}
}

func TestSinceIsADurationBackFromNowOrAnRFC3339Time(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                            {},
		"90m":                         now.Add(-90 * time.Minute),
		"2026-04-30T10:00:00Z":        time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC),
		"2026-04-30T10:00:00.123456Z": time.Date(2026, 4, 30, 10, 0, 0, 123456000, time.UTC),
	} {
		if got, err := ParseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-5m", "0s", "2026-04-30"} {
		if _, err := ParseSince(in, now); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := Decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sameJSON compares documents with numbers as float64, so 1.0 equals 1.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// applyPatch applies ops with evanphx/json-patch, the implementation Kubernetes uses.
func applyPatch(t *testing.T, doc string, ops []PatchOp) string {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply([]byte(doc))
	if err != nil {
		t.Fatalf("apply %s to %s: %v", b, doc, err)
	}
	return string(out)
}
