package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster mode: a Kube plus kube-controller-manager, kube-scheduler and KWOK, so that
// Deployments make ReplicaSets and Pods, Pods are scheduled onto simulated nodes and turn
// Running, nodes renew their Leases, EndpointSlices and Events churn — the shape of the
// changes kube-cdc's users stream. The bare Kube stays the fast default.

// kwokStages are KWOK's "fast" stages (kwok_stages.yaml says where they come from).
//
//go:embed kwok_stages.yaml
var kwokStages []byte

// KWOK manages the nodes that carry this annotation (CreateNodes sets it); other nodes
// are left alone.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// ClusterOptions configure a Cluster. The zero value is a cluster with no nodes.
type ClusterOptions struct {
	Kube KubeOptions
	// APIQPS is the request rate the controller-manager, the scheduler and KWOK may
	// send the apiserver (their client QPS; burst is twice it). Default 500: the
	// components' own defaults (20–50/s) would take minutes to make thousands of pods.
	APIQPS int
	// ServiceAccountCredentials runs each controller of the controller-manager as its own
	// ServiceAccount (system:serviceaccount:kube-system:deployment-controller, …), as a
	// real cluster does, instead of as the admin: for tests that tell who made a change.
	ServiceAccountCredentials bool
}

// Cluster is a Kube with a controller-manager (deployment, replicaset, statefulset,
// daemonset, job, endpointslice, garbage-collector, namespace, node-lifecycle, service
// account controllers and the rest of its defaults), a scheduler and KWOK managing the
// nodes CreateNodes makes. Stop stops all of them.
type Cluster struct {
	*Kube
	opts ClusterOptions

	cm, scheduler, kwok *kubeProc
}

// NewCluster starts a Cluster for one test and stops it when the test ends, printing the
// tails of every component's log when the test has failed.
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{c.LogPath(), c.ComponentLogPath("kube-controller-manager"),
				c.ComponentLogPath("kube-scheduler"), c.ComponentLogPath("kwok")} {
				t.Logf("%s:\n%s", filepath.Base(p), Tail(p, 25))
			}
		}
		c.Stop()
	})
	return c
}

// StartCluster starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// KWOK, and returns once the controller-manager and the scheduler hold their leader
// leases (so both are running their loops). The caller must call Stop.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.APIQPS <= 0 {
		opts.APIQPS = 500
	}
	bin, err := TestbinDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make testbin` (builds the controller-manager, the scheduler and KWOK from the Go module proxy once) or set KUBE_CDC_TESTBIN to a directory holding them", b, bin)
		}
	}
	k, err := StartKube(ctx, opts.Kube)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Kube: k, opts: opts}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	qps, burst := strconv.Itoa(opts.APIQPS), strconv.Itoa(2*opts.APIQPS)

	caFile := filepath.Join(k.Dir, "ca.crt")
	if err := os.WriteFile(caFile, k.creds.caPEM, 0o644); err != nil {
		return nil, err
	}
	if c.cm, err = startKubeProc("kube-controller-manager", c.ComponentLogPath("kube-controller-manager"),
		filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+k.Kubeconfig,
		"--secure-port=0", // no serving: nothing scrapes it, and no port to find
		"--service-account-private-key-file="+k.creds.saKeyFile,
		"--root-ca-file="+caFile,
		"--use-service-account-credentials="+strconv.FormatBool(opts.ServiceAccountCredentials),
		"--kube-api-qps="+qps, "--kube-api-burst="+burst,
		// Pods of deleted nodes and finished objects go at once, not after the defaults'
		// minutes, so tests that wait for the cluster to settle do not wait on them.
		"--terminated-pod-gc-threshold=100",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		// A component that cannot renew its lease within the renew deadline exits. Its
		// renewals wait in the same client rate limiter as its controllers, so on a loaded
		// machine creating thousands of pods the 10 s default was missed and the
		// controller-manager quit mid-rollout; nothing else competes for the lease here.
		"--leader-elect-lease-duration=120s", "--leader-elect-renew-deadline=110s",
		// KWOK renews 1,000 nodes' Leases through one client; on a loaded machine some
		// lapse past the default 50 s, and the node-lifecycle controller then marks the
		// node's pods NotReady (the stage pod-ready-again makes them Ready again).
		"--node-monitor-grace-period=3m",
	); err != nil {
		return nil, err
	}

	schedCfg := filepath.Join(k.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedCfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %s
  burst: %s
leaderElection:
  leaderElect: true
  leaseDuration: 120s
  renewDeadline: 110s
  retryPeriod: 2s
`, k.Kubeconfig, qps, burst)), 0o600); err != nil {
		return nil, err
	}
	if c.scheduler, err = startKubeProc("kube-scheduler", c.ComponentLogPath("kube-scheduler"),
		filepath.Join(bin, "kube-scheduler"), "--config="+schedCfg, "--secure-port=0"); err != nil {
		return nil, err
	}

	kwokCfg := filepath.Join(k.Dir, "kwok.yaml")
	if err := os.WriteFile(kwokCfg, kwokStages, 0o600); err != nil {
		return nil, err
	}
	if c.kwok, err = startKubeProc("kwok", c.ComponentLogPath("kwok"), filepath.Join(bin, "kwok"),
		"--kubeconfig="+k.Kubeconfig,
		"--config="+kwokCfg,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"="+kwokNodeValue,
		// Room for tens of thousands of pod IPs; nothing routes them.
		"--cidr=10.128.0.0/12",
		"--node-ip=10.127.0.1",
		// Nodes heartbeat through Leases in kube-node-lease, as kubelets do (KWOK takes
		// its 40 s default only from a KwokConfiguration document, which we do not write).
		"--node-lease-duration-seconds=40",
	); err != nil {
		return nil, err
	}

	if err := c.waitLeaders(ctx, "kube-controller-manager", "kube-scheduler"); err != nil {
		return nil, err
	}
	return c, nil
}

// waitLeaders waits until each component holds its leader Lease in kube-system, and fails
// early when a component exits.
func (c *Cluster) waitLeaders(ctx context.Context, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range names {
		for {
			if err := c.componentExited(); err != nil {
				return err
			}
			l, err := c.Clientset().CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err == nil && leaseHeld(l) {
				break
			}
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				return fmt.Errorf("read the %s lease: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not take its leader lease: %w\n%s", name, ctx.Err(), Tail(c.ComponentLogPath(name), 20))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func leaseHeld(l *coordinationv1.Lease) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
}

// componentExited reports a cluster component that has exited.
func (c *Cluster) componentExited() error {
	var errs []error
	for _, p := range []*kubeProc{c.cm, c.scheduler, c.kwok} {
		if p != nil {
			errs = append(errs, p.exitErr())
		}
	}
	return errors.Join(errs...)
}

// ComponentLogPath is the log file of a cluster component: "kube-controller-manager",
// "kube-scheduler" or "kwok".
func (c *Cluster) ComponentLogPath(name string) string {
	return filepath.Join(c.Dir, name+".log")
}

// Stop stops KWOK, the scheduler and the controller-manager, then the apiserver and etcd,
// and removes Dir. It is safe to call more than once.
func (c *Cluster) Stop() {
	for _, p := range []*kubeProc{c.kwok, c.scheduler, c.cm} {
		_ = p.stop(5 * time.Second)
	}
	c.Kube.Stop()
}
