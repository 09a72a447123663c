package testenv

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"go.uber.org/zap"
)

// ExpireHistory makes every resource version issued before the call too old to watch
// from: afterwards a watch from any such RV gets 410 Gone ("too old resource version"),
// while a fresh LIST (and a watch from its RV) works.
//
// Compacting etcd alone is not enough: the apiserver serves watches of cached resources
// from its watch cache, which keeps its own window of recent events regardless of etcd
// compaction. So ExpireHistory
//  1. stops the apiserver, so no client write can land after step 2 and before the
//     restart (a write there would let a watcher's last RV reach the revision the fresh
//     watch cache starts at, and no 410 would come);
//  2. writes a scratch key outside /registry twice, so that etcd's revision is at least two
//     past any RV a client could hold (a watch from RV r starts at revision r+1, and etcd
//     still serves a watch that starts exactly at the compacted revision);
//  3. compacts etcd at that revision (physically), for resources watched straight from
//     etcd (watch cache disabled with WatchCacheSizes "resource#0");
//  4. starts the apiserver, whose fresh watch caches start from the current revision.
func (k *Kube) ExpireHistory(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{k.EtcdURL},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	return k.restartAPIServerAround(ctx, func() error {
		var rev int64
		for i := range 2 {
			resp, err := cli.Put(ctx, "/kube-cdc-testenv/expire-history", strconv.Itoa(i))
			if err != nil {
				return fmt.Errorf("bump etcd revision: %w", err)
			}
			rev = resp.Header.Revision
		}
		if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			return fmt.Errorf("compact etcd at revision %d: %w", rev, err)
		}
		return nil
	})
}

// CompactEtcd compacts etcd's history up to its current revision, and nothing else: the
// apiserver's watch caches keep serving the events they hold. ExpireHistory is what tests
// of 410 handling want; this exists to show the difference.
func (k *Kube) CompactEtcd(ctx context.Context) (revision int64, err error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{k.EtcdURL},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	resp, err := cli.Put(ctx, "/kube-cdc-testenv/compact", "")
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}
