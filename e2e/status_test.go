package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// statusDoc is `kube-cdc status -o json` as docs/operations.md documents it; decoding
// into it with unknown fields refused checks the names scripts rely on.
type statusDoc struct {
	Cluster string `json:"cluster"`
	Sinks   []struct {
		Name            string `json:"name"`
		Type            string `json:"type"`
		CheckpointStore string `json:"checkpointStore"`
		Resources       []struct {
			Resource string `json:"resource"`
			Scope    *struct {
				Namespaces    []string `json:"namespaces"`
				LabelSelector string   `json:"labelSelector"`
				FieldSelector string   `json:"fieldSelector"`
			} `json:"scope"`
			ScopeID    string `json:"scopeId"`
			Checkpoint struct {
				ResourceVersion string     `json:"resourceVersion"`
				UpdatedAt       *time.Time `json:"updatedAt"`
				Epoch           int        `json:"epoch"`
				TimeTravel      *struct {
					Reason     string     `json:"reason"`
					DetectedAt *time.Time `json:"detectedAt"`
				} `json:"timeTravel"`
			} `json:"checkpoint"`
			Objects struct {
				Live        int64  `json:"live"`
				Deleted     *int64 `json:"deleted"`
				Quarantined *int64 `json:"quarantined"`
			} `json:"objects"`
			Quarantined []json.RawMessage `json:"quarantined"`
			History     *struct {
				Skipped int64 `json:"skipped"`
			} `json:"history"`
		} `json:"resources"`
		WriterLock *struct {
			Holder *struct {
				Application string     `json:"application"`
				BackendPID  int        `json:"backendPid"`
				Client      string     `json:"client"`
				ConnectedAt *time.Time `json:"connectedAt"`
			} `json:"holder"`
			Waiters []json.RawMessage `json:"waiters"`
		} `json:"writerLock"`
		Errors []string `json:"errors"`
	} `json:"sinks"`
	Daemon struct {
		URL       string            `json:"url"`
		Reachable bool              `json:"reachable"`
		Streaming bool              `json:"streaming"`
		Error     string            `json:"error"`
		Degraded  []json.RawMessage `json:"degraded"`
		// AccessDenied: the resources streamed whose next re-watch will fail (access_test.go).
		AccessDenied []json.RawMessage `json:"accessDenied"`
		// SignalsDenied: the signal ConfigMap the daemon may not use (signals_access_test.go).
		SignalsDenied *struct {
			ConfigMap string    `json:"configMap"`
			Denied    []string  `json:"denied"`
			Error     string    `json:"error"`
			Since     time.Time `json:"since"`
		} `json:"signalsDenied"`
	} `json:"daemon"`
}

// statusAs runs `kube-cdc status -o format -c cfg` and decodes its stdout (YAML through
// JSON) strictly into a statusDoc.
func statusAs(t *testing.T, cfg, format string) statusDoc {
	t.Helper()
	d := start(t, "status", "-o", format, "-c", cfg)
	code, stderr := d.wait(60 * time.Second)
	out := d.out.String()
	if code != 0 {
		t.Fatalf("status -o %s: exit %d\n%s%s", format, code, out, stderr)
	}
	js := []byte(out)
	if format == "yaml" {
		var err error
		if js, err = yaml.YAMLToJSON(js); err != nil {
			t.Fatalf("status -o yaml does not parse: %v\n%s", err, out)
		}
	}
	// encoding/json matches names regardless of case: check them exactly.
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatalf("status -o %s: %v\n%s", format, err, out)
	}
	if bad := undocumentedKeys(raw); len(bad) > 0 {
		t.Errorf("status -o %s has keys docs/operations.md does not name: %v", format, bad)
	}
	var doc statusDoc
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("status -o %s does not decode as documented: %v\n%s", format, err, out)
	}
	return doc
}

// statusKeys are the field names of docs/operations.md's table, spelled exactly.
var statusKeys = strings.Fields(`cluster sinks name type checkpointStore resources resource scope namespaces
	labelSelector fieldSelector scopeId checkpoint resourceVersion updatedAt epoch timeTravel reason detectedAt
	objects live deleted quarantined namespace uid op bytes topic quarantinedAt writerLock holder waiters
	application backendPid client connectedAt errors daemon url reachable streaming error degraded since
	accessDenied denied history skipped signalsDenied configMap`)

