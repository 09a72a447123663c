package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestARestartAfterHistoryExpiredRelistsOnceAndWritesOnlyTheDifference(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "x")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	createConfigMaps(t, ns, 0, 20, map[string]string{"v": "0"})
	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, ns) })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	conn := connect(t, dsn)
	before := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns)

	// While kube-cdc is down: delete 3, change 2, create 1; then the history goes.
	for _, i := range []int{0, 1, 2} {
		if err := cms.Delete(ctx, "cm-"+strconv.Itoa(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	changed := map[string]string{}
	for _, i := range []int{3, 4} {
		c, err := cms.Get(ctx, "cm-"+strconv.Itoa(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Data["v"] = "changed"
		if c, err = cms.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		changed[c.Name] = c.ResourceVersion
	}
	if _, err := cms.Create(ctx, configMap(ns, "new", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)

	d = start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	for _, i := range []int{0, 1, 2} {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND name = $2 AND deleted_at IS NOT NULL AND delete_inferred`, ns, "cm-"+strconv.Itoa(i)); n != 1 {
			t.Errorf("cm-%d: not soft-deleted with delete_inferred=true", i)
		}
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = $2 AND op = 'delete' AND inferred`, ns, "cm-"+strconv.Itoa(i)); n != 1 {
			t.Errorf("cm-%d: %d inferred delete rows in changes, want 1", i, n)
		}
	}
	for name, rv := range changed {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = $2 AND resource_version = $3 AND op = 'update' AND snapshot`, ns, name, rv); n != 1 {
			t.Errorf("%s: no snapshot update row at rv %s", name, rv)
		}
	}
	after := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns)
	if after-before != 3+2+1 {
		t.Errorf("the relist wrote %d changes rows, want 6 (3 inferred deletes, 2 updates, 1 create; none for the 15 unchanged objects)", after-before)
	}
	if got := countRelists(d.log()); got != 1 {
		t.Errorf("%d relists in the second run, want 1:\n%s", got, d.log())
	}
}

func countRelists(log string) int {
	n := 0
	for i := 0; ; n++ {
		j := indexFrom(log, "msg=relisted", i)
		if j < 0 {
			return n
		}
		i = j + 1
	}
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestKillDashNineDuringABurstThenRestartConvergesWithoutDuplicates(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "k")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitSynced(t, dsn)

	// 2,000 writes from 8 writers: creates, then updates and deletes of some of them.
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var killed sync.Once
	checkpoints := make(chan int64, 100)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				name := fmt.Sprintf("w%d-%d", w, i%100)
				var err error
				switch {
				case i < 100:
					_, err = cms.Create(ctx, configMap(ns, name, map[string]string{"i": "0"}), metav1.CreateOptions{})
				case i < 200:
					var c = configMap(ns, name, map[string]string{"i": strconv.Itoa(i)})
					_, err = cms.Update(ctx, c, metav1.UpdateOptions{})
				default:
					err = cms.Delete(ctx, name, metav1.DeleteOptions{})
				}
				if err != nil {
					errs <- err
					return
				}
				if w == 0 && i == 120 {
					killed.Do(func() {
						var rv int64
						_ = conn.QueryRow(ctx, `SELECT max(resource_version) FROM kube_cdc.checkpoints`).Scan(&rv)
						checkpoints <- rv
						_ = d.cmd.Process.Kill() // SIGKILL: no flush, no goodbye
					})
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	<-d.done
	var atKill int64 = <-checkpoints
	var afterKill int64
	if err := conn.QueryRow(ctx, `SELECT max(resource_version) FROM kube_cdc.checkpoints`).Scan(&afterKill); err != nil {
		t.Fatal(err)
	}
	if afterKill < atKill {
		t.Errorf("checkpoint moved backwards across the kill: %d then %d", atKill, afterKill)
	}

	want := listedConfigMaps(t, ns)
	d = start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if n := count(t, conn, `SELECT count(*) FROM (SELECT 1 FROM kube_cdc.changes WHERE namespace = $1
		GROUP BY name, resource_version, op HAVING count(*) > 1) d`, ns); n != 0 {
		t.Errorf("%d (key, rv, op) appear more than once in changes", n)
	}
	var final int64
	if err := conn.QueryRow(ctx, `SELECT max(resource_version) FROM kube_cdc.checkpoints`).Scan(&final); err != nil {
		t.Fatal(err)
	}
	if final < afterKill {
		t.Errorf("checkpoint moved backwards after the restart: %d then %d", afterKill, final)
	}
	// Every observed live object and every deleted one is accounted for.
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND deleted_at IS NOT NULL`, ns); n != 8*50 {
		t.Errorf("%d tombstones, want %d", n, 8*50)
	}
}

func TestAPostgresRestartMidStreamIsRetriedAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "p")
	dsn := pg.NewDatabase(t)
	d := start(t, "run", "-c", pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""))
	waitSynced(t, dsn)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	for i := range 50 {
		if i == 20 {
			if err := pg.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cms.Create(ctx, configMap(ns, "cm-"+strconv.Itoa(i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns); n != 50 {
		t.Errorf("%d changes rows, want 50", n)
	}
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited on a Postgres restart:\n%s", d.log())
	default:
	}
	if !strings.Contains(d.log(), "retrying") {
		t.Errorf("the log shows no retried write across the Postgres restart:\n%s", d.log())
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// waitSynced waits until the daemon has checkpointed its initial sync of one resource.
func waitSynced(t *testing.T, dsn string) {
	t.Helper()
	conn := connect(t, dsn)
	eventually(t, 60*time.Second, func() error {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&n)
		if err == nil && n != 1 {
			err = fmt.Errorf("%d checkpoints", n)
		}
		return err
	})
}

func TestAnAPIServerRestartMidStreamIsSurvivedWithARelistAndNoDuplicates(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "a")
	dsn := pg.NewDatabase(t)
	d := start(t, "run", "-c", pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""))
	waitSynced(t, dsn)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	createConfigMaps(t, ns, 0, 20, nil)
	// The restarted apiserver's watch cache starts at etcd's current revision: kube-cdc's
	// watch closes, its re-watch from the last RV gets 410 Gone, and it relists.
	if err := kube.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, ns, 20, 30, nil)
	if err := cms.Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM (SELECT 1 FROM kube_cdc.changes WHERE namespace = $1
		GROUP BY name, resource_version, op HAVING count(*) > 1) d`, ns); n != 0 {
		t.Errorf("%d (key, rv, op) appear more than once in changes", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND op = 'create'`, ns); n != 30 {
		t.Errorf("%d create rows, want 30 (each object once, watched or listed)", n)
	}
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited on an apiserver restart:\n%s", d.log())
	default:
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
