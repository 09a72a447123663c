package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAClusterSchedulesADeploymentOntoKWOKNodesAndFollowsItsRolloutScaleAndDelete(t *testing.T) {
	t.Parallel() // a control plane of its own
	ctx := testContext(t, 4*time.Minute)
	c := NewCluster(t, ClusterOptions{})
	if err := c.CreateNodes(ctx, "node", 3); err != nil {
		t.Fatal(err)
	}
	ns := testNamespace(t, ctx, c.Kube)
	if err := c.CreateDeployments(ctx, Deployment(ns, "web", 5, "web:1")); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	pods := func() []corev1.Pod {
		t.Helper()
		l, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	for _, p := range pods() {
		if p.Spec.NodeName == "" || p.Status.PodIP == "" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod %s: node %q, ip %q, owners %v: want a KWOK node, an IP from KWOK and one owning ReplicaSet",
				p.Name, p.Spec.NodeName, p.Status.PodIP, p.OwnerReferences)
		}
	}

	// A Running pod marked NotReady (as the node-lifecycle controller does when its node's
	// heartbeat lapses) is made Ready again, with its IP, as a kubelet would report it.
	marked := pods()[0]
	ip := marked.Status.PodIP
	for i := range marked.Status.Conditions {
		if cond := &marked.Status.Conditions[i]; cond.Type == corev1.PodReady {
			cond.Status, cond.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
		}
	}
	if _, err := c.Clientset().CoreV1().Pods(ns).UpdateStatus(ctx, &marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.poll(ctx, time.Minute, func(ctx context.Context) (string, error) {
		p, err := c.Clientset().CoreV1().Pods(ns).Get(ctx, marked.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if !podReady(p) || p.Status.PodIP != ip {
			return fmt.Sprintf("pod %s: ready %v, ip %q (was %q)", p.Name, podReady(p), p.Status.PodIP, ip), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}

	// A rollout replaces every pod with one of the new image, through a new ReplicaSet.
	if err := c.SetImage(ctx, ns, "web:2", "web"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods() {
		if img := p.Spec.Containers[0].Image; img != "web:2" {
			t.Errorf("pod %s runs %s after the rollout, want web:2", p.Name, img)
		}
	}
	rss, err := c.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rss.Items) != 2 {
		t.Fatalf("%d ReplicaSets after one rollout (%v), want the old and the new", len(rss.Items), err)
	}

	if err := c.Scale(ctx, ns, 2, "web"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx, ns, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := len(pods()); n != 2 {
		t.Errorf("%d pods after scaling to 2", n)
	}

	// Deleting the Deployment leaves the rest to the garbage collector and KWOK.
	if err := c.DeleteDeployments(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	if err := c.poll(ctx, 2*time.Minute, func(ctx context.Context) (string, error) {
		rss, err := c.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if n := len(rss.Items) + len(pods()); n > 0 {
			return fmt.Sprintf("%d ReplicaSets and pods left", n), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}

	// KWOK's nodes heartbeat through their Leases, as kubelets do.
	lease, err := c.Clientset().CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		t.Fatalf("node-0's lease: %v, %v", lease, err)
	}
	first := lease.Spec.RenewTime.Time
	if err := c.poll(ctx, time.Minute, func(ctx context.Context) (string, error) {
		l, err := c.Clientset().CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if !l.Spec.RenewTime.Time.After(first) {
			return "node-0's lease not renewed since " + first.String(), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
}