func undocumentedKeys(v any) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !slices.Contains(statusKeys, k) {
				bad = append(bad, k)
			}
			bad = append(bad, undocumentedKeys(e)...)
		}
	case []any:
		for _, e := range v {
			bad = append(bad, undocumentedKeys(e)...)
		}
	}
	return bad
}

func TestStatusAsJSONIsWhatThePostgresSinkHoldsWithEachScopeShownByItsContent(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	nsA, nsB := namespace(t, "a"), namespace(t, "b")
	createConfigMaps(t, nsA, 0, 3, nil) // labelled app=e2e
	createConfigMaps(t, nsB, 0, 2, nil)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	// Two entries: configmaps of two namespaces by label (one scope per namespace), and
	// the namespaces resource whole.
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes: {kubeconfig: %q}
resources:
  - name: configmaps
    namespaces: [%s, %s]
    labelSelector: app=e2e
  - name: namespaces
sinks:
  - name: warehouse
    type: postgres
    postgres: {dsn: %q}
metrics: {address: %q}
`, kube.Kubeconfig, nsA, nsB, dsn, addr))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	eventually(t, 60*time.Second, func() error {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&n)
		if err == nil && n != 3 {
			err = fmt.Errorf("%d of 3 checkpoints", n)
		}
		return err
	})
	// A delete the watch sees: a tombstone.
	if err := kube.Clientset().CoreV1().ConfigMaps(nsA).Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE resource = 'configmaps' AND deleted_at IS NOT NULL`); n != 1 {
			return fmt.Errorf("%d configmaps tombstones, want 1", n)
		}
		return nil
	})

	// While it runs: the daemon answers, and holds the writer lock.
	doc := statusAs(t, cfg, "json")
	if len(doc.Sinks) != 1 || doc.Sinks[0].WriterLock == nil || doc.Sinks[0].WriterLock.Holder == nil ||
		doc.Sinks[0].WriterLock.Holder.Application != writersApp(t, d) || len(doc.Sinks[0].WriterLock.Waiters) != 0 {
		t.Errorf("writer lock: want %s holding it alone: %+v", writersApp(t, d), doc.Sinks[0].WriterLock)
	}
	if !doc.Daemon.Reachable || !doc.Daemon.Streaming || doc.Daemon.URL != "http://"+addr+"/resources" || doc.Daemon.Degraded == nil || len(doc.Daemon.Degraded) != 0 {
		t.Errorf("daemon: want %s reachable with none degraded: %+v", addr, doc.Daemon)
	}

	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	doc = statusAs(t, cfg, "json")
	if doc.Cluster != "e2e" || len(doc.Sinks) != 1 || doc.Sinks[0].Name != "warehouse" || doc.Sinks[0].Type != "postgres" || doc.Sinks[0].CheckpointStore != "postgres" {
		t.Fatalf("sinks: %+v", doc.Sinks)
	}
	if doc.Daemon.Reachable || !strings.Contains(doc.Daemon.Error, addr) {
		t.Errorf("daemon after the stop: want unreachable at %s: %+v", addr, doc.Daemon)
	}
	if l := doc.Sinks[0].WriterLock; l == nil || l.Holder != nil {
		t.Errorf("writer lock after the stop: want no holder: %+v", l)
	}

	// Every checkpoint row, with its RV, time and epoch, and the resource's counts.
	rows, err := conn.Query(ctx, `SELECT c.resource, c.scope, c.resource_version, c.updated_at, c.epoch,
			(SELECT count(*) FROM kube_cdc.objects o WHERE o.resource = c.resource AND deleted_at IS NULL),
			(SELECT count(*) FROM kube_cdc.objects o WHERE o.resource = c.resource AND deleted_at IS NOT NULL)
		  FROM kube_cdc.checkpoints c WHERE c.cluster = 'e2e' AND c.sink = 'warehouse' ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		resource, scope string
		rv              int64
		at              time.Time
		epoch           int32
		live, deleted   int64
	}
	var wants []want
	for rows.Next() {
		var w want
		if err := rows.Scan(&w.resource, &w.scope, &w.rv, &w.at, &w.epoch, &w.live, &w.deleted); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, w)
	}
	if rows.Close(); rows.Err() != nil || len(wants) != 3 {
		t.Fatalf("%d checkpoints (%v)", len(wants), rows.Err())
	}
	got := doc.Sinks[0].Resources
	if len(got) != len(wants) {
		t.Fatalf("status shows %d resources, the sink holds %d checkpoints:\n%+v", len(got), len(wants), got)
	}
	var labelled []string
	for _, w := range wants {
		i := -1
		for j, r := range got {
			if r.Resource == w.resource && r.ScopeID == w.scope {
				i = j
			}
		}
		if i < 0 {
			t.Errorf("no status entry for the checkpoint of %s scope %q", w.resource, w.scope)
			continue
		}
		r := got[i]
		if r.Checkpoint.ResourceVersion != strconv.FormatInt(w.rv, 10) || r.Checkpoint.UpdatedAt == nil || !r.Checkpoint.UpdatedAt.Equal(w.at) ||
			r.Checkpoint.Epoch != int(w.epoch) || r.Checkpoint.TimeTravel != nil {
			t.Errorf("%s %q checkpoint %+v, the sink holds rv %d at %v epoch %d", w.resource, w.scope, r.Checkpoint, w.rv, w.at, w.epoch)
		}
		if r.Objects.Live != w.live || r.Objects.Deleted == nil || *r.Objects.Deleted != w.deleted || r.Objects.Quarantined == nil || *r.Objects.Quarantined != 0 {
			t.Errorf("%s %q objects %+v, the sink holds %d live, %d deleted", w.resource, w.scope, r.Objects, w.live, w.deleted)
		}
		switch {
		case r.Scope == nil:
			t.Errorf("%s %q: scope content unknown, though the config names it", w.resource, w.scope)
		case w.resource == "namespaces":
			if w.scope != "" || len(r.Scope.Namespaces) != 0 || r.Scope.Namespaces == nil || r.Scope.LabelSelector != "" || r.Scope.FieldSelector != "" {
				t.Errorf("namespaces: scope %+v id %q, want the whole resource", r.Scope, w.scope)
			}
		default:
			if len(r.Scope.Namespaces) != 1 || r.Scope.LabelSelector != "app=e2e" || r.Scope.FieldSelector != "" || w.scope == "" {
				t.Errorf("configmaps %q: scope %+v, want one namespace and app=e2e", w.scope, r.Scope)
			} else {
				labelled = append(labelled, r.Scope.Namespaces[0])
			}
		}
	}
	slices.Sort(labelled)
	wantNS := []string{nsA, nsB}
	slices.Sort(wantNS)
	if !reflect.DeepEqual(labelled, wantNS) {
		t.Errorf("configmaps scopes cover %v, want %v", labelled, wantNS)
	}
	if w := wants[0]; w.resource != "configmaps" || w.live != 4 || w.deleted != 1 {
		t.Errorf("the sink holds %d live and %d deleted %s, want 4 and 1 configmaps", w.live, w.deleted, w.resource)
	}

	// YAML is the same document.
	if y := statusAs(t, cfg, "yaml"); !reflect.DeepEqual(y, doc) {
		t.Errorf("-o yaml differs from -o json:\n%+v\n%+v", y, doc)
	}

	// The table shows the same scopes by content.
	code, out := runCLI(t, "status", "-c", cfg)
	for _, row := range []string{
		`(?m)^warehouse\s+configmaps\s+namespace=` + regexp.QuoteMeta(nsA) + ` labels=app=e2e\s+[1-9]\d*\s+\S+\s+4\s+1\s+0$`,
		`(?m)^warehouse\s+namespaces\s+all\s+[1-9]\d*\s+`,
	} {
		if code != 0 || !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("status: exit %d, no row matching %s:\n%s", code, row, out)
		}
	}

	code, out = runCLI(t, "status", "-o", "xml", "-c", cfg)
	if code == 0 || !strings.Contains(out, `--output (-o) "xml": want one of table, json, yaml`) {
		t.Errorf("status -o xml: exit %d, want a failure naming the flag and the accepted values:\n%s", code, out)
	}
}
