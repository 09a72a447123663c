package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

const (
	apiserverReadyTimeout = 4 * time.Minute
	etcdReadyTimeout      = 30 * time.Second
)

func (k *Kube) startEtcdOnFreePorts(ctx context.Context) error {
	client, err := FreePort()
	if err != nil {
		return err
	}
	peer, err := FreePort()
	if err != nil {
		return err
	}
	k.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	k.etcdArg = []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(k.Dir, "etcd"),
		"--listen-client-urls=" + k.EtcdURL,
		"--advertise-client-urls=" + k.EtcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		// Test data need not survive a power cut; fsync would only slow every write.
		"--unsafe-no-fsync",
	}
	return k.StartEtcd(ctx)
}

func (k *Kube) startAPIServerOnFreePort(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	k.apiPort = port
	k.Config = k.creds.restConfig(fmt.Sprintf("https://127.0.0.1:%d", port), k.creds.adminToken)
	if k.http, err = rest.HTTPClientFor(k.Config); err != nil {
		return err
	}
	return k.startAPIServer(ctx)
}

func (k *Kube) apiserverArgs() ([]string, error) {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(k.apiPort),
		"--tls-cert-file=" + k.creds.certFile,
		"--tls-private-key-file=" + k.creds.keyFile,
		"--cert-dir=" + filepath.Join(k.Dir, "apiserver-certs"),
		"--etcd-servers=" + k.EtcdURL,
		"--token-auth-file=" + k.creds.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + k.creds.saKeyFile,
		"--service-account-signing-key-file=" + k.creds.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Nothing creates "default" ServiceAccounts here, which that plugin requires of pods.
		"--disable-admission-plugins=ServiceAccount",
		// One client, no tenants: fairness queuing would only add goroutines and delay.
		"--enable-priority-and-fairness=false",
		// On SIGTERM, end open watches and stop within seconds instead of waiting up to the
		// 60 s request timeout for them; clients see a clean end of stream and re-watch.
		"--shutdown-watch-termination-grace-period=2s",
		"--shutdown-send-retry-after=true",
	}
	if k.opts.EtcdCompactionInterval > 0 {
		args = append(args, "--etcd-compaction-interval="+k.opts.EtcdCompactionInterval.String())
	}
	if len(k.opts.WatchCacheSizes) > 0 {
		args = append(args, "--watch-cache-sizes="+strings.Join(k.opts.WatchCacheSizes, ","))
	}
	if k.opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+k.opts.FeatureGates)
	}
	if k.opts.Audit != nil {
		audit, err := auditArgs(k.Dir, k.opts.Audit)
		if err != nil {
			return nil, fmt.Errorf("write the audit configuration: %w", err)
		}
		args = append(args, audit...)
	}
	return append(args, k.opts.ExtraArgs...), nil
}

func (k *Kube) startAPIServer(ctx context.Context) error {
	args, err := k.apiserverArgs()
	if err != nil {
		return err
	}
	p, err := startKubeProc("kube-apiserver", k.LogPath(), k.apiBin, args...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.apiserver = p
	k.mu.Unlock()
	return k.waitAPIServerReady(ctx)
}

// waitAPIServerReady polls /readyz (which includes RBAC bootstrap and, since 1.36, watch
// cache initialization) until it answers 200.
func (k *Kube) waitAPIServerReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiserverReadyTimeout)
	defer cancel()
	k.mu.Lock()
	p := k.apiserver
	k.mu.Unlock()
	var last string
	for {
		if err := p.exitErr(); err != nil {
			return err
		}
		last = k.probe(ctx, k.Config.Host+"/readyz")
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (last /readyz: %s): %w\n%s", last, ctx.Err(), Tail(k.LogPath(), 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probe GETs url with the admin client and returns "" on 200, else what went wrong.
func (k *Kube) probe(ctx context.Context, url string) string {
	return probeURL(ctx, k.http, url)
}

func probeURL(ctx context.Context, c *http.Client, url string) string {
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return ""
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port with the same
// etcd, certificates and tokens, and returns once /readyz is ok. Open watches end; clients
// reconnect. The restarted apiserver's watch caches start from etcd's current revision, so
// a watch from an RV older than that gets 410 Gone for any cached resource (as after a real
// apiserver restart), and its metrics start from zero.
func (k *Kube) RestartAPIServer(ctx context.Context) error {
	return k.restartAPIServerAround(ctx, func() error { return nil })
}

// restartAPIServerAround stops the apiserver, runs between while it is down, and starts it.
func (k *Kube) restartAPIServerAround(ctx context.Context, between func() error) error {
	k.mu.Lock()
	p := k.apiserver
	k.mu.Unlock()
	if err := p.stop(30 * time.Second); err != nil {
		return err
	}
	k.http.CloseIdleConnections()
	if err := between(); err != nil {
		return err
	}
	return k.startAPIServer(ctx)
}

// StopEtcd stops etcd; the apiserver keeps running and fails requests until StartEtcd.
// etcd waits 7 s on SIGTERM for open watch streams (the apiserver's) to end, so after 2 s
// it is killed instead: a crash, which etcd's write-ahead log is made for.
func (k *Kube) StopEtcd() error {
	k.mu.Lock()
	p := k.etcd
	k.mu.Unlock()
	return p.stop(2 * time.Second)
}

// StartEtcd starts etcd again with the same data dir and ports (after StopEtcd; StartKube
// uses it for the first start too). It returns once etcd is healthy and, when the apiserver
// runs, once the apiserver's /readyz is ok again.
func (k *Kube) StartEtcd(ctx context.Context) error {
	p, err := startKubeProc("etcd", k.EtcdLogPath(), k.etcdBin, k.etcdArg...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.etcd = p
	api := k.apiserver
	k.mu.Unlock()

	waitCtx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	plain := &http.Client{}
	var last string
	for {
		if err := p.exitErr(); err != nil {
			return err
		}
		if last = probeURL(waitCtx, plain, k.EtcdURL+"/health"); last == "" {
			break
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("etcd not healthy (last /health: %s): %w\n%s", last, waitCtx.Err(), Tail(k.EtcdLogPath(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if api == nil || api.exitErr() != nil { // not started yet, or stopped around a restart
		return nil
	}
	return k.waitAPIServerReady(ctx)
}

// APIServerPID is the process id of the running kube-apiserver, for benchmarks that read
// its memory (/proc/PID/status); 0 when none runs.
func (k *Kube) APIServerPID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apiserver == nil || k.apiserver.cmd.Process == nil {
		return 0
	}
	return k.apiserver.cmd.Process.Pid
}
