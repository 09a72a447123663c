package status

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func sampleReport() *Report {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	found := at.Add(-time.Hour)
	return &Report{
		Cluster: "prod",
		Sinks: []Sink{{
			Name: "warehouse", Type: "postgres", CheckpointStore: "postgres",
			Resources: []resourceStatus{{
				Resource: "configmaps", Scope: &Scope{Namespaces: []string{"shop"}, LabelSelector: "app=web"}, ScopeID: "a1b2c3d4e5f6",
				Checkpoint: checkpointStatus{ResourceVersion: "4711", UpdatedAt: &at, Epoch: 1, TimeTravel: &timeTravel{Reason: "rv-regressed", DetectedAt: &found}},
				Objects:    objectCounts{Live: 2, Deleted: ptr(int64(1)), Quarantined: ptr(int64(1))},
				Quarantined: []quarantinedChange{{Namespace: "shop", Name: "bad", UID: "u-1", ResourceVersion: "4700", Op: "update",
					Reason: "jsonb rejects \\u0000", QuarantinedAt: &at}},
			}},
			WriterLock: &writerLock{Holder: &writerStatus{Application: "kube-cdc/host/12", BackendPID: 99, Client: "127.0.0.1:5000", ConnectedAt: &at},
				Waiters: []writerStatus{{Application: "kube-cdc/host/13", BackendPID: 100}}},
		}, {
			Name: "out", Type: "stdout", CheckpointStore: "none", Resources: []resourceStatus{},
		}},
		Daemon: Daemon{URL: "http://localhost:9464/resources", Reachable: true, Streaming: true, Degraded: []degradedResource{{
			Resource: "widgets.example.com", Scope: &Scope{Namespaces: []string{}}, Reason: "not served", Error: "not\n served", Since: found,
		}}},
	}
}

func TestStatusAsJSONAndAsYAMLIsTheSameDocumentWithItsDocumentedFieldNames(t *testing.T) {
	r := sampleReport()
	var js, ym bytes.Buffer
	if err := Write(&js, r, "json", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := Write(&ym, r, "yaml", time.Now()); err != nil {
		t.Fatal(err)
	}
	fromYAML, err := yaml.YAMLToJSON(ym.Bytes())
	if err != nil {
		t.Fatalf("yaml does not parse: %v\n%s", err, ym.String())
	}
	var a, b any
	if err := json.Unmarshal(js.Bytes(), &a); err != nil {
		t.Fatalf("json does not parse: %v\n%s", err, js.String())
	}
	if err := json.Unmarshal(fromYAML, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("json and yaml differ:\n%s\n---\n%s", js.String(), ym.String())
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, r) {
		t.Errorf("json does not read back as the report (%v):\n%s", err, js.String())
	}
	// The names scripts rely on (docs/operations.md).
	for _, want := range []string{`"cluster": "prod"`, `"checkpointStore": "postgres"`, `"resourceVersion": "4711"`, `"updatedAt": "2025-03-01T12:00:00Z"`,
		`"scopeId": "a1b2c3d4e5f6"`, `"labelSelector": "app=web"`, `"namespaces": [`, `"epoch": 1`, `"timeTravel": {`, `"reason": "rv-regressed"`,
		`"live": 2`, `"deleted": 1`, `"quarantined": 1`, `"writerLock": {`, `"holder": {`, `"backendPid": 99`, `"waiters": [`,
		`"daemon": {`, `"reachable": true`, `"streaming": true`, `"degraded": [`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, js.String())
		}
	}
}

func TestStatusTableShowsScopesByContentAndNamesWhatARowCannotHold(t *testing.T) {
	r := sampleReport()
	var out bytes.Buffer
	now := time.Date(2025, 3, 1, 12, 0, 30, 0, time.UTC)
	if err := Write(&out, r, "table", now); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^SINK\s+RESOURCE\s+SCOPE\s+CHECKPOINT\s+AGE\s+LIVE\s+DELETED\s+QUARANTINED$`,
		`(?m)^warehouse\s+configmaps\s+namespace=shop labels=app=web\s+4711\s+30s\s+2\s+1\s+1$`,
		`(?m)^out\s+\(no checkpoint store: relists at every start\)`,
		`(?m)^sink warehouse: configmaps namespace=shop labels=app=web: epoch 1: the cluster went back in time \(an etcd restore\?\), found 2025-03-01T11:00:00Z \(rv-regressed\)$`,
		`(?m)^sink warehouse: quarantined configmaps shop/bad uid u-1 rv 4700 \(update\): jsonb rejects \\u0000; the change is in the quarantine table$`,
		`(?m)^sink warehouse: written by kube-cdc/host/12 \(backend pid 99, from 127\.0\.0\.1:5000, holds the writer lock, connected 2025-03-01T12:00:00Z\)$`,
		`(?m)^sink warehouse: waiting to take over \(--wait\): kube-cdc/host/13 \(backend pid 100, waits for the writer lock\)$`,
		`(?m)^DEGRADED: resource widgets\.example\.com: not served for 1h0m30s: not served$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("no line matching %s in:\n%s", want, text)
		}
	}
}

