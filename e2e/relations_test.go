package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// relResources are the resources the relation views join, and the Widget CRD whose
// ownerReferences work like the built-in kinds'.
var relResources = []string{"pods", "nodes", "replicasets.apps", "deployments.apps", "services",
	"endpointslices.discovery.k8s.io", "persistentvolumeclaims", "persistentvolumes", "storageclasses.storage.k8s.io",
	"ingresses.networking.k8s.io", "jobs.batch", "cronjobs.batch", "configmaps", "widgets.e2e.kube-cdc.io"}

// relQuery returns the rows of a query as text lines (columns joined by " "), sorted.
func relQuery(conn *pgx.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		vals, err := r.Values()
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		return strings.Join(parts, " "), err
	})
	slices.Sort(out)
	return out, err
}

// relExpect is what the views must show of ns, read from the cluster by a fresh LIST.
type relExpect struct {
	owners, placement, storage, backends, lineage []string
}

func relFromCluster(t *testing.T, c *testenv.Cluster, ns string) relExpect {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rss, err := c.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsOwner := map[string]string{}
	for _, rs := range rss.Items {
		for _, r := range rs.OwnerReferences {
			if ptr.Deref(r.Controller, false) {
				rsOwner[rs.Name] = r.Kind + "/" + r.Name
			}
		}
	}
	resourceOf := map[string]string{"ReplicaSet": "replicasets", "ConfigMap": "configmaps"}
	var e relExpect
	for _, p := range pods.Items {
		e.placement = append(e.placement, fmt.Sprintf("%s %s true", p.Name, p.Spec.NodeName))
		e.storage = append(e.storage, fmt.Sprintf("%s data data pv-web fast true", p.Name))
		chain := "Pod/" + p.Name + ":true"
		for _, r := range p.OwnerReferences {
			e.owners = append(e.owners, fmt.Sprintf("%s %s %s %s %v", p.Name, r.Kind, r.Name, resourceOf[r.Kind], ptr.Deref(r.Controller, false)))
			if ptr.Deref(r.Controller, false) {
				chain += " ReplicaSet/" + r.Name + ":true " + rsOwner[r.Name] + ":true"
			}
		}
		e.lineage = append(e.lineage, p.Name+" "+chain)
	}
	slices := c.Clientset().DiscoveryV1().EndpointSlices(ns)
	l, err := slices.List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				e.backends = append(e.backends, fmt.Sprintf("web %s %s %v", s.Name, ep.TargetRef.Name, ptr.Deref(ep.Conditions.Ready, true)))
			}
		}
	}
	for _, s := range []*[]string{&e.owners, &e.placement, &e.storage, &e.backends, &e.lineage} {
		sortStrings(*s)
	}
	return e
}

func sortStrings(s []string) { slices.Sort(s) }

// relFromViews is what the views show of ns.
func relFromViews(conn *pgx.Conn, ns string) (relExpect, error) {
	var e relExpect
	var err error
	if e.owners, err = relQuery(conn, `SELECT name, owner_kind, owner_name, coalesce(owner_resource, ''), controller
		FROM kube_cdc.owners WHERE namespace = $1 AND resource = 'pods'`, ns); err != nil {
		return e, err
	}
	if e.placement, err = relQuery(conn, `SELECT pod, node, node_uid IS NOT NULL FROM kube_cdc.pod_placement WHERE namespace = $1`, ns); err != nil {
		return e, err
	}
	if e.storage, err = relQuery(conn, `SELECT pod, volume, claim, persistent_volume, storage_class,
		claim_uid IS NOT NULL AND persistent_volume_uid IS NOT NULL AND storage_class_uid IS NOT NULL
		FROM kube_cdc.pod_storage WHERE namespace = $1`, ns); err != nil {
		return e, err
	}
	if e.backends, err = relQuery(conn, `SELECT service, endpointslice, pod, ready FROM kube_cdc.service_backends
		WHERE namespace = $1 AND pod_uid IS NOT NULL`, ns); err != nil {
		return e, err
	}
	e.lineage, err = relQuery(conn, `SELECT p.name, (SELECT string_agg(l.kind || '/' || l.name || ':' || l.found, ' ' ORDER BY l.depth)
		FROM kube_cdc.lineage('pods', p.namespace, p.name) l) FROM kube_cdc.objects p
		WHERE p.resource = 'pods' AND p.namespace = $1 AND p.deleted_at IS NULL`, ns)
	return e, err
}

