package testenv

import (
	"context"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// What `etcdutl snapshot restore --bump-revision --mark-compacted` promises, and what
// kube-cdc's tests of it rely on: the objects are back at the snapshot's versions (same
// uid, same RV), what was written since is gone, new writes get RVs past everything
// issued before the restore, and a watch from an RV issued before it is answered 410.
func TestKubeRestoreEtcdSnapshotBumpsTheRevisionAndExpiresTheHistoryBeforeIt(t *testing.T) {
	k := NewKube(t, KubeOptions{})
	ctx := testContext(t, 3*time.Minute)
	cms := k.Clientset().CoreV1().ConfigMaps("default")
	kept, err := cms.Create(ctx, configMap("default", "kept", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := k.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changed := kept.DeepCopy()
	changed.Data = map[string]string{"v": "2-lost"}
	if changed, err = cms.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, configMap("default", "lost", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := k.RestoreEtcdSnapshot(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.UID != kept.UID || got.ResourceVersion != kept.ResourceVersion || got.Data["v"] != "1" {
		t.Errorf("kept after the restore: %v, %v; want uid %s at the snapshot's RV %s", got, err, kept.UID, kept.ResourceVersion)
	}
	if _, err := cms.Get(ctx, "lost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lost after the restore: %v, want NotFound", err)
	}
	again, err := cms.Create(ctx, configMap("default", "again", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	// The bump applies to the snapshot's revision, not to the last one issued before the
	// restore (writes after the snapshot are lost): what the restore must guarantee is
	// that new RVs exceed every RV issued before it, and the bump shows in their size.
	if rv(again.ResourceVersion) <= rv(before.ResourceVersion) || rv(again.ResourceVersion) < EtcdRestoreBump {
		t.Errorf("the first create after the restore got RV %s, want one above the %s issued before it and at least the bump %d",
			again.ResourceVersion, before.ResourceVersion, EtcdRestoreBump)
	}
	_, err = firstEvent(ctx, func(ctx context.Context) (watch.Interface, error) {
		return cms.Watch(ctx, metav1.ListOptions{ResourceVersion: changed.ResourceVersion})
	})
	if !isTooOld(err) {
		t.Errorf("a watch from RV %s, issued before the restore: %v, want 410 Gone", changed.ResourceVersion, err)
	}
}
