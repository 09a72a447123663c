package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Time travel (issue 12): an etcd restored from a backup, or a cluster rebuilt on an empty
// etcd under the same `cluster` name, leaves kube-cdc's checkpoint ahead of the cluster
// and its sink holding versions the cluster never had or no longer has, with RVs the
// cluster issues again for other changes. These tests travel a private control plane (a
// restore would take every other test's objects with it) and run the binary.

// travelConfig streams the configmaps of ns on k into dsn.
func travelConfig(t *testing.T, k *testenv.Kube, dsn, ns string) string {
	return writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""), kube.Kubeconfig, k.Kubeconfig, 1))
}

// travelRows is "name uid rv v" of every live objects row of ns, sorted.
func travelRows(dsn, ns string) ([]string, error) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT name || ' ' || uid || ' ' || resource_version || ' ' || (object->'data'->>'v')
		FROM kube_cdc.objects WHERE namespace = $1 AND deleted_at IS NULL ORDER BY name`, ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// travelListed is what travelRows must equal: the cluster's configmaps of ns, by a fresh LIST.
func travelListed(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, fmt.Sprintf("%s %s %s %s", c.Name, c.UID, c.ResourceVersion, c.Data["v"]))
	}
	slices.Sort(out)
	return out
}

// waitConverged waits until the sink's live rows of ns equal a fresh LIST.
func waitConverged(t *testing.T, cs kubernetes.Interface, dsn, ns string, d *daemon) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		select {
		case <-d.done:
			return fmt.Errorf("kube-cdc exited:\n%s", d.log())
		default:
		}
		got, err := travelRows(dsn, ns)
		if err != nil {
			return err
		}
		if want := travelListed(t, cs, ns); !slices.Equal(got, want) {
			return fmt.Errorf("live rows\n  %s\nwant a fresh LIST's\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		return nil
	})
}

func setData(t *testing.T, cs kubernetes.Interface, ns, name, v string) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, map[string]string{"v": v}), metav1.CreateOptions{})
	} else {
		c.Data = map[string]string{"v": v}
		c, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tombstonedInEpoch1 counts the objects rows of ns named name that an inferred delete
// tombstoned in epoch 1.
func tombstonedInEpoch1(t *testing.T, dsn, ns, name string) int {
	t.Helper()
	return count(t, connect(t, dsn), `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND name = $2
		AND deleted_at IS NOT NULL AND delete_inferred AND epoch = 1`, ns, name)
}

// writePast updates (or creates) ns/name until the cluster's RV is past rv.
func writePast(t *testing.T, cs kubernetes.Interface, ns, name string, rv int64) {
	t.Helper()
	for i := 0; ; i++ {
		if c := setData(t, cs, ns, name, fmt.Sprint(i)); rvInt(c.ResourceVersion) > rv {
			return
		}
	}
}

func createNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// travelled checks what the time travel left behind: the log line at warn with both
// RVs, the epochs row, the checkpoint's epoch, and that every change written after the
// travel is in changes in the new epoch.
func travelled(t *testing.T, d *daemon, dsn, ns string, after []*corev1.ConfigMap, reason string) {
	t.Helper()
	if reason == "list-below-checkpoint" && len(writersLines(d.log(), "the server is behind this stream's resource version"))+
		len(writersLines(d.log(), "time travel at start")) == 0 {
		t.Errorf("no line says the server was found behind the checkpoint, at start or before a watch:\n%s", d.log())
	}
	reasonOK := func(line string) bool {
		if reason == "" { // either finds it first
			return strings.Contains(line, "reason=list-below-checkpoint") || strings.Contains(line, "reason=object-went-back") ||
				strings.Contains(line, "reason=cluster-identity")
		}
		return strings.Contains(line, "reason="+reason)
	}
	lines := writersLines(d.log(), "time travel: the cluster is behind what the sink holds")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "checkpoint=") ||
		!strings.Contains(lines[0], "list_resource_version=") || !strings.Contains(lines[0], "epoch=1") || !reasonOK(lines[0]) {
		t.Errorf("time travel lines, want one warning with both RVs, epoch 1 and reason %s:\n%s", reason, strings.Join(lines, "\n"))
	}
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.epochs WHERE resource = 'configmaps' AND epoch = 1`); n != 1 {
		t.Errorf("%d epochs rows of epoch 1, want 1", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource = 'configmaps' AND epoch = 1`); n != 1 {
		t.Errorf("%d checkpoints in epoch 1, want 1", n)
	}
	for _, c := range after {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = $2 AND uid = $3
			AND resource_version = $4 AND epoch = 1`, ns, c.Name, string(c.UID), rvInt(c.ResourceVersion)); n != 1 {
			t.Errorf("%d changes rows of %s@%s in epoch 1, want 1", n, c.Name, c.ResourceVersion)
		}
	}
}

