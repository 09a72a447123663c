package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestARestartAfterHistoryExpiredRelistsOnceAndWritesOnlyTheDifference(t *testing.T) {
	t.Parallel() // a control plane of its own: it expires etcd's history
	kube := privatePlane(t)
	ctx := context.Background()
	ns := namespace(t, "x")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	h := &history{kube: kube}
	rec := h.configMaps(ns)
	objs := map[string]*corev1.ConfigMap{}
	for i := range 20 {
		c, err := rec.create(ctx, "cm-"+strconv.Itoa(i), map[string]string{"v": "0"})
		if err != nil {
			t.Fatal(err)
		}
		objs[c.Name] = c
	}
	first := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, ns) })
	if code := first.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	conn := connect(t, dsn)
	before := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns)

	// While kube-cdc is down: delete 3, change 2, create 1; then the history goes.
	for _, i := range []int{0, 1, 2} {
		name := "cm-" + strconv.Itoa(i)
		if err := rec.delete(ctx, name, string(objs[name].UID)); err != nil {
			t.Fatal(err)
		}
	}
	changed := map[string]string{}
	for _, i := range []int{3, 4} {
		c := objs["cm-"+strconv.Itoa(i)].DeepCopy()
		c.Data["v"] = "changed"
		c, err := rec.update(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		changed[c.Name] = c.ResourceVersion
	}
	if _, err := rec.create(ctx, "new", nil); err != nil {
		t.Fatal(err)
	}
	if err := kube.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)

	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	checkDelivered(t, dsn, ns, h.all(), first, d)
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

