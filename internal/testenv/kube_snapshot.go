package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A restore the way Kubernetes' etcd docs recommend: an online snapshot (`etcdctl snapshot
// save`), restored with `etcdutl snapshot restore --bump-revision 1000000000
// --mark-compacted`. The restored etcd's revision jumps far past any resource version a
// client holds, and the history below it is compacted, so resource versions never go back:
// a watch from an RV issued before the restore is answered 410 Gone and the client relists.
// The objects themselves are back at the snapshot's versions, with their old RVs, below
// what a client that saw later versions holds.

// EtcdRestoreBump is the --bump-revision of RestoreEtcdSnapshot: the one Kubernetes' docs
// give.
const EtcdRestoreBump = 1_000_000_000

// SnapshotEtcd saves an online snapshot of etcd (the etcd client's Snapshot, what `etcdctl
// snapshot save` does) to a file in Dir and returns its path, for RestoreEtcdSnapshot. The
// apiserver and etcd keep running.
func (k *Kube) SnapshotEtcd(ctx context.Context) (string, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{k.EtcdURL},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return "", fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	r, err := cli.Snapshot(ctx)
	if err != nil {
		return "", fmt.Errorf("etcd snapshot: %w", err)
	}
	defer r.Close()
	path := filepath.Join(k.Dir, fmt.Sprintf("etcd-snapshot-%d.db", backups.Add(1)))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return "", fmt.Errorf("etcd snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, nil
}

// RestoreEtcdSnapshot stops the apiserver and etcd, replaces etcd's data dir with the
// snapshot (SnapshotEtcd) restored by `etcdutl snapshot restore --bump-revision
// 1000000000 --mark-compacted` (EtcdRestoreBump), and starts etcd and the apiserver on
// it. It needs etcdutl beside etcd (hack/testbin/build.sh builds it).
func (k *Kube) RestoreEtcdSnapshot(ctx context.Context, snapshot string) error {
	etcdutl := filepath.Join(filepath.Dir(k.etcdBin), "etcdutl")
	if _, err := os.Stat(etcdutl); err != nil {
		return fmt.Errorf("etcdutl not found beside etcd in %s: run `make testbin` (hack/testbin/build.sh builds it from the Go module proxy)", filepath.Dir(k.etcdBin))
	}
	peer := k.etcdFlag("--initial-advertise-peer-urls")
	return k.aroundEtcd(ctx, func(data string) error {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, etcdutl, "snapshot", "restore", snapshot,
			"--data-dir="+data, "--name="+k.etcdFlag("--name"),
			"--initial-cluster="+k.etcdFlag("--initial-cluster"), "--initial-advertise-peer-urls="+peer,
			fmt.Sprintf("--bump-revision=%d", EtcdRestoreBump), "--mark-compacted")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("etcdutl snapshot restore: %w: %s", err, out)
		}
		return nil
	})
}

// etcdFlag is the value of etcd's command-line flag name ("--name"), "" when not given.
func (k *Kube) etcdFlag(name string) string {
	for _, a := range k.etcdArg {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
