package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 9 through the binary: scopes of one resource that differ by selector and by
// namespace share one PostgreSQL sink. Relists never tombstone another scope's live
// objects; an object relabelled out of every scope is tombstoned out-of-scope; a
// namespace removed from the configuration has its rows tombstoned out-of-scope and its
// checkpoint forgotten.
func TestScopesOfOneResourceTombstoneOnlyWhatLeftEveryScope(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	nsA, nsB := namespace(t, "sa"), namespace(t, "sb")
	dsn := pg.NewDatabase(t)
	conn := connect(t, dsn)
	put := func(ns, name, app string) {
		t.Helper()
		cms := kube.Clientset().CoreV1().ConfigMaps(ns)
		cm := configMap(ns, name, map[string]string{"v": "1"})
		cm.Labels = map[string]string{"app": app}
		if old, err := cms.Get(ctx, name, metav1.GetOptions{}); err == nil {
			old.Labels = cm.Labels
			if _, err := cms.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	row := func(ns, name string) string {
		var deleted, inferred bool
		var reason string
		err := conn.QueryRow(ctx, `SELECT deleted_at IS NOT NULL, delete_inferred, coalesce(delete_reason, '') FROM kube_cdc.objects
			WHERE resource = 'configmaps' AND namespace = $1 AND name = $2`, ns, name).Scan(&deleted, &inferred, &reason)
		switch {
		case err != nil:
			return err.Error()
		case !deleted:
			return "live"
		}
		return fmt.Sprintf("deleted inferred=%v reason=%s", inferred, reason)
	}
	expect := func(what string, want map[string]string) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			for k, w := range want {
				ns, name := nsA, k
				if k[0] == 'x' {
					ns = nsB
				}
				if got := row(ns, name); got != w {
					return fmt.Errorf("%s: %s/%s is %q, want %q", what, ns, name, got, w)
				}
			}
			return nil
		})
	}
	checkpoints := func(n int) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			var got int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&got)
			if err == nil && got != n {
				err = fmt.Errorf("%d checkpoints, want %d", got, n)
			}
			return err
		})
	}
	put(nsA, "a-0", "a")
	put(nsA, "a-1", "a")
	put(nsA, "b-0", "b")
	put(nsB, "x-0", "a")
	wide := fmt.Sprintf("  - name: configmaps\n    namespaces: [%s, %s]\n    labelSelector: app=a\n"+
		"  - name: configmaps\n    namespaces: [%s]\n    labelSelector: app=b", nsA, nsB, nsA)
	narrow := fmt.Sprintf("  - name: configmaps\n    namespaces: [%s]\n    labelSelector: app=a\n"+
		"  - name: configmaps\n    namespaces: [%s]\n    labelSelector: app=b", nsA, nsA)
	const outOfScope = "deleted inferred=true reason=out-of-scope"

	d := start(t, "run", "-c", pgConfig(t, dsn, wide, ""))
	checkpoints(3)
	expect("first sync", map[string]string{"a-0": "live", "a-1": "live", "b-0": "live", "x-0": "live"})
	put(nsA, "a-0", "c")
	put(nsA, "a-1", "b")
	expect("relabelled", map[string]string{"a-0": outOfScope, "a-1": "live", "b-0": "live", "x-0": "live"})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	// Every scope relists: none tombstones another's objects.
	if _, err := conn.Exec(ctx, `DELETE FROM kube_cdc.checkpoints`); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", pgConfig(t, dsn, wide, ""))
	checkpoints(3)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	expect("after the relists", map[string]string{"a-0": outOfScope, "a-1": "live", "b-0": "live", "x-0": "live"})

	// nsB removed from the configuration.
	d = start(t, "run", "-c", pgConfig(t, dsn, narrow, ""))
	checkpoints(2)
	expect("narrowed", map[string]string{"a-0": outOfScope, "a-1": "live", "b-0": "live", "x-0": outOfScope})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE op = 'delete' AND NOT (inferred AND reason = 'out-of-scope')`); n != 0 {
		t.Errorf("%d deletes other than out-of-scope tombstones, want none", n)
	}
}

// The same through the Kafka sink and its file checkpoint store: a namespace removed from
// the configuration has its objects deleted in the topic (an inferred `d` with
// source.reason out-of-scope, then the tombstone) and its checkpoint forgotten, so
// configuring it again snapshots it afresh.
func TestKafkaANamespaceRemovedFromTheConfigurationIsTombstonedOutOfScopeAndForgotten(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	nsA, nsB := namespace(t, "ka"), namespace(t, "kb")
	k := testenv.NewKafka(t)
	a, b := configMaps(t, nsA), configMaps(t, nsB)
	a.create("a1", "0")
	b.create("b1", "0")
	state := filepath.Join(t.TempDir(), "state.db")
	cfg := func(namespaces string) string {
		return kafkaCfg{brokers: k.Addr(), ns: namespaces, checkpoint: fileCheckpoint(state)}.write(t)
	}
	both := cfg(nsA + ", " + nsB)
	d := start(t, "run", "-c", both)
	waitFor(t, k, kafkaTopic, 60*time.Second, snapshotOf(listedConfigMaps(t, nsA, nsB)))
	stopOK(t, d)

	d = start(t, "run", "-c", cfg(nsA))
	b1 := nsB + "/b1"
	var gone record
	eventually(t, 60*time.Second, func() error {
		recs, err := readRecords(k, kafkaTopic)
		if err != nil {
			return err
		}
		for i, r := range recs {
			if r.key == b1 && r.op == "d" && !r.tombstone() {
				if i+1 >= len(recs) || !recs[i+1].tombstone() || recs[i+1].key != b1 {
					return fmt.Errorf("the out-of-scope delete of %s is not followed by its tombstone", b1)
				}
				gone = r
				return nil
			}
		}
		return fmt.Errorf("no delete of %s yet", b1)
	})
	if !gone.env.Source.Inferred || gone.env.Source.Reason != "out-of-scope" {
		t.Errorf("the delete of %s: inferred %v, reason %q; want an inferred delete, reason out-of-scope",
			b1, gone.env.Source.Inferred, gone.env.Source.Reason)
	}
	for _, r := range mustRead(t, k, kafkaTopic) {
		if r.key == nsA+"/a1" && r.op == "d" {
			t.Errorf("the configured namespace's object was deleted: %s", r)
		}
	}
	stopOK(t, d)

	// Configured again, the namespace is snapshotted afresh: its checkpoint was forgotten.
	d = start(t, "run", "-c", both)
	eventually(t, 60*time.Second, func() error {
		recs, err := readRecords(k, kafkaTopic)
		if err != nil {
			return err
		}
		last := recs[len(recs)-1]
		for _, r := range recs {
			if r.key == b1 && r.op == "r" && r.m.Offset > gone.m.Offset && r.m.Partition == gone.m.Partition {
				return nil
			}
		}
		return fmt.Errorf("no snapshot of %s after its delete yet (last record %s)", b1, last)
	})
	stopOK(t, d)
}
