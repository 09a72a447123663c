package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// object writes one live object of res with the given JSON, and a deleted one beside it
// that the views must not show.
func writeObject(t *testing.T, s *Sink, res change.Resource, namespace, object string) {
	t.Helper()
	var meta struct {
		Metadata struct {
			Name   string          `json:"name"`
			Labels json.RawMessage `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(object), &meta); err != nil {
		t.Fatal(err)
	}
	live := change.Change{Cluster: cluster, Resource: res, Key: change.Key{Namespace: namespace, Name: meta.Metadata.Name},
		UID: "uid-" + meta.Metadata.Name, RV: 10, Op: change.OpCreate, Object: json.RawMessage(object),
		Labels: meta.Metadata.Labels, ObservedAt: time.Now()}
	gone := live
	gone.Key.Name, gone.UID, gone.RV, gone.Op = "gone", "uid-gone", 11, change.OpDelete
	write(t, s, change.Batch{Resource: res, Changes: []change.Change{live, gone}, Checkpoint: 11})
}

// viewRows returns the view's rows as column → value text, NULL as "<null>".
func viewRows(t *testing.T, dsn, view string) []map[string]string {
	t.Helper()
	var out []map[string]string
	rows, err := connect(t, dsn).Query(testCtx(t), "SELECT * FROM kube_cdc."+view, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		m := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			raw := rows.RawValues()[i]
			if raw == nil {
				m[f.Name] = "<null>"
			} else {
				m[f.Name] = string(raw)
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkView(t *testing.T, dsn, view string, want map[string]string) {
	t.Helper()
	rows := viewRows(t, dsn, view)
	if len(rows) != 1 {
		t.Fatalf("view %s has %d rows, want 1 (live objects only): %v", view, len(rows), rows)
	}
	for col, v := range want {
		got, ok := rows[0][col]
		if !ok {
			t.Errorf("view %s has no column %s (has %v)", view, col, rows[0])
			continue
		}
		if got != v {
			t.Errorf("%s.%s = %q, want %q", view, col, got, v)
		}
	}
}

func TestTheKindViewsShowTheExpectedColumns(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})

	writeObject(t, s, change.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}, "web", `{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": {"name": "web-1", "namespace": "web", "labels": {"app": "web"},
			"creationTimestamp": "2024-05-01T10:00:00Z",
			"ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f"}]},
		"spec": {"nodeName": "node-1", "serviceAccountName": "web",
			"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "sidecar", "image": "envoy:1.30"}]},
		"status": {"phase": "Running", "podIP": "10.0.0.7", "hostIP": "192.168.1.10",
			"containerStatuses": [{"name": "app", "restartCount": 2}, {"name": "sidecar", "restartCount": 1}]}}`)
	checkView(t, dsn, "pods", map[string]string{
		"cluster": cluster, "namespace": "web", "name": "web-1", "uid": "uid-web-1",
		"node": "node-1", "phase": "Running", "pod_ip": "10.0.0.7", "host_ip": "192.168.1.10",
		"service_account": "web", "images": "{nginx:1.27,envoy:1.30}", "restarts": "3",
		"owner_kind": "ReplicaSet", "owner_name": "web-5d8f", "labels": `{"app": "web"}`,
		"creation_timestamp": "2024-05-01 10:00:00+00", "resource_version": "10",
	})

	writeObject(t, s, change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}, "web", `{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "web", "namespace": "web", "labels": {"app": "web"}},
		"spec": {"replicas": 3, "strategy": {"type": "RollingUpdate"},
			"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}},
		"status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}`)
	checkView(t, dsn, "deployments", map[string]string{
		"namespace": "web", "name": "web", "replicas": "3", "ready_replicas": "2", "updated_replicas": "3",
		"available_replicas": "2", "images": "{nginx:1.27}", "strategy": "RollingUpdate",
	})

	writeObject(t, s, change.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}, "", `{
		"apiVersion": "v1", "kind": "Node",
		"metadata": {"name": "node-1", "labels": {"kubernetes.io/arch": "amd64"}},
		"spec": {"unschedulable": true},
		"status": {
			"nodeInfo": {"kubeletVersion": "v1.35.0", "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0",
				"containerRuntimeVersion": "containerd://2.0.0", "architecture": "amd64"},
			"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
			"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
			"allocatable": {"cpu": "3800m", "memory": "15Gi"},
			"addresses": [{"type": "Hostname", "address": "node-1"}, {"type": "InternalIP", "address": "192.168.1.10"}]}}`)
	checkView(t, dsn, "nodes", map[string]string{
		"name": "node-1", "kubelet_version": "v1.35.0", "ready": "t", "unschedulable": "t",
		"cpu_capacity": "4", "memory_capacity": "16Gi", "pods_capacity": "110",
		"cpu_allocatable": "3800m", "memory_allocatable": "15Gi", "internal_ip": "192.168.1.10",
		"os_image": "Debian GNU/Linux 12", "kernel_version": "6.1.0", "container_runtime": "containerd://2.0.0",
		"architecture": "amd64",
	})

	writeObject(t, s, change.Resource{Version: "v1", Resource: "services", Kind: "Service", Namespaced: true}, "web", `{
		"apiVersion": "v1", "kind": "Service",
		"metadata": {"name": "web", "namespace": "web"},
		"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.20", "selector": {"app": "web"},
			"ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
		"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}}}`)
	checkView(t, dsn, "services", map[string]string{
		"name": "web", "type": "LoadBalancer", "cluster_ip": "10.96.0.20",
		"ports": "{80:30080/TCP,53/UDP}", "selector": `{"app": "web"}`, "external_addresses": "{203.0.113.5}",
		"labels": "{}",
	})

	// A pod without status yet (just created) still appears, with NULLs and zero restarts.
	writeObject(t, s, change.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}, "web", `{
		"metadata": {"name": "pending", "namespace": "web"}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}}`)
	rows := viewRows(t, dsn, "pods")
	if len(rows) != 2 {
		t.Fatalf("pods rows = %d, want 2", len(rows))
	}
	for _, r := range rows {
		if r["name"] == "pending" && (r["phase"] != "<null>" || r["restarts"] != "0" || r["images"] != "{busybox}" || r["node"] != "<null>") {
			t.Errorf("pending pod row = %v", r)
		}
	}
}
