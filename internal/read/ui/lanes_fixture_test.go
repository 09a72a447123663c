package ui_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The lanes' world: a Deployment's rollout and a crash, written as the PostgreSQL sink
// writes them (changes, objects and events rows) into the shared schema, under a cluster
// of its own. The test apiserver runs no controllers (nothing would make the ReplicaSets,
// the Pods or their statuses), and the rollout's order must be known to the millisecond.
//
// In namespace shop, from t0:
//
//	t0        Deployment web created; ReplicaSet web-old (owned by web) created
//	t0+1s     Pod web-old-a, t0+1.1s Pod web-old-b created (web-old's), running and ready
//	t0+10s    ReplicaSet web-new (web's) created
//	t0+10.2s  Pod web-new-a created      t0+10.5s  Pod web-old-a deleted
//	t0+11.2s  Pod web-new-b created      t0+11.5s  Pod web-old-b deleted
//	t0+12s    ReplicaSet web-old scaled to 0
//	t0+30s    Pod web-new-b: CrashLoopBackOff (a Warning BackOff event, count 5, at t0+31s)
//	t0+60s    Pod web-new-b: running and ready again
//	t0+10.3s  a Normal Pulled event of web-new-a (markup and script in its message)
type lanesWorld struct {
	cluster, ns string
	t0          time.Time
}

const lanesCluster = "lanes-test"

var (
	lanesOnce sync.Once
	lanesW    lanesWorld
	lanesErr  error
)

func theLanes(t *testing.T) lanesWorld {
	t.Helper()
	lanesOnce.Do(func() { lanesW, lanesErr = writeLanes(testCtx(t)) })
	if lanesErr != nil {
		t.Fatalf("write the lanes' world: %v", lanesErr)
	}
	return lanesW
}

// at is a moment of the lanes' world, ms after t0.
func (w lanesWorld) at(ms int) time.Time { return w.t0.Add(time.Duration(ms) * time.Millisecond) }

func writeLanes(ctx context.Context) (lanesWorld, error) {
	w := lanesWorld{cluster: lanesCluster, ns: "shop", t0: time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return w, err
	}
	defer conn.Close(context.Background())
	yes := true
	ctrl := func(kind, name, uid string) []metav1.OwnerReference {
		av := "apps/v1"
		return []metav1.OwnerReference{{APIVersion: av, Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}}
	}
	two := int32(2)
	deploy := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns, UID: "uid-web", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: &two},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	rs := func(name, uid string, replicas int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, UID: types.UID(uid), OwnerReferences: ctrl("Deployment", "web", "uid-web")},
			Spec:       appsv1.ReplicaSetSpec{Replicas: &replicas}}
	}
	pod := func(name, uid, rsName, rsUID string, crashing bool) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, UID: types.UID(uid), OwnerReferences: ctrl("ReplicaSet", rsName, rsUID)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
		if crashing {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: "app", RestartCount: 4,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
		}
		return p
	}
	type version struct {
		ms                   int
		group, res, name, op string
		uid                  string
		obj                  any
	}
	rv := 1000
	versions := []version{
		{0, "apps", "deployments", "web", "create", "uid-web", deploy},
		{0, "apps", "replicasets", "web-old", "create", "uid-rs-old", rs("web-old", "uid-rs-old", 2)},
		{1000, "", "pods", "web-old-a", "create", "uid-old-a", pod("web-old-a", "uid-old-a", "web-old", "uid-rs-old", false)},
		{1100, "", "pods", "web-old-b", "create", "uid-old-b", pod("web-old-b", "uid-old-b", "web-old", "uid-rs-old", false)},
		{10000, "apps", "replicasets", "web-new", "create", "uid-rs-new", rs("web-new", "uid-rs-new", 2)},
		{10200, "", "pods", "web-new-a", "create", "uid-new-a", pod("web-new-a", "uid-new-a", "web-new", "uid-rs-new", false)},
		{10500, "", "pods", "web-old-a", "delete", "uid-old-a", pod("web-old-a", "uid-old-a", "web-old", "uid-rs-old", false)},
		{11200, "", "pods", "web-new-b", "create", "uid-new-b", pod("web-new-b", "uid-new-b", "web-new", "uid-rs-new", false)},
		{11500, "", "pods", "web-old-b", "delete", "uid-old-b", pod("web-old-b", "uid-old-b", "web-old", "uid-rs-old", false)},
		{12000, "apps", "replicasets", "web-old", "update", "uid-rs-old", rs("web-old", "uid-rs-old", 0)},
		{30000, "", "pods", "web-new-b", "update", "uid-new-b", pod("web-new-b", "uid-new-b", "web-new", "uid-rs-new", true)},
		{60000, "", "pods", "web-new-b", "update", "uid-new-b", pod("web-new-b", "uid-new-b", "web-new", "uid-rs-new", false)},
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return w, err
	}
	defer tx.Rollback(context.Background())
	for _, v := range versions {
		rv++
		b, err := json.Marshal(v.obj)
		if err != nil {
			return w, err
		}
		at := w.at(v.ms)
		if _, err := tx.Exec(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, changed_by, observed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'lanes-fixture/Update', $10)`,
			w.cluster, v.group, v.res, w.ns, v.name, v.uid, rv, v.op, b, at); err != nil {
			return w, err
		}
		var deleted *time.Time
		if v.op == "delete" {
			deleted = &at
		}
		var meta struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
		}
		_ = json.Unmarshal(b, &meta)
		if _, err := tx.Exec(ctx, `INSERT INTO kube_cdc.objects (cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version, object, created_at, updated_at, deleted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)
			ON CONFLICT (cluster, api_group, resource, namespace, name) DO UPDATE
			   SET resource_version = excluded.resource_version, object = excluded.object, updated_at = excluded.updated_at, deleted_at = excluded.deleted_at`,
			w.cluster, v.group, meta.APIVersion, v.res, meta.Kind, w.ns, v.name, v.uid, rv, b, at, deleted); err != nil {
			return w, err
		}
	}
	events := []struct {
		uid, involved, name, typ, reason, msg string
		count, ms                             int
	}{
		{"ev-backoff", "uid-new-b", "web-new-b", "Warning", "BackOff", "Back-off restarting failed container app", 5, 31000},
		{"ev-pulled", "uid-new-a", "web-new-a", "Normal", "Pulled", "Container image already present on machine " + xssPayload, 1, 10300},
	}
	for i, e := range events {
		if _, err := tx.Exec(ctx, `INSERT INTO kube_cdc.events (cluster, uid, api_group, namespace, name, resource_version, type, reason, message, count,
			first_at, last_at, involved_kind, involved_resource, involved_namespace, involved_name, involved_uid, reporting_component, observed_at)
			VALUES ($1, $2, '', $3, $4, $5, $6, $7, $8, $9, $10, $11, 'Pod', 'pods', $3, $12, $13, 'kubelet', $11)`,
			w.cluster, e.uid, w.ns, e.name+".17a", 5000+i, e.typ, e.reason, e.msg, e.count, w.at(e.ms-2000), w.at(e.ms), e.name, e.involved); err != nil {
			return w, err
		}
	}
	return w, tx.Commit(ctx)
}
