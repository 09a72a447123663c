package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Issue 12, recreated objects: ConfigMap "a" is deleted and created again under its name
// (a new uid) while kube-cdc is stopped. With the history kept the restart resumes the
// watch and sees DELETED then ADDED; with the history expired it relists, and the
// reconcile diff, finding another uid under the key, writes the old uid's inferred delete
// (reason recreated, at the RV just below the new object's) before the new uid's
// snapshot create. Either way the old uid's delete comes first and the new uid ends live.

// recreation is what the test did to "a" while kube-cdc was stopped.
type recreation struct {
	oldUID, newUID string
	oldRV, newRV   uint64 // the old object's last RV, the new object's RV
}

// recreateWhileStopped deletes and re-creates ConfigMap a of ns, then expires the
// history when expire is set.
func recreateWhileStopped(t *testing.T, ns string, expire bool) recreation {
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	old, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}}); err != nil {
		t.Fatal(err)
	}
	cur, err := cms.Create(ctx, configMap(ns, "a", map[string]string{"v": "again"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.UID == old.UID {
		t.Fatalf("the re-created ConfigMap kept uid %s", cur.UID)
	}
	if expire {
		if err := kube.ExpireHistory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return recreation{oldUID: string(old.UID), newUID: string(cur.UID), oldRV: rvOf(old.ResourceVersion), newRV: rvOf(cur.ResourceVersion)}
}

var historyCases = []struct {
	name   string
	expire bool
}{{"history kept", false}, {"history expired", true}}

// wantRelists checks the second run relisted when the history had expired and only then,
// so each case exercises the path it names.
func wantRelists(t *testing.T, d *daemon, expire bool) {
	t.Helper()
	want := 0
	if expire {
		want = 1
	}
	if got := countRelists(d.log()); got != want {
		t.Errorf("%d relists in the second run, want %d", got, want)
	}
}

func TestARecreatedObjectsOldUIDIsDeletedBeforeItsNewUIDIsCreatedInPostgres(t *testing.T) {
	t.Parallel() // a control plane of its own: it expires etcd's history
	kube := privatePlane(t)
	for _, tc := range historyCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, "rp")
			dsn := pg.NewDatabase(t)
			cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
			createConfigMaps(t, ns, 0, 3, map[string]string{"v": "0"})
			if _, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "a", map[string]string{"v": "0"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			d := start(t, "run", "-c", cfg)
			converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, ns) })
			stopOK(t, d)
			conn := connect(t, dsn)
			before := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns)

			r := recreateWhileStopped(t, ns, tc.expire)
			want := listedConfigMaps(t, ns)
			d = start(t, "run", "-c", cfg)
			converges(t, dsn, "configmaps", func() map[string]string { return want })
			stopOK(t, d)
			wantRelists(t, d, tc.expire)

			rows, err := conn.Query(ctx, `SELECT uid, op, resource_version, inferred, coalesce(reason, ''), snapshot
				FROM kube_cdc.changes WHERE namespace = $1 AND name = 'a' ORDER BY id`, ns)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var deleteRV uint64
			for rows.Next() {
				var uid, op, reason string
				var rv uint64
				var inferred, snapshot bool
				if err := rows.Scan(&uid, &op, &rv, &inferred, &reason, &snapshot); err != nil {
					t.Fatal(err)
				}
				who := map[string]string{r.oldUID: "old", r.newUID: "new"}[uid]
				if op == "delete" {
					deleteRV = rv
				}
				got = append(got, fmt.Sprintf("%s %s@%s inferred=%v reason=%s snapshot=%v", who, op, rvName(rv, r), inferred, reason, snapshot))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			wantRows := []string{
				"old create@old inferred=false reason= snapshot=true", // the first run's LIST
				"old delete@between inferred=false reason= snapshot=false",
				"new create@new inferred=false reason= snapshot=false",
			}
			if tc.expire {
				wantRows[1] = "old delete@between inferred=true reason=recreated snapshot=false"
				wantRows[2] = "new create@new inferred=false reason= snapshot=true"
				wantInferredDeleteRV(t, deleteRV, r)
			}
			if strings.Join(got, "\n") != strings.Join(wantRows, "\n") {
				t.Errorf("changes of a in id order:\n  %s\nwant:\n  %s\n(old uid %s at %d, new uid %s at %d, delete at %d)",
					strings.Join(got, "\n  "), strings.Join(wantRows, "\n  "), r.oldUID, r.oldRV, r.newUID, r.newRV, deleteRV)
			}

			var uid string
			var live, inferred bool
			var reason *string
			if err := conn.QueryRow(ctx, `SELECT uid, deleted_at IS NULL, delete_inferred, delete_reason FROM kube_cdc.objects
				WHERE namespace = $1 AND name = 'a'`, ns).Scan(&uid, &live, &inferred, &reason); err != nil {
				t.Fatal(err)
			}
			if uid != r.newUID || !live || inferred || reason != nil {
				t.Errorf("objects row of a: uid %s live=%v delete_inferred=%v delete_reason=%v; want the new uid %s live, no delete marks",
					uid, live, inferred, reason, r.newUID)
			}
			if after := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns); after-before != 2 {
				t.Errorf("the second run wrote %d changes rows, want 2 (a's delete and create; none for the 3 unchanged)", after-before)
			}
		})
	}
}