func TestAfterAnEtcdRestoreTheSinkConvergesToTheRestoredClusterInANewEpochAndMissesNothingWrittenSince(t *testing.T) {
	t.Parallel() // a private control plane each: they overlap with each other only
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns = "travel"
	createNamespace(t, cs, ns)
	for _, n := range []string{"kept", "restored", "deleted-later"} {
		setData(t, cs, ns, n, "1")
	}
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns)
	d := start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)

	backup, err := k.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// After the backup, synced: then lost by the restore. More changes are lost than the
	// restored cluster makes before kube-cdc starts again, so its RV is still behind the
	// checkpoint then.
	for i := range 30 {
		setData(t, cs, ns, "restored", fmt.Sprintf("2-lost-%d", i))
	}
	setData(t, cs, ns, "lost", "2-lost")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "deleted-later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, cs, dsn, ns, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// Written after the restore, with RVs the lost changes had: none may be dropped.
	after := []*corev1.ConfigMap{setData(t, cs, ns, "restored", "3"), setData(t, cs, ns, "new", "3")}

	d = start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	after = append(after, setData(t, cs, ns, "kept", "4"))
	waitConverged(t, cs, dsn, ns, d)
	// The newest object the sink holds, seen again at its restored RV, or the probe
	// before the watch, finds it first.
	travelled(t, d, dsn, ns, after, "")
	if code, out := runCLI(t, "status", "-c", cfg); code != 0 || !strings.Contains(out, "epoch 1: the cluster went back in time") {
		t.Errorf("status: exit %d, want it to show epoch 1 of configmaps:\n%s", code, out)
	}
	if n := tombstonedInEpoch1(t, dsn, ns, "lost"); n != 1 {
		t.Errorf("the object the restore took away: %d inferred tombstones in epoch 1, want 1", n)
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// The restored cluster has written past the checkpoints before kube-cdc starts again: no
// probe finds the server behind, and a watch from a checkpoint would miss the changes the
// restored cluster made below it and leave the lost versions in the sink. The newest
// version the sink holds of one namespace, seen again at a lower RV under the same uid,
// reveals it; the other namespace, whose lost object simply no longer exists, shows
// nothing by itself and relists in the new epoch because the first one did.
func TestAfterAnEtcdRestoreWhoseRVsPassedTheCheckpointTheNewestHeldObjectRevealsIt(t *testing.T) {
	t.Parallel() // a private control plane each: they overlap with each other only
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns, quiet = "passed", "quiet"
	createNamespace(t, cs, ns)
	createNamespace(t, cs, quiet)
	setData(t, cs, ns, "restored", "1")
	setData(t, cs, quiet, "kept", "1")
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns+", "+quiet)
	d := start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	waitConverged(t, cs, dsn, quiet, d)

	backup, err := k.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	setData(t, cs, ns, "restored", "2-lost")
	setData(t, cs, quiet, "lost", "2-lost")
	waitConverged(t, cs, dsn, ns, d)
	waitConverged(t, cs, dsn, quiet, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	var checkpoint int64
	if err := connect(t, dsn).QueryRow(ctx, `SELECT max(resource_version) FROM kube_cdc.checkpoints`).Scan(&checkpoint); err != nil {
		t.Fatal(err)
	}

	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	writePast(t, cs, "default", "busy", checkpoint)
	d = start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	waitConverged(t, cs, dsn, quiet, d)
	lines := writersLines(d.log(), "time travel: the cluster is behind what the sink holds")
	var went, other int
	for _, l := range lines {
		switch {
		case strings.Contains(l, "reason=object-went-back") && strings.Contains(l, "object="+ns+"/restored"):
			went++
		case strings.Contains(l, "reason=another-resource") && strings.Contains(l, "found_in=configmaps"):
			other++
		}
	}
	if went != 1 || other != 1 || len(lines) != 2 {
		t.Errorf("time travel lines, want one object-went-back of %s/restored and one another-resource:\n%s", ns, strings.Join(lines, "\n"))
	}
	if n := tombstonedInEpoch1(t, dsn, quiet, "lost"); n != 1 {
		t.Errorf("the quiet namespace's lost object: %d inferred tombstones in epoch 1, want 1", n)
	}
}

func TestAClusterRebuiltUnderTheSameNameIsSyncedInANewEpoch(t *testing.T) {
	t.Parallel() // a private control plane each: they overlap with each other only
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns = "rebuilt"
	createNamespace(t, cs, ns)
	for i := range 60 { // the old cluster's RVs run well past the new one's
		setData(t, cs, ns, fmt.Sprintf("old-%d", i%3), fmt.Sprint(i))
	}
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns)
	d := start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	if err := k.WipeEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, cs, ns)
	after := []*corev1.ConfigMap{setData(t, cs, ns, "old-1", "new"), setData(t, cs, ns, "fresh", "new")}
	d = start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	// The cluster's identity or its RVs below the checkpoint: whichever check comes first.
	travelled(t, d, dsn, ns, after, "")
	if n := count(t, connect(t, dsn), `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND name IN ('old-0', 'old-2')
		AND deleted_at IS NOT NULL AND delete_inferred`, ns); n != 2 {
		t.Errorf("%d of the old cluster's 2 vanished objects tombstoned, want 2", n)
	}
}

