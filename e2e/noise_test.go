package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Noise control for history (issue 22, item 1): a node's heartbeat-only status updates
// (the kubelet's conditions' lastHeartbeatTime, ignored by default for nodes) move the
// objects row to every version but add no changes row; a label change adds one, whose
// diff in history() includes the heartbeats since the row before; a pod's status-only
// updates (pods have no default ignore paths) each add a row; a lease's renewals alone add
// none, a new holder one. The versions left out are counted in /metrics and in
// `kube-cdc status`.
func TestANodesHeartbeatsUpdateObjectsButWriteNoChangesRowsWhileALabelChangeAndPodStatusDo(t *testing.T) {
	t.Parallel() // a node of its own, selected by name; see main_test.go
	ctx := context.Background()
	cs := kube.Clientset()
	ns := namespace(t, "noise")
	node := "noise-" + strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, strings.Replace(pgConfigYAML(dsn, fmt.Sprintf(`  - name: nodes
    fieldSelector: metadata.name=%s
  - name: pods
    namespaces: [%s]
  - name: leases.coordination.k8s.io
    namespaces: [%s]`, node, ns, ns), ""), "metrics:\n  address: \"\"", fmt.Sprintf("metrics:\n  address: %q", addr), 1))

	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"role": "a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	beat := time.Now().Truncate(time.Second)
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(beat)},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: metav1.NewTime(beat)},
	}
	heartbeat := func() {
		t.Helper()
		beat = beat.Add(time.Second)
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(beat)
		}
		if n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat() // the conditions appear: a real change

	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	// objectsAt waits until the objects row of (resource, namespace, name) holds rv.
	objectsAt := func(resource, namespace, name, rv string) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			select {
			case <-d.done:
				return fmt.Errorf("kube-cdc exited:\n%s", d.log())
			default:
			}
			var got int64
			err := conn.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0) FROM kube_cdc.objects
				WHERE resource = $1 AND namespace = $2 AND name = $3`, resource, namespace, name).Scan(&got)
			if err != nil {
				return err
			}
			if strconv.FormatInt(got, 10) != rv {
				return fmt.Errorf("objects holds %s %s at RV %d, want %s", resource, name, got, rv)
			}
			return nil
		})
	}
	rows := func(resource, namespace, name string) int {
		t.Helper()
		return count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE resource = $1 AND namespace = $2 AND name = $3`, resource, namespace, name)
	}
	objectsAt("nodes", "", node, n.ResourceVersion)
	before := rows("nodes", "", node)
	if before == 0 {
		t.Fatal("the node has no changes row after the relist")
	}

	const beats = 5
	for range beats {
		heartbeat()
		objectsAt("nodes", "", node, n.ResourceVersion) // objects follows each version
		if got := rows("nodes", "", node); got != before {
			t.Fatalf("%d changes rows of the node after a heartbeat alone, want %d (as before it)", got, before)
		}
	}

	n.Labels["role"] = "b"
	if n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	objectsAt("nodes", "", node, n.ResourceVersion)
	if got := rows("nodes", "", node); got != before+1 {
		t.Errorf("%d changes rows of the node after a label change, want %d", got, before+1)
	}
	// history() is exact about what it shows: the label's row is compared with the row
	// before it, so the heartbeats since are in its diff.
	var changed []string
	if err := conn.QueryRow(ctx, `SELECT changed FROM kube_cdc.history('nodes', '', $1) ORDER BY id DESC LIMIT 1`, node).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/metadata/labels/role", "/status/conditions/0/lastHeartbeatTime", "/status/conditions/1/lastHeartbeatTime"} {
		if !slices.Contains(changed, want) {
			t.Errorf("history's last row of the node changed %v, want %s among them", changed, want)
		}
	}

	// Pods have no default ignore paths: every status-only update is a row.
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objectsAt("pods", ns, "web", pod.ResourceVersion)
	podBefore := rows("pods", ns, "web")
	for i := range 3 {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", LastProbeTime: metav1.NewTime(beat.Add(time.Duration(i+1) * time.Second))}}
		if pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		objectsAt("pods", ns, "web", pod.ResourceVersion)
	}
	if got := rows("pods", ns, "web"); got != podBefore+3 {
		t.Errorf("%d changes rows of the pod after 3 status updates, want %d", got, podBefore+3)
	}

	// Leases: a renewal alone (spec.renewTime, ignored by default) is no row, a new holder is.
	holder, renewed := "a", metav1.NewMicroTime(beat)
	lease, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objectsAt("leases", ns, "leader", lease.ResourceVersion)
	leaseBefore := rows("leases", ns, "leader")
	const renewals = 3
	for i := range renewals {
		renewed = metav1.NewMicroTime(beat.Add(time.Duration(i+1) * time.Second))
		lease.Spec.RenewTime = &renewed
		if lease, err = cs.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		objectsAt("leases", ns, "leader", lease.ResourceVersion)
	}
	if got := rows("leases", ns, "leader"); got != leaseBefore {
		t.Errorf("%d changes rows of the lease after renewals alone, want %d", got, leaseBefore)
	}
	holder = "b"
	lease.Spec.HolderIdentity = &holder
	if lease, err = cs.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	objectsAt("leases", ns, "leader", lease.ResourceVersion)
	if got := rows("leases", ns, "leader"); got != leaseBefore+1 {
		t.Errorf("%d changes rows of the lease after a new holder, want %d", got, leaseBefore+1)
	}

	// The count: in /metrics, and in status (table and JSON).
	if v, ok := opsMetric(opsScrape(t, addr), "kube_cdc_history_skipped_total", map[string]string{"sink": "warehouse", "resource": "nodes"}); !ok || v != beats {
		t.Errorf("kube_cdc_history_skipped_total of nodes = %v (present %v), want %d", v, ok, beats)
	}
	if v, ok := opsMetric(opsScrape(t, addr), "kube_cdc_history_skipped_total", map[string]string{"sink": "warehouse", "resource": "leases.coordination.k8s.io"}); !ok || v != renewals {
		t.Errorf("kube_cdc_history_skipped_total of leases = %v (present %v), want %d", v, ok, renewals)
	}
	if _, ok := opsMetric(opsScrape(t, addr), "kube_cdc_history_skipped_total", map[string]string{"resource": "pods"}); ok {
		t.Error("kube_cdc_history_skipped_total has a series for pods, which skipped nothing")
	}
	code, out := runCLI(t, "status", "-c", cfg)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d versions left out of changes as noise", beats)) {
		t.Errorf("status: exit %d, want it to count %d versions left out:\n%s", code, beats, out)
	}
	d2 := start(t, "status", "-c", cfg, "-o", "json")
	if code, stderr := d2.wait(60 * time.Second); code != 0 {
		t.Fatalf("status -o json: exit %d\n%s", code, stderr)
	}
	var report struct {
		Sinks []struct {
			Resources []struct {
				Resource string `json:"resource"`
				History  *struct {
					Skipped int64 `json:"skipped"`
				} `json:"history"`
			} `json:"resources"`
		} `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(d2.out.String()), &report); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, d2.out.String())
	}
	skipped := map[string]int64{}
	for _, s := range report.Sinks {
		for _, r := range s.Resources {
			if r.History != nil {
				skipped[r.Resource] = r.History.Skipped
			}
		}
	}
	if skipped["nodes"] != beats || skipped["pods"] != 0 || skipped["leases.coordination.k8s.io"] != renewals {
		t.Errorf("status -o json: history.skipped %v, want nodes %d, pods 0, leases %d", skipped, beats, renewals)
	}
}