// rvName names rv for the comparison: "old", "new", "between" (strictly between the old
// and the new object's RVs, where the old object's delete belongs), else the number.
func rvName(rv uint64, r recreation) string {
	switch {
	case rv == r.oldRV:
		return "old"
	case rv == r.newRV:
		return "new"
	case r.oldRV < rv && rv < r.newRV:
		return "between"
	}
	return fmt.Sprint(rv)
}

// wantInferredDeleteRV checks an inferred delete of the old uid is at the RV just below
// the new object's (an observed one is wherever the DELETE event was).
func wantInferredDeleteRV(t *testing.T, rv uint64, r recreation) {
	t.Helper()
	if rv != r.newRV-1 {
		t.Errorf("the old uid's inferred delete is at %d, want %d (just below the new object's %d)", rv, r.newRV-1, r.newRV)
	}
}

func TestARecreatedObjectsOldUIDIsDeletedBeforeItsNewUIDIsCreatedInKafka(t *testing.T) {
	t.Parallel() // a control plane of its own: it expires etcd's history
	privatePlane(t)
	cases := []struct {
		name, store string
		expire      bool
	}{
		{"history kept, file store", "file", false},
		{"history expired, file store", "file", true},
		{"history expired, kafka store", "kafka", true}, // the key index (with uids) rebuilt from the topic
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, "rk")
			k := testenv.NewKafka(t)
			cm := configMaps(t, ns)
			for _, name := range []string{"a", "b", "c"} {
				cm.create(name, "0")
			}
			ckpt := fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))
			if tc.store == "kafka" {
				ckpt = "{type: kafka, topic: e2e.offsets}"
			}
			cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: ckpt}.write(t)
			d := start(t, "run", "-c", cfg)
			waitFor(t, k, kafkaTopic, 60*time.Second, snapshotOf(listedConfigMaps(t, ns)))
			stopOK(t, d)
			before := mustRead(t, k, kafkaTopic)

			r := recreateWhileStopped(t, ns, tc.expire)
			create := change{cm.key("a"), "c", r.newRV}
			if tc.expire {
				create.op = "r"
			}
			d = start(t, "run", "-c", cfg)
			waitFor(t, k, kafkaTopic, 60*time.Second, []change{create})
			stopOK(t, d)
			wantRelists(t, d, tc.expire)
			all := mustRead(t, k, kafkaTopic)
			checkRecords(t, all, ns) // a d is followed by its tombstone; per key, RVs never go down
			checkReemits(t, all)

			// The second run's records, duplicates (at-least-once re-emits) dropped.
			var got []string
			var deleteRV uint64
			var deleteTime int64
			seen := map[string]bool{}
			for _, rec := range since(before, all) {
				if seen[rec.id()] {
					continue
				}
				seen[rec.id()] = true
				if rec.key != cm.key("a") {
					t.Errorf("%v: a record of an object that did not change", rec)
					continue
				}
				if rec.tombstone() {
					got = append(got, "tombstone@"+rvName(rvOf(rec.rv), r))
					continue
				}
				s := rec.env.Source
				var reason struct {
					Source struct{ Reason string } `json:"source"`
				}
				if err := json.Unmarshal(rec.m.Value, &reason); err != nil {
					t.Fatal(err)
				}
				who := map[string]string{r.oldUID: "old", r.newUID: "new"}[s.UID]
				if rec.op == "d" {
					deleteRV, deleteTime = rvOf(rec.rv), rec.env.TsMs
				} else if deleteTime > rec.env.TsMs {
					t.Errorf("%v: ts_ms %d, before the old uid's delete at %d", rec, rec.env.TsMs, deleteTime)
				}
				got = append(got, fmt.Sprintf("%s %s@%s inferred=%v reason=%s", who, rec.op, rvName(rvOf(rec.rv), r), s.Inferred, reason.Source.Reason))
			}
			want := []string{
				"old d@between inferred=false reason=",
				"tombstone@between",
				"new c@new inferred=false reason=",
			}
			if tc.expire {
				want = []string{
					"old d@between inferred=true reason=recreated",
					"tombstone@between",
					"new r@new inferred=false reason=",
				}
				wantInferredDeleteRV(t, deleteRV, r)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the second run's records in offset order:\n  %s\nwant:\n  %s\n(old uid %s at %d, new uid %s at %d)",
					strings.Join(got, "\n  "), strings.Join(want, "\n  "), r.oldUID, r.oldRV, r.newUID, r.newRV)
			}
		})
	}
}