// A standby's endpoint lists no degraded resource because it streams nothing: status
// says so rather than "none degraded".
func TestStatusOfAStandbySaysItStreamsNothingRatherThanNoneDegraded(t *testing.T) {
	r := sampleReport()
	r.Daemon.Streaming, r.Daemon.Degraded = false, []degradedResource{}
	var out bytes.Buffer
	if err := Write(&out, r, "table", time.Now()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, "none degraded") || !strings.Contains(text,
		"resources: state unknown: kube-cdc at http://localhost:9464/resources does not stream now (a standby waiting for the lease, or still starting)") {
		t.Errorf("status of a standby:\n%s", text)
	}
}

func TestAnUnknownStatusFormatFailsNamingTheFlagAndTheAcceptedValues(t *testing.T) {
	for _, f := range formats {
		if err := CheckFormat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	err := CheckFormat("xml")
	if err == nil || !strings.Contains(err.Error(), "--output") || !strings.Contains(err.Error(), `"xml"`) ||
		!strings.Contains(err.Error(), "table, json, yaml") {
		t.Errorf("-o xml: %v", err)
	}
}

// A resource streamed but whose RBAC was revoked under its open watch (the daemon's
// access check) is named on a line of its own: not degraded yet, but its next re-watch
// will fail.
func TestStatusNamesAResourceWhoseAccessWasLostBesideTheDegradedOnes(t *testing.T) {
	r := sampleReport()
	found := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	r.Daemon.Degraded = []degradedResource{}
	r.Daemon.AccessDenied = []accessDenial{{Resource: "configmaps", Scope: &Scope{Namespaces: []string{"shop"}}, ScopeID: "a1b2c3d4e5f6",
		Denied: []string{"list", "watch"}, Error: "list, watch configmaps not allowed\n in namespace shop", Since: found}}
	var out, js bytes.Buffer
	if err := Write(&out, r, "table", found.Add(42*time.Second)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^resources: none degraded \(kube-cdc at http://localhost:9464/resources\)$`,
		`(?m)^ACCESS LOST: resource configmaps \(scope namespace=shop\): list, watch denied for 42s: list, watch configmaps not allowed in namespace shop$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("no line matching %s in:\n%s", want, text)
		}
	}
	if err := Write(&js, r, "json", found); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"accessDenied": [`, `"denied": [`, `"scopeId": "a1b2c3d4e5f6"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, js.String())
		}
	}
}

// A signal ConfigMap the daemon may not use is named on a line of its own (issue 33, 4).
func TestStatusNamesASignalConfigMapTheDaemonMayNotUse(t *testing.T) {
	r := sampleReport()
	found := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	r.Daemon.Degraded = []degradedResource{}
	r.Daemon.SignalsDenied = &signalsDenial{ConfigMap: "ops/kube-cdc-signals", Denied: []string{"get", "list", "watch", "update"},
		Error: "get, list, watch, update configmaps/kube-cdc-signals not allowed\n in namespace ops: resnapshot requests are not answered", Since: found}
	var out, js bytes.Buffer
	if err := Write(&out, r, "table", found.Add(42*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := `(?m)^SIGNALS DENIED: configmap ops/kube-cdc-signals: get, list, watch, update denied for 42s: get, list, watch, update configmaps/kube-cdc-signals not allowed in namespace ops: resnapshot requests are not answered$`
	if !regexp.MustCompile(want).MatchString(out.String()) {
		t.Errorf("no line matching %s in:\n%s", want, out.String())
	}
	if err := Write(&js, r, "json", found); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"signalsDenied": {`, `"configMap": "ops/kube-cdc-signals"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, js.String())
		}
	}
	r.Daemon.SignalsDenied = nil
	out.Reset()
	if err := Write(&out, r, "table", found); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "SIGNALS") {
		t.Errorf("a SIGNALS line while requests are answered:\n%s", out.String())
	}
}

// A PostgreSQL sink's versions left out of changes as noise: a line when there are any,
// and history.skipped in the document.
func TestStatusNamesTheVersionsLeftOutOfHistoryAsNoise(t *testing.T) {
	r := &Report{Cluster: "dev", Sinks: []Sink{{Name: "warehouse", Type: "postgres", CheckpointStore: "postgres", Resources: []resourceStatus{
		{Resource: "nodes", Scope: &Scope{Namespaces: []string{}}, Checkpoint: checkpointStatus{ResourceVersion: "9"}, History: &historyCounts{Skipped: 42}},
		{Resource: "pods", Scope: &Scope{Namespaces: []string{}}, Checkpoint: checkpointStatus{ResourceVersion: "9"}, History: &historyCounts{}},
	}}}}
	var out bytes.Buffer
	if err := Write(&out, r, "table", time.Now()); err != nil {
		t.Fatal(err)
	}
	if want := "sink warehouse: nodes all: 42 versions left out of changes as noise"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "pods all: 0 versions") {
		t.Errorf("a line for pods, which left nothing out:\n%s", out.String())
	}
	out.Reset()
	if err := Write(&out, r, "json", time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"history": {
            "skipped": 42
          }`) {
		t.Errorf("no history.skipped 42 in:\n%s", out.String())
	}
}