func TestKillDashNineDuringABurstThenRestartLosesNothingAndNeverCheckpointsAheadOfTheRows(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "k")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	first := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	sampler := startSampler(t, dsn, ns)

	// 2,000 writes from 8 writers: creates, then updates and deletes of some of them.
	h := &history{kube: kube}
	rec := h.configMaps(ns)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var killed sync.Once
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uids := map[string]string{}
			for i := range 250 {
				name := fmt.Sprintf("w%d-%d", w, i%100)
				var err error
				switch {
				case i < 100:
					var c *corev1.ConfigMap
					if c, err = rec.create(ctx, name, map[string]string{"i": "0"}); err == nil {
						uids[name] = string(c.UID)
					}
				case i < 200:
					_, err = rec.update(ctx, configMap(ns, name, map[string]string{"i": strconv.Itoa(i)}))
				default:
					err = rec.delete(ctx, name, uids[name])
				}
				if err != nil {
					errs <- err
					return
				}
				if w == 0 && i == 120 {
					killed.Do(func() {
						sampler.sample()             // the checkpoint the crash leaves behind
						_ = first.cmd.Process.Kill() // SIGKILL: no flush, no goodbye
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
	<-first.done

	want := listedConfigMaps(t, ns)
	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	writes := h.all()
	checkDelivered(t, dsn, ns, writes, first, d)
	if sampler.check(t, writes, first, d) == 0 {
		t.Errorf("no sample checked a write: the checkpoint-vs-rows property was not tested")
	}
	if strings.Contains(d.log(), "relisted") {
		t.Errorf("the restart relisted instead of resuming from the checkpoint:\n%s", d.log())
	}
	// Every observed live object and every deleted one is accounted for.
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND deleted_at IS NOT NULL`, ns); n != 8*50 {
		t.Errorf("%d tombstones, want %d", n, 8*50)
	}
}

func TestAPostgresRestartMidStreamIsRetriedAndLosesNothing(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "p")
	priv := privatePostgres(t) // restarted below, while other tests run
	dsn := priv.NewDatabase(t)
	d := start(t, "run", "-c", pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""))
	waitSynced(t, dsn)
	h := &history{kube: kube}
	rec := h.configMaps(ns)
	create := func(from, to int) error {
		for i := from; i < to; i++ {
			if _, err := rec.create(ctx, "cm-"+strconv.Itoa(i), nil); err != nil {
				return err
			}
		}
		return nil
	}
	if err := create(0, 20); err != nil {
		t.Fatal(err)
	}
	// Five creates while the server is down, and the restart only once a write of theirs
	// has failed: the retry across the restart is certain, not a race with the restart.
	err := priv.RestartAfter(ctx, func(ctx context.Context) error {
		if err := create(20, 25); err != nil {
			return err
		}
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(d.log(), "retrying") {
			if time.Now().After(deadline) {
				return fmt.Errorf("no write was retried within a minute of PostgreSQL going down:\n%s", d.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := create(25, 50); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	checkDelivered(t, dsn, ns, h.all(), d)
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
	t.Parallel() // a control plane of its own: it restarts the apiserver
	kube := privatePlane(t)
	ctx := context.Background()
	ns := namespace(t, "a")
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	d := start(t, "run", "-c", writeConfig(t, opsConfigYAML(dsn, ns, addr, "")))
	waitSynced(t, dsn)
	h := &history{kube: kube}
	rec := h.configMaps(ns)
	create := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := rec.create(ctx, "cm-"+strconv.Itoa(i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(0, 20)
	res := map[string]string{"resource": "configmaps"}
	relists, err := metric(addr, "kube_cdc_relists_total", res)
	if err != nil {
		t.Fatal(err)
	}
	// The restarted apiserver's watch cache starts at etcd's current revision: kube-cdc's
	// watch closes, its re-watch from the last RV gets 410 Gone, and it relists. A write
	// kube-cdc does not watch (a namespace) puts that revision past kube-cdc's last RV
	// even if the apiserver writes nothing before its cache starts.
	namespace(t, "other")
	if err := kube.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	create(20, 30)
	cm0 := h.all()[0]
	if err := rec.delete(ctx, cm0.name, cm0.uid); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	waitMetricAbove(t, d, addr, "kube_cdc_gone_total", res, 0, 30*time.Second)
	waitMetricAbove(t, d, addr, "kube_cdc_relists_total", res, relists, 30*time.Second)
	if n := len(relistsOf(d)); n < 2 {
		t.Errorf("%d relists in the log, want the first start's and one after the restart:\n%s", n, d.log())
	}
	checkDelivered(t, dsn, ns, h.all(), d)
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND op = 'create'`, ns); n != 30 {
		t.Errorf("%d create rows, want 30 (each object once, watched or listed)", n)
	}
	stillRunning(t, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// A relist cut short by a crash must leave the old checkpoint: the batches it wrote
// carry no checkpoint of their own, so the restart relists and writes what the first run
// did not. The objects are created in reverse name order, so the LIST (by name) returns
// the newest first: a checkpoint taken from the first batches would be ahead of every
// object of the last one.
func TestKillDashNineMidRelistKeepsTheOldCheckpointAndTheRestartWritesTheRest(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "l")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "pipeline:\n  batchSize: 25\n")
	h := &history{kube: kube}
	rec := h.configMaps(ns)
	const n = 150
	objs := map[string]*corev1.ConfigMap{}
	for i := n - 1; i >= 0; i-- {
		c, err := rec.create(ctx, fmt.Sprintf("cm-%03d", i), map[string]string{"v": "0"})
		if err != nil {
			t.Fatal(err)
		}
		objs[c.Name] = c
	}
	if code, out := runCLI(t, "migrate", "-c", cfg); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}

	// Hold the relist's last batch: an uncommitted objects row with the key of the last
	// listed object makes kube-cdc's upsert (INSERT … ON CONFLICT on objects' primary key)
	// wait for this transaction to end.
	conn := connect(t, dsn)
	blocker, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	last := objs[fmt.Sprintf("cm-%03d", n-1)]
	if _, err := blocker.Exec(ctx, `INSERT INTO kube_cdc.objects (cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version)
		VALUES ('e2e', '', 'v1', 'configmaps', 'ConfigMap', $1, $2, $3, $4)`, ns, last.Name, string(last.UID), rvInt(last.ResourceVersion)); err != nil {
		t.Fatal(err)
	}
	sampler := startSampler(t, dsn, ns)
	first := start(t, "run", "-c", cfg)
	admin := connect(t, dsn)
	waiting := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
	eventually(t, 60*time.Second, func() error {
		if w := count(t, admin, waiting); w == 0 {
			return errors.New("no write of kube-cdc waits for the held row")
		}
		return nil
	})
	written := count(t, admin, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns)
	_ = first.cmd.Process.Kill()
	<-first.done
	// The checkpoint the crash left behind covers no object the relist did not write.
	newSampler(t, dsn, ns).check(t, h.all(), first)
	// The held batch must not commit after the crash either.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed mid-relist with %d of %d objects written", written, n)
	if written == 0 || written >= n {
		t.Fatalf("%d of %d objects written when the relist was held, want some but not all", written, n)
	}
	if n := len(relistsOf(first)); n != 1 {
		t.Fatalf("%d relists in the first run's log, want 1 (its LIST ended, its writes did not)", n)
	}

	// While it is down: change 3, delete 2, create 1.
	for _, i := range []int{0, 70, 149} {
		c := objs[fmt.Sprintf("cm-%03d", i)].DeepCopy()
		c.Data["v"] = "1"
		if _, err := rec.update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 148} {
		name := fmt.Sprintf("cm-%03d", i)
		if err := rec.delete(ctx, name, string(objs[name].UID)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.create(ctx, "new", nil); err != nil {
		t.Fatal(err)
	}
	want := listedConfigMaps(t, ns)
	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if n := len(relistsOf(d)); n != 1 {
		t.Errorf("%d relists after the restart, want 1: the crashed relist left no checkpoint to watch from:\n%s", n, d.log())
	}
	writes := h.all()
	checkDelivered(t, dsn, ns, writes, first, d)
	if sampler.check(t, writes, first, d) == 0 {
		t.Errorf("no sample checked a write: the checkpoint-vs-rows property was not tested")
	}
}
