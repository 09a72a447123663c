package asof

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

func TestParseTimeReadsRFC3339NowAndDurationsBackFromNow(t *testing.T) {
	now := time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-05-01T12:00:00Z":             time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		"2026-05-01T14:00:00.123456+02:00": time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC),
		"now":                              now,
		"15m":                              now.Add(-15 * time.Minute),
		"-15m":                             now.Add(-15 * time.Minute),
		"2h ago":                           now.Add(-2 * time.Hour),
		"1h30m ago":                        now.Add(-90 * time.Minute),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "2d ago", "--15m", "15m from now", "2026-05-01 12:00"} {
		if _, err := ParseTime(in, now); err == nil || !strings.Contains(err.Error(), "TIME") {
			t.Errorf("ParseTime(%q): error %v, want one naming TIME", in, err)
		}
	}
}

func TestPrintShowsAgeAtTheMomentAndListsForYAMLAndJSON(t *testing.T) {
	at := time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC)
	objs := []store.AsOfObject{
		{Namespace: "shop", Name: "web", RV: 120, Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"shop","creationTimestamp":"2026-05-01T12:03:00Z"}}`)},
		{Namespace: "shop", Name: "db", RV: 7, Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"db","namespace":"shop","creationTimestamp":"2026-04-28T14:03:00Z"}}`)},
	}
	var b bytes.Buffer
	if err := Print(&b, objs, at, "table", true); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME   AGE    RESOURCEVERSION\nshop        web    120m   120\nshop        db     3d     7\n" // kubectl prints 120m up to 3h
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := Print(&b, objs[:1], at, "table", false); err != nil || !strings.HasPrefix(b.String(), "NAME   AGE") {
		t.Errorf("table with -n: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := Print(&b, objs, at, "json", true); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b.Bytes(), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 || list.Items[1].Metadata.Name != "db" {
		t.Errorf("json: %v %+v\n%s", err, list, b.String())
	}
	b.Reset()
	if err := Print(&b, nil, at, "yaml", true); err != nil || !strings.Contains(b.String(), "kind: List") || !strings.Contains(b.String(), "items: []") {
		t.Errorf("yaml of nothing: %v\n%s", err, b.String())
	}
	if err := Print(&b, nil, at, "wide", true); err == nil || !strings.Contains(err.Error(), "-o") {
		t.Errorf("-o wide: %v, want an error naming -o", err)
	}
}

func TestPrintKindShowsKubectlsColumnsForTheKindAtTheMoment(t *testing.T) {
	at := time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC)
	pod := func(name, image, state string, ready bool) store.AsOfObject {
		return store.AsOfObject{Namespace: "shop", Name: name, RV: 9, Object: json.RawMessage(`{"metadata":{"name":"` + name + `","creationTimestamp":"2026-05-01T14:00:00Z"},
			"spec":{"nodeName":"node-1","containers":[{"name":"app","image":"` + image + `"}]},
			"status":{"phase":"Running","containerStatuses":[{"name":"app","ready":` + map[bool]string{true: "true", false: "false"}[ready] + `,"state":` + state + `}]}}`)}
	}
	objs := []store.AsOfObject{pod("web-old", "web:v1", `{"running":{}}`, true), pod("web-new", "web:v2", `{"waiting":{"reason":"ContainerCreating"}}`, false)}
	var b bytes.Buffer
	if err := PrintKind(&b, "", "pods", objs, at, "table", false); err != nil {
		t.Fatal(err)
	}
	want := "NAME      AGE   READY   STATUS              RESTARTS   NODE     IMAGE    RESOURCEVERSION\n" +
		"web-old   3m    1/1     Running             0          node-1   web:v1   9\n" +
		"web-new   3m    0/1     ContainerCreating   0          node-1   web:v2   9\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
