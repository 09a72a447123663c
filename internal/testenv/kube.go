package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeOptions configure the kube-apiserver of a Kube. The zero value is a plain apiserver.
type KubeOptions struct {
	// EtcdCompactionInterval is passed as --etcd-compaction-interval: how often the
	// apiserver compacts etcd history. 0 leaves the apiserver default (5m).
	EtcdCompactionInterval time.Duration
	// WatchCacheSizes is passed as --watch-cache-sizes, e.g. "podtemplates#0" serves
	// podtemplates' watches straight from etcd (no watch cache). Empty: apiserver default.
	WatchCacheSizes []string
	// FeatureGates is passed as --feature-gates, e.g. "WatchList=false". Empty: defaults.
	FeatureGates string
	// Audit starts the apiserver with an audit policy and, optionally, the audit webhook
	// backend (kube_audit.go). Nil: no auditing.
	Audit *AuditOptions
	// ExtraArgs are appended to the kube-apiserver command line, after all the others.
	ExtraArgs []string
}

// Kube is an etcd and a kube-apiserver (no controller-manager, no scheduler, no nodes) on
// loopback ports, with everything in Dir. Without controllers, pods are never scheduled,
// namespaces stay Terminating once deleted, and no "default" ServiceAccount appears (the
// ServiceAccount admission plugin is disabled so pods can still be created).
type Kube struct {
	// Config authenticates as "admin" in group system:masters (a static token).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same credentials as Config.
	Kubeconfig string
	// Dir holds etcd's data, the certificates, tokens, kubeconfigs and both logs. Stop
	// removes it.
	Dir string
	// EtcdURL is etcd's client URL (plain HTTP), for tests that look at etcd directly.
	EtcdURL string

	opts    KubeOptions
	creds   *kubeCredentials
	etcdBin string
	apiBin  string
	apiPort int
	etcdArg []string
	http    *http.Client // admin, for /readyz

	clientset kubernetes.Interface
	dynamic   dynamic.Interface
	apiext    apiextensionsclient.Interface

	mu        sync.Mutex
	etcd      *kubeProc
	apiserver *kubeProc
	stopped   bool
}

// NewKube starts a Kube for one test (or test helper) and stops it when the test ends. It
// fails the test when the servers do not come up, and prints the tail of both logs when the
// test has failed.
func NewKube(t testing.TB, opts KubeOptions) *Kube {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartKube(ctx, opts)
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\n%s", Tail(k.LogPath(), 40), Tail(k.EtcdLogPath(), 20))
		}
		k.Stop()
	})
	return k
}

// StartKube starts etcd and kube-apiserver and returns once the apiserver's /readyz is ok.
// The caller must call Stop. Meant for TestMain; tests use NewKube.
func StartKube(ctx context.Context, opts KubeOptions) (_ *Kube, err error) {
	bin, err := TestbinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kube-cdc-kube-")
	if err != nil {
		return nil, err
	}
	k := &Kube{
		Dir:     dir,
		opts:    opts,
		etcdBin: filepath.Join(bin, "etcd"),
		apiBin:  filepath.Join(bin, "kube-apiserver"),
	}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	if k.creds, err = writeKubeCredentials(dir); err != nil {
		return nil, fmt.Errorf("write credentials: %w", err)
	}

	// A free port may be taken by someone else before the server binds it: retry with new
	// ports when that happens.
	for attempt := 1; ; attempt++ {
		err = k.startEtcdOnFreePorts(ctx)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err = k.startAPIServerOnFreePort(ctx)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}

	if k.clientset, err = kubernetes.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	if k.dynamic, err = dynamic.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	if k.apiext, err = apiextensionsclient.NewForConfig(k.Config); err != nil {
		return nil, err
	}
	k.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(k.Kubeconfig, "admin", k.Config); err != nil {
		return nil, err
	}
	return k, nil
}

// Stop kills kube-apiserver and etcd (SIGTERM, then SIGKILL) and removes Dir. It is safe to
// call more than once.
func (k *Kube) Stop() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.stopped = true
	api, etcd := k.apiserver, k.etcd
	k.mu.Unlock()
	// Quick grace periods: nothing here needs a clean shutdown.
	_ = api.stop(5 * time.Second)
	_ = etcd.stop(5 * time.Second)
	if k.http != nil {
		k.http.CloseIdleConnections()
	}
	_ = os.RemoveAll(k.Dir)
}

// Clientset is a typed client authenticated as the admin.
func (k *Kube) Clientset() kubernetes.Interface { return k.clientset }

// Dynamic is a dynamic client authenticated as the admin.
func (k *Kube) Dynamic() dynamic.Interface { return k.dynamic }

// LogPath is the kube-apiserver's log file (all its runs, one after the other).
func (k *Kube) LogPath() string { return filepath.Join(k.Dir, "kube-apiserver.log") }

// EtcdLogPath is etcd's log file (all its runs, one after the other).
func (k *Kube) EtcdLogPath() string { return filepath.Join(k.Dir, "etcd.log") }