// probeLists counts the one-object LISTs a daemon made before its watches to find a server
// behind its checkpoint (time travel): LIST requests that are no relist.
func probeLists(log string) float64 {
	return float64(len(writersLines(log, "asked the server for its resource version before watching")) +
		len(writersLines(log, "asked the server for the newest object the sink holds")))
}

// A cluster rebuilt under the same name whose RVs have passed the old checkpoints before
// kube-cdc starts again: no probe finds the server behind, and the newest object the sink
// holds is gone or has another uid. The cluster's identity (the kube-system namespace's
// uid), kept with every checkpoint, tells.
func TestAClusterRebuiltWhoseRVsPassedTheCheckpointIsFoundByItsIdentity(t *testing.T) {
	t.Parallel() // a private control plane each: they overlap with each other only
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns = "identity"
	createNamespace(t, cs, ns)
	setData(t, cs, ns, "old", "1")
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns)
	d := start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	var checkpoint int64
	var uid string
	if err := connect(t, dsn).QueryRow(ctx, `SELECT resource_version, cluster_uid FROM kube_cdc.checkpoints`).Scan(&checkpoint, &uid); err != nil {
		t.Fatal(err)
	}
	if system, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil || string(system.UID) != uid {
		t.Fatalf("the checkpoint's cluster_uid is %q, want kube-system's uid (%v)", uid, err)
	}

	if err := k.WipeEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, cs, ns)
	writePast(t, cs, ns, "new", checkpoint) // the new cluster's RVs pass the old checkpoint
	d = start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	lines := writersLines(d.log(), "time travel: the cluster is behind what the sink holds")
	if len(lines) != 1 || !strings.Contains(lines[0], "reason=cluster-identity") || !strings.Contains(lines[0], "epoch=1") {
		t.Errorf("time travel lines, want one with reason cluster-identity into epoch 1:\n%s", strings.Join(lines, "\n"))
	}
	if n := tombstonedInEpoch1(t, dsn, ns, "old"); n != 1 {
		t.Errorf("the old cluster's object: %d inferred tombstones in epoch 1, want 1", n)
	}
}

// A restore done the way Kubernetes' etcd docs recommend, `etcdutl snapshot restore
// --bump-revision 1000000000 --mark-compacted`, while kube-cdc is down: the restored
// cluster's RVs are far past every checkpoint, so no probe finds the server behind, and
// its history below the bump is compacted, so the watch from the checkpoint is answered
// 410 Gone. What the sink holds shows the travel: the object deleted after the snapshot
// is back, same uid, at an RV below its delete. The sink converges in a new epoch.
func TestAfterAnEtcdRestoreWithBumpedRevisionsTheSinkConvergesInANewEpoch(t *testing.T) {
	t.Parallel() // a private control plane each: they overlap with each other only
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns = "bumped"
	createNamespace(t, cs, ns)
	for _, n := range []string{"kept", "restored", "deleted-later"} {
		setData(t, cs, ns, n, "1")
	}
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns)
	d := start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)

	snapshot, err := k.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	setData(t, cs, ns, "restored", "2-lost")
	setData(t, cs, ns, "lost", "2-lost")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "deleted-later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, cs, dsn, ns, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	if err := k.RestoreEtcdSnapshot(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	after := []*corev1.ConfigMap{setData(t, cs, ns, "new", "3")}
	if rvInt(after[0].ResourceVersion) < testenv.EtcdRestoreBump {
		t.Fatalf("the first write after the restore got RV %s: the restore did not bump the revision", after[0].ResourceVersion)
	}
	d = start(t, "run", "-c", cfg)
	waitConverged(t, cs, dsn, ns, d)
	after = append(after, setData(t, cs, ns, "kept", "4"))
	waitConverged(t, cs, dsn, ns, d)
	travelled(t, d, dsn, ns, after, "object-went-back")
	if n := tombstonedInEpoch1(t, dsn, ns, "lost"); n != 1 {
		t.Errorf("the object the restore took away: %d inferred tombstones in epoch 1, want 1", n)
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
