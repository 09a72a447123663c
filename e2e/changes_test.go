package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// changeRows returns the changes rows of a namespace's ConfigMaps in id order as
// "name op rv inferred snapshot".
func changeRows(t *testing.T, dsn, ns string) []string {
	t.Helper()
	conn := connect(t, dsn)
	rows, err := conn.Query(context.Background(), `SELECT name, op, resource_version, inferred, snapshot FROM kube_cdc.changes
		WHERE resource = 'configmaps' AND namespace = $1 ORDER BY id`, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, op string
		var rv int64
		var inferred, snapshot bool
		if err := rows.Scan(&name, &op, &rv, &inferred, &snapshot); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d %v %v", name, op, rv, inferred, snapshot))
	}
	return out
}

func TestWatchedCreatesUpdatesAndDeletesLandInRVOrderAndARecreatedObjectRevives(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "w")
	dsn := pg.NewDatabase(t)
	d := start(t, "run", "-c", pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""))
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	// Wait for the initial (empty) sync to checkpoint, so what follows is watched.
	waitSynced(t, dsn)
	conn := connect(t, dsn)

	var want []string
	c, err := cms.Create(ctx, configMap(ns, "a", map[string]string{"v": "0"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, "a create "+c.ResourceVersion+" false false")
	firstUID := c.UID
	for i := 1; i <= 3; i++ {
		c.Data["v"] = strconv.Itoa(i)
		if c, err = cms.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "a update "+c.ResourceVersion+" false false")
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		var deleted bool
		var inferred bool
		err := conn.QueryRow(ctx, `SELECT deleted_at IS NOT NULL, delete_inferred FROM kube_cdc.objects WHERE namespace = $1 AND name = 'a'`, ns).Scan(&deleted, &inferred)
		if err == nil && (!deleted || inferred) {
			err = fmt.Errorf("deleted=%v inferred=%v, want a soft delete that was observed", deleted, inferred)
		}
		return err
	})
	var delRV int64
	if err := conn.QueryRow(ctx, `SELECT resource_version FROM kube_cdc.objects WHERE namespace = $1 AND name = 'a'`, ns).Scan(&delRV); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("a delete %d false false", delRV))

	c2, err := cms.Create(ctx, configMap(ns, "a", map[string]string{"v": "again"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, "a create "+c2.ResourceVersion+" false false")
	eventually(t, 30*time.Second, func() error {
		var uid string
		var alive bool
		err := conn.QueryRow(ctx, `SELECT uid, deleted_at IS NULL FROM kube_cdc.objects WHERE namespace = $1 AND name = 'a'`, ns).Scan(&uid, &alive)
		if err == nil && (uid != string(c2.UID) || !alive) {
			err = fmt.Errorf("row uid %s alive=%v; want the new uid %s (old %s) alive", uid, alive, c2.UID, firstUID)
		}
		return err
	})
	got := changeRows(t, dsn, ns)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestARestartWithinTheHistoryWindowResumesWithoutAListAndMissesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "r")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	createConfigMaps(t, ns, 0, 10, map[string]string{"v": "0"})
	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, ns) })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}

	// 50 changes while kube-cdc is down.
	var rvs []string
	for i := range 50 {
		name := "cm-" + strconv.Itoa(i%10)
		c, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Data["v"] = strconv.Itoa(i + 1)
		if c, err = cms.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, c.ResourceVersion)
	}
	want := listedConfigMaps(t, ns) // the test's own last LIST: none from here on
	lists, err := kube.RequestCount(ctx, "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	after, err := kube.RequestCount(ctx, "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if probes := probeLists(d.log()); after-lists != probes {
		t.Errorf("the apiserver counted %v LIST requests of configmaps during the restart, want only the %v one-object probes before watches", after-lists, probes)
	}
	conn := connect(t, dsn)
	for _, rv := range rvs {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND resource_version = $2 AND op = 'update' AND NOT snapshot`, ns, rv); n != 1 {
			t.Errorf("rv %s: %d update rows, want 1", rv, n)
		}
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND snapshot`, ns); n != 10 {
		t.Errorf("%d snapshot rows, want the 10 of the first start only (a relist happened?)", n)
	}
	if strings.Contains(d.log(), "relisted") {
		t.Errorf("the second run relisted:\n%s", d.log())
	}
}