func (e relExpect) diff(want relExpect) string {
	var out []string
	for _, c := range []struct {
		name      string
		got, want []string
	}{{"owners", e.owners, want.owners}, {"pod_placement", e.placement, want.placement}, {"pod_storage", e.storage, want.storage},
		{"service_backends", e.backends, want.backends}, {"lineage", e.lineage, want.lineage}} {
		if !slices.Equal(c.got, c.want) {
			out = append(out, fmt.Sprintf("%s:\n    %s\n  want\n    %s", c.name, strings.Join(c.got, "\n    "), strings.Join(c.want, "\n    ")))
		}
	}
	return strings.Join(out, "\n  ")
}

func TestTheRelationViewsAndLineageFollowADeploymentWithVolumesAServiceAndAnIngressThroughARollout(t *testing.T) {
	t.Parallel() // a cluster of its own
	ctx := context.Background()
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	if err := c.CreateNodes(ctx, "node", 2); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateCRD(ctx, widgetCRD()); err != nil {
		t.Fatal(err)
	}
	const ns = "shop"
	createNamespace(t, c.Clientset(), ns)
	dsn := pg.NewDatabase(t)
	var res strings.Builder
	for _, r := range relResources {
		res.WriteString("  - name: " + r + "\n")
	}
	cfg := writeConfig(t, fmt.Sprintf(`cluster: rel
kubernetes:
  kubeconfig: %q
resources:
%ssinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
`, c.Kubeconfig, res.String(), dsn))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	eventually(t, 90*time.Second, func() error {
		n := 0
		err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&n)
		if err == nil && n != len(relResources) {
			err = fmt.Errorf("%d of %d resources synced", n, len(relResources))
		}
		return err
	})

	// Storage: a StorageClass, a static PersistentVolume bound to its claim by claimRef and
	// volumeName (the PV controller binds them).
	cs := c.Clientset()
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: "kubernetes.io/no-provisioner"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-web"},
		Spec: corev1.PersistentVolumeSpec{Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName:       "fast",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/web"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "data"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To("fast"), VolumeName: "pv-web", Resources: corev1.VolumeResourceRequirements{Requests: size}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The workload: a Deployment whose pods mount the claim, its Service and an Ingress.
	dep := testenv.Deployment(ns, "web", 2, "web:1")
	dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	if err := c.CreateDeployments(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateServices(ctx, testenv.Service(ns, "web")); err != nil {
		t.Fatal(err)
	}
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &backend, Rules: []networkingv1.IngressRule{{Host: "shop.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend}}}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Job its CronJob owns (suspended: no pods), and a ConfigMap a Widget owns.
	cron, err := cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true), JobTemplate: batchv1.JobTemplateSpec{Spec: relJobSpec()}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cron.Name, UID: cron.UID, Controller: ptr.To(true)}}},
		Spec: relJobSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Dynamic().Resource(widgets).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.kube-cdc.io/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1"}, "spec": map[string]any{}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap(ns, "w1-config", nil)
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "e2e.kube-cdc.io/v1", Kind: "Widget", Name: "w1", UID: w.GetUID(), Controller: ptr.To(true)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	extra, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "web-config", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One pod also has an owner that is not its controller: lineage must not follow it.
	addOwner := func() string {
		t.Helper()
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods: %v, %d", err, len(pods.Items))
		}
		p := pods.Items[0]
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[%s,{"apiVersion":"v1","kind":"ConfigMap","name":"web-config","uid":%q}]}}`,
			relJSON(t, p.OwnerReferences[0]), extra.UID)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	converged := func(phase string) {
		t.Helper()
		if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, func() error {
			want := relFromCluster(t, c, ns)
			if len(want.backends) != 2 {
				return fmt.Errorf("%s: the cluster's EndpointSlices list %d ready pods of web, want 2", phase, len(want.backends))
			}
			got, err := relFromViews(conn, ns)
			if err != nil {
				return err
			}
			if d := got.diff(want); d != "" {
				return fmt.Errorf("%s: the views differ from the cluster:\n  %s", phase, d)
			}
			return nil
		})
	}
	if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	addOwner()
	converged("rolled out")
	if got, err := relQuery(conn, `SELECT depth, kind, name, resource, found FROM kube_cdc.lineage('jobs.batch', $1, 'nightly-1')`, ns); err != nil ||
		!slices.Equal(got, []string{"0 Job nightly-1 jobs true", "1 CronJob nightly cronjobs true"}) {
		t.Errorf("lineage of the Job: %v %v", got, err)
	}
	if got, err := relQuery(conn, `SELECT depth, kind, name, resource, found FROM kube_cdc.lineage('configmaps', $1, 'w1-config', 'rel')`, ns); err != nil ||
		!slices.Equal(got, []string{"0 ConfigMap w1-config configmaps true", "1 Widget w1 widgets true"}) {
		t.Errorf("lineage of the Widget's ConfigMap: %v %v", got, err)
	}
	if got, err := relQuery(conn, `SELECT host, path, path_type, default_backend, service, service_port, service_uid IS NOT NULL
		FROM kube_cdc.ingress_routes WHERE namespace = $1`, ns); err != nil ||
		!slices.Equal(got, []string{"<nil> <nil> <nil> true web 80 true", "shop.example / Prefix false web 80 true"}) {
		t.Errorf("ingress_routes: %v %v", got, err)
	}

	// A rollout; then the old ReplicaSet, scaled to zero, is deleted: its pods are gone
	// from every view, and nothing names it as an owner any more.
	before, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(before.Items) != 1 {
		t.Fatalf("replicasets before the rollout: %v, %d", err, len(before.Items))
	}
	old := before.Items[0].Name
	oldPods := relFromCluster(t, c, ns).placement
	if err := c.SetImage(ctx, ns, "web:2", "web"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().ReplicaSets(ns).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The old pods may still be terminating (in the cluster, so in the views too) when the
	// rollout has settled: compare once they are gone.
	eventually(t, 90*time.Second, func() error {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, o := range oldPods {
				if strings.Fields(o)[0] == p.Name {
					return fmt.Errorf("pod %s of the deleted ReplicaSet %s still exists", p.Name, old)
				}
			}
		}
		return nil
	})
	addOwner()
	converged("after the rollout")
	for _, p := range oldPods {
		name := strings.Fields(p)[0]
		if n := count(t, conn, `SELECT (SELECT count(*) FROM kube_cdc.owners WHERE namespace = $1 AND (name = $2 OR owner_name = $3))
			+ (SELECT count(*) FROM kube_cdc.pod_placement WHERE namespace = $1 AND pod = $2)
			+ (SELECT count(*) FROM kube_cdc.pod_storage WHERE namespace = $1 AND pod = $2)
			+ (SELECT count(*) FROM kube_cdc.service_backends WHERE namespace = $1 AND target_name = $2)
			+ (SELECT count(*) FROM kube_cdc.lineage('pods', $1, $2))`, ns, name, old); n != 0 {
			t.Errorf("pod %s of the deleted ReplicaSet %s: %d rows in the views", name, old, n)
		}
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

func relJobSpec() batchv1.JobSpec {
	return batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "job:1"}}}}}
}

func relJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
