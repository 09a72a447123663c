package testenv

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Workload helpers for a Cluster: nodes KWOK simulates, Deployments the controllers turn
// into ReplicaSets and Pods, and a wait for all of it to settle.

// workers bounds the requests a helper sends at once.
const workers = 16

// CreateNodes creates n nodes named prefix-0 … prefix-(n-1), managed by KWOK, each with
// room for 110 pods, and waits until every one is Ready.
func (c *Cluster) CreateNodes(ctx context.Context, prefix string, n int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error {
			_, err := c.Clientset().CoreV1().Nodes().Create(gctx, kwokNode(prefix+"-"+strconv.Itoa(i)), metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	return c.poll(ctx, 2*time.Minute, func(ctx context.Context) (string, error) {
		nodes, err := c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		ready := 0
		for _, nd := range nodes.Items {
			if nd.Annotations[kwokNodeAnnotation] == kwokNodeValue && nodeReady(&nd) {
				ready++
			}
		}
		if ready < n {
			return fmt.Sprintf("%d of %d KWOK nodes Ready", ready, n), nil
		}
		return "", nil
	})
}

func kwokNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Deployment is a Deployment of replicas pods running image, labelled app=name, small
// enough that 100 of them fit a KWOK node.
func Deployment(ns, name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "main",
						Image: image,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("10m"),
							corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
					// KWOK's nodes run nothing: a pod deleted goes at once.
					TerminationGracePeriodSeconds: new(int64),
				},
			},
		},
	}
}

// CreateDeployments creates the Deployments, several at a time.
func (c *Cluster) CreateDeployments(ctx context.Context, ds ...*appsv1.Deployment) error {
	return c.eachDeployment(ctx, ds, func(ctx context.Context, d *appsv1.Deployment) error {
		_, err := c.Clientset().AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
}

// Service is a ClusterIP Service named name in ns selecting the pods of the Deployment of
// the same name (app=name), so the endpointslice controller makes its EndpointSlices.
func Service(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// CreateServices creates the Services, several at a time.
func (c *Cluster) CreateServices(ctx context.Context, svcs ...*corev1.Service) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, s := range svcs {
		g.Go(func() error {
			if _, err := c.Clientset().CoreV1().Services(s.Namespace).Create(gctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// SetImage rolls each named Deployment of ns out to image.
func (c *Cluster) SetImage(ctx context.Context, ns, image string, names ...string) error {
	return c.patchDeployments(ctx, ns, names, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":%q}]}}}}`, image))
}

// Scale sets the replicas of each named Deployment of ns.
func (c *Cluster) Scale(ctx context.Context, ns string, replicas int32, names ...string) error {
	return c.patchDeployments(ctx, ns, names, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

// DeleteDeployments deletes each named Deployment of ns; the garbage collector deletes
// their ReplicaSets and Pods in the background.
func (c *Cluster) DeleteDeployments(ctx context.Context, ns string, names ...string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, name := range names {
		g.Go(func() error {
			err := c.Clientset().AppsV1().Deployments(ns).Delete(gctx, name, metav1.DeleteOptions{})
			if err != nil {
				return fmt.Errorf("delete deployment %s/%s: %w", ns, name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (c *Cluster) patchDeployments(ctx context.Context, ns string, names []string, patch string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, name := range names {
		g.Go(func() error {
			_, err := c.Clientset().AppsV1().Deployments(ns).Patch(gctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				return fmt.Errorf("patch deployment %s/%s: %w", ns, name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (c *Cluster) eachDeployment(ctx context.Context, ds []*appsv1.Deployment, f func(context.Context, *appsv1.Deployment) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, d := range ds {
		g.Go(func() error {
			if err := f(gctx, d); err != nil {
				return fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// WaitSettled waits until the workload of ns is at rest: every Deployment's rollout is
// complete (observed, updated, ready and available replicas all equal to its spec), no
// ReplicaSet has pods left that it does not want, and every pod is Running and Ready on a
// node, with none pending or being deleted.
func (c *Cluster) WaitSettled(ctx context.Context, ns string, timeout time.Duration) error {
	return c.poll(ctx, timeout, func(ctx context.Context) (string, error) {
		return c.unsettled(ctx, ns)
	})
}

// unsettled says what in ns is not at rest yet, or "".
func (c *Cluster) unsettled(ctx context.Context, ns string) (string, error) {
	ds, err := c.Clientset().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	want := int32(0)
	for _, d := range ds.Items {
		r := *d.Spec.Replicas
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != r || s.ReadyReplicas != r ||
			s.AvailableReplicas != r || s.Replicas != r {
			return fmt.Sprintf("deployment %s: generation %d observed %d, replicas %d: %d updated, %d ready, %d available, %d in all",
				d.Name, d.Generation, s.ObservedGeneration, r, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.Replicas), nil
		}
		want += r
	}
	rss, err := c.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, rs := range rss.Items {
		if rs.Status.Replicas != *rs.Spec.Replicas {
			return fmt.Sprintf("replicaset %s: %d of %d replicas", rs.Name, rs.Status.Replicas, *rs.Spec.Replicas), nil
		}
	}
	pods, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			return fmt.Sprintf("pod %s: phase %s on %q, deleting %v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil), nil
		}
	}
	// Pods of deleted Deployments go after their owners, through the garbage collector.
	if int32(len(pods.Items)) != want {
		return fmt.Sprintf("%d pods, %d wanted by the deployments", len(pods.Items), want), nil
	}
	return "", nil
}

// poll calls check until it reports nothing pending (""), an error, a component exits, or
// timeout passes; the error then says what was still pending.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, check func(context.Context) (string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := ""
	for {
		if err := c.componentExited(); err != nil {
			return err
		}
		p, err := check(ctx)
		if err != nil && !apierrors.IsTimeout(err) && ctx.Err() == nil {
			return err
		}
		if err == nil {
			if p == "" {
				return nil
			}
			pending = p
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not settled within %v: %s", timeout, pending)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// NudgeStuckPods touches (an annotation) every pod of ns that was scheduled more than
// olderThan ago and is still not Running and Ready, and returns how many it touched. KWOK
// moves a pod through its stages when it sees the pod change; a status patch of its that
// failed (a timeout on a loaded machine) is not retried, so without a nudge such a pod
// stays Pending for good. The annotation's update is the event that makes KWOK look again.
func (c *Cluster) NudgeStuckPods(ctx context.Context, ns string, olderThan time.Duration) (int, error) {
	pods, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	var stuck []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning && podReady(&p) {
			continue
		}
		scheduled := p.CreationTimestamp.Time
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				scheduled = cond.LastTransitionTime.Time
			}
		}
		if time.Since(scheduled) > olderThan {
			stuck = append(stuck, p.Name)
		}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"testenv.kube-cdc.io/nudged":%q}}}`, time.Now().Format(time.RFC3339Nano))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, name := range stuck {
		g.Go(func() error {
			_, err := c.Clientset().CoreV1().Pods(ns).Patch(gctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	return len(stuck), g.Wait()
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
