package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Time travel: an etcd restored from a backup, or a cluster rebuilt on an empty etcd. Both
// leave every client holding resource versions from a future the cluster never reaches in
// the same way (a restored etcd reissues the RVs after its backup for other changes).

var backups atomic.Int64

// BackupEtcd copies etcd's data dir, with the apiserver and etcd stopped so the copy is
// consistent, and starts both again; it returns the copy's path (inside Dir) for
// RestoreEtcd. It is what an operator's offline backup of a control plane node is.
func (k *Kube) BackupEtcd(ctx context.Context) (string, error) {
	dst := filepath.Join(k.Dir, fmt.Sprintf("etcd-backup-%d", backups.Add(1)))
	err := k.aroundEtcd(ctx, func(data string) error {
		return copyDir(data, dst)
	})
	return dst, err
}

// RestoreEtcd replaces etcd's data with the backup (BackupEtcd) and starts etcd and the
// apiserver on it, as `etcdutl snapshot restore` without --bump-revision does: the cluster
// is back at the backup's revision, and the resource versions issued since are issued
// again, for other changes. The apiserver's watch caches start from the restored revision.
func (k *Kube) RestoreEtcd(ctx context.Context, backup string) error {
	return k.aroundEtcd(ctx, func(data string) error {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		return copyDir(backup, data)
	})
}

// WipeEtcd starts etcd and the apiserver on an empty data dir: a cluster rebuilt under the
// same name. The apiserver creates its system namespaces (kube-system with a new uid) and
// bootstrap RBAC again; every object a test made is gone.
func (k *Kube) WipeEtcd(ctx context.Context) error {
	return k.aroundEtcd(ctx, os.RemoveAll)
}

// aroundEtcd stops the apiserver and etcd, runs between on etcd's data dir, and starts
// etcd and the apiserver again.
func (k *Kube) aroundEtcd(ctx context.Context, between func(dataDir string) error) error {
	return k.restartAPIServerAround(ctx, func() error {
		if err := k.StopEtcd(); err != nil {
			return fmt.Errorf("stop etcd: %w", err)
		}
		if err := between(filepath.Join(k.Dir, "etcd")); err != nil {
			return err
		}
		return k.StartEtcd(ctx)
	})
}

// copyDir copies the directory tree src to dst (which must not exist), keeping modes.
func copyDir(src, dst string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s to %s: %w: %s", src, dst, err, out)
	}
	return nil
}
