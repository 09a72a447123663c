package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listModeConfig streams the configmaps of ns into dsn, relisting in mode, with small
// pages and a short progress interval so that a relist of a few thousand objects logs
// several progress lines.
func listModeConfig(t *testing.T, dsn, ns, mode string) string {
	return writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
  listMode: %s
  pageSize: 25
  relistJitter: 0s
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
log:
  level: info
  progressInterval: 1ms
`, kube.Kubeconfig, mode, ns, dsn))
}

// createNumberedConfigMaps creates n configmaps cm-00000… in ns, 8 at a time.
func createNumberedConfigMaps(t *testing.T, ns string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)},
					Data: map[string]string{"v": strconv.Itoa(i)}}
				if _, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// syncOnce runs kube-cdc until its relist's checkpoint is written, then stops it, and
// returns its log.
func syncOnce(t *testing.T, cfg, dsn string) string {
	t.Helper()
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	eventually(t, 2*time.Minute, func() error {
		select {
		case <-d.done:
			t.Fatalf("kube-cdc exited:\n%s", d.log())
		default:
		}
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource = 'configmaps' AND resource_version > 0`).Scan(&n)
		if err == nil && n == 0 {
			err = fmt.Errorf("no checkpoint yet")
		}
		return err
	})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("kube-cdc exited %d:\n%s", code, d.log())
	}
	return d.log()
}

// sinkContents is what a sink holds of the configmaps: every row of objects and every
// change, one line each, sorted.
func sinkContents(t *testing.T, dsn string) (objects, changes []string) {
	t.Helper()
	conn := connect(t, dsn)
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT namespace, name, uid, resource_version, deleted_at IS NULL, delete_inferred, coalesce(object::text, '')
		FROM kube_cdc.objects WHERE resource = 'configmaps'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ns, name, uid, obj string
		var rv int64
		var alive, inferred bool
		if err := rows.Scan(&ns, &name, &uid, &rv, &alive, &inferred, &obj); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, fmt.Sprintf("%s/%s %s %s alive=%v inferred=%v %s", ns, name, uid, rvOrList(rv, inferred), alive, inferred, obj))
	}
	rows, err = conn.Query(ctx, `SELECT namespace, name, uid, resource_version, op, inferred, snapshot
		FROM kube_cdc.changes WHERE resource = 'configmaps'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ns, name, uid, op string
		var rv int64
		var inferred, snapshot bool
		if err := rows.Scan(&ns, &name, &uid, &rv, &op, &inferred, &snapshot); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, fmt.Sprintf("%s/%s %s %s %s inferred=%v snapshot=%v", ns, name, uid, rvOrList(rv, inferred), op, inferred, snapshot))
	}
	slices.Sort(objects)
	slices.Sort(changes)
	return objects, changes
}

// rvOrList is the RV of a row as the comparison of two sinks uses it: an inferred
// delete carries its relist's LIST RV, which differs between two relists made one after
// the other while other tests write, so it reads "list-rv".
func rvOrList(rv int64, inferred bool) string {
	if inferred {
		return "list-rv"
	}
	return strconv.FormatInt(rv, 10)
}

var progressLine = regexp.MustCompile(`msg=relisting .*listed=(\d+) written=(\d+)`)

// TestStreamingAndPagedRelistsLeaveIdenticalSinksAndLogTheirProgress syncs the same
// collection into two databases, one by streaming lists and one by paged LISTs: after
// the initial sync and after a relist that must reconcile (objects updated, deleted and
// created while kube-cdc was stopped, and the checkpoints deleted), both hold the same
// rows and the same changes; and every relist logs progress lines and a synced line.
func TestStreamingAndPagedRelistsLeaveIdenticalSinksAndLogTheirProgress(t *testing.T) {
	t.Parallel()
	const n = 2000
	ns := namespace(t, "lm")
	createNumberedConfigMaps(t, ns, n)
	modes := []string{"stream", "paged"}
	dsns := map[string]string{}
	for _, mode := range modes {
		dsns[mode] = pg.NewDatabase(t)
		log := syncOnce(t, listModeConfig(t, dsns[mode], ns, mode), dsns[mode])
		checkProgress(t, mode, log, n)
	}

	// While nothing watches: 10 updated, 10 deleted, 10 created. Then each sink forgets
	// its checkpoint, so the next start relists and reconciles against what it holds.
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	for i := range 10 {
		cm, err := cms.Get(ctx, fmt.Sprintf("cm-%05d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "updated"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, fmt.Sprintf("cm-%05d", 100+i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range modes {
		if _, err := connect(t, dsns[mode]).Exec(ctx, `DELETE FROM kube_cdc.checkpoints`); err != nil {
			t.Fatal(err)
		}
		log := syncOnce(t, listModeConfig(t, dsns[mode], ns, mode), dsns[mode])
		checkProgress(t, mode+" relist", log, n)
	}

	streamObjects, streamChanges := sinkContents(t, dsns["stream"])
	pagedObjects, pagedChanges := sinkContents(t, dsns["paged"])
	if len(streamObjects) != n+10 || len(streamChanges) != n+30 {
		t.Errorf("the streamed sink holds %d objects and %d changes, want %d and %d", len(streamObjects), len(streamChanges), n+10, n+30)
	}
	for what, pair := range map[string][2][]string{"objects": {streamObjects, pagedObjects}, "changes": {streamChanges, pagedChanges}} {
		if !slices.Equal(pair[0], pair[1]) {
			for _, s := range pair[0] {
				if !slices.Contains(pair[1], s) {
					t.Errorf("%s: only the streamed sink holds %s", what, s)
				}
			}
			for _, s := range pair[1] {
				if !slices.Contains(pair[0], s) {
					t.Errorf("%s: only the paged sink holds %s", what, s)
				}
			}
		}
	}
	inferred := 0
	for _, s := range streamChanges {
		if strings.Contains(s, " delete inferred=true") {
			inferred++
		}
	}
	if inferred != 10 {
		t.Errorf("%d inferred deletes in the streamed sink, want the 10 deleted while nothing watched", inferred)
	}
}

// checkProgress checks a relist's lines: progress lines with growing counts (the page
// size and interval make several), one synced line with every object, and the line
// that all resources are synced.
func checkProgress(t *testing.T, what, log string, objects int) {
	t.Helper()
	var listed []int
	for _, m := range progressLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.Atoi(m[1])
		listed = append(listed, v)
	}
	if len(listed) < 2 || !slices.IsSorted(listed) || listed[len(listed)-1] > objects {
		t.Errorf("%s: progress lines listed %v, want at least two, growing, up to %d", what, listed, objects)
	}
	if what == "paged" && !strings.Contains(log, " remaining=") {
		t.Errorf("%s: no progress line estimates what remains (the LIST's remainingItemCount)", what)
	}
	if !regexp.MustCompile(`msg=synced .*objects=` + strconv.Itoa(objects) + ` written=\d+ took=`).MatchString(log) {
		t.Errorf("%s: no synced line with objects=%d:\n%s", what, objects, log)
	}
	if !strings.Contains(log, `msg="all resources synced"`) {
		t.Errorf("%s: no line that all resources are synced", what)
	}
}
