package e2e

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// After an etcd restore the new history issues again the RVs the lost one had: the old
// history's audit event that answered RV X on a key is not the actor of the new
// history's change at RV X on that key (migration 014), and the new history's own event,
// written before kube-cdc found the restore, is.
func TestAfterAnEtcdRestoreTheOldHistorysAuditEventIsNotTheActorOfTheNewChangeAtItsRV(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// kube-cdc is stopped over the restore: the apiserver re-sends the new history's
	// events for a minute, until it is back.
	k, addr, certs := auditedPlane(t, testenv.AuditWebhookInitialBackoffFor(time.Minute))
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "epoch")
	cfg := pgConfig(t, dsn, "  - {name: configmaps, namespaces: ["+ns+"]}", auditConfig(t, addr, certs))
	a, b, c := testenv.TokenUsers[0], testenv.TokenUsers[1], testenv.TokenUsers[2]
	devA := userClient(t, k, a, nil).CoreV1().ConfigMaps(ns)
	devB := userClient(t, k, b, nil).CoreV1().ConfigMaps(ns)
	devC := userClient(t, k, c, nil).CoreV1().ConfigMaps(ns)
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 1)
	if _, err := devA.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"v": "0"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActors(t, conn, ns, []want{{"configmaps", "c", "create", a, "", "exact"}})

	backup, err := k.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The backup restarted the apiserver: once kube-cdc has the admin's (unaudited)
	// sentinel it watches again, and sees each of the versions that follow.
	if _, err := k.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sentinel"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wants := []want{{"configmaps", "c", "create", a, "", "exact"}, {"configmaps", "sentinel", "create", "", "", ""}}
	waitActors(t, conn, ns, wants)
	// Lost to the restore: 30 versions by dev-b, whose RVs the new history issues again.
	for i := range 30 {
		cm, err := devB.Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": "lost-" + strconv.Itoa(i)}
		if _, err := devB.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{"configmaps", "c", "update", b, "", "exact"})
	}
	old := map[int64]bool{}
	for _, r := range waitActors(t, conn, ns, wants) {
		if r.user == b {
			old[r.rv] = true
		}
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// dev-c updates c until the apiserver answers an RV one of dev-b's lost versions had.
	var reused int64
	for i := 0; reused == 0; i++ {
		if i == 60 {
			t.Fatalf("60 updates after the restore and none at one of the lost RVs %v", old)
		}
		cm, err := devC.Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": "new-" + strconv.Itoa(i)}
		if cm, err = devC.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64); old[rv] {
			reused = rv
		}
	}

	start(t, "run", "-c", cfg)
	// The new history's change at the reused RV (epoch 1) is dev-c's; the lost one at
	// the same RV (epoch 0) stays dev-b's.
	eventually(t, 2*time.Minute, func() error {
		rows, err := conn.Query(ctx, `SELECT c.epoch, coalesce(a.username, ''), coalesce(a.match, '')
			  FROM kube_cdc.changes c LEFT JOIN kube_cdc.change_actors a ON a.change_id = c.id
			 WHERE c.namespace = $1 AND c.name = 'c' AND c.resource_version = $2 ORDER BY c.epoch`, ns, reused)
		if err != nil {
			return err
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var epoch int
			var user, match string
			if err := rows.Scan(&epoch, &user, &match); err != nil {
				return err
			}
			got = append(got, fmt.Sprintf("epoch %d by %q %s", epoch, user, match))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if want := []string{fmt.Sprintf("epoch 0 by %q exact", b), fmt.Sprintf("epoch 1 by %q exact", c)}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("the changes at RV %d: %q, want %q", reused, got, want)
		}
		return nil
	})
}
