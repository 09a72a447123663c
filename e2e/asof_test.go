package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// asOfMoment is a LIST of the test's namespace and the moment it stands for: taken once the
// LIST had answered and the sink had caught up to it, with no write in between.
type asOfMoment struct {
	name string
	at   time.Time
	list []string // "name uid rv", sorted
}

// asOfList is a LIST of the configmaps of ns as "name uid rv", sorted, and its RV.
func asOfList(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, fmt.Sprintf("%s %s %s", c.Name, c.UID, c.ResourceVersion))
	}
	slices.Sort(out)
	return out
}

// asOfRows is what as_of shows of ns at the moment, as asOfList spells it.
func asOfRows(t *testing.T, conn *pgx.Conn, ns string, at time.Time) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT name || ' ' || uid || ' ' || rv FROM kube_cdc.as_of($1, 'configmaps', $2)`, at, ns)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// asOfRecord LISTs the namespace, waits until the sink holds every change of that LIST (its
// live rows are the LIST's objects at their RVs, and its checkpoint is in epoch, past any
// relist) and only then takes the moment. Nothing writes to the namespace between the LIST
// and the moment, so every change up to the LIST's RV was observed before it (observed_at is
// taken when kube-cdc receives a change, before the write that the wait saw commit), and no
// later change exists yet: as_of at that moment must be exactly the LIST.
func asOfRecord(t *testing.T, cs kubernetes.Interface, dsn, ns, name string, epoch int, d *daemon) asOfMoment {
	t.Helper()
	list := asOfList(t, cs, ns)
	eventually(t, 90*time.Second, func() error {
		select {
		case <-d.done:
			return fmt.Errorf("kube-cdc exited:\n%s", d.log())
		default:
		}
		rows, err := travelRows(dsn, ns) // "name uid rv v"
		if err != nil {
			return err
		}
		for i, r := range rows {
			rows[i] = strings.Join(strings.Fields(r)[:3], " ")
		}
		if !slices.Equal(rows, list) {
			return fmt.Errorf("%s: live rows %v, want the LIST's %v", name, rows, list)
		}
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		var e int
		var rv int64
		if err := conn.QueryRow(context.Background(), `SELECT epoch, resource_version FROM kube_cdc.checkpoints
			WHERE resource = 'configmaps'`).Scan(&e, &rv); err != nil {
			return err
		}
		if e != epoch || rv == 0 {
			return fmt.Errorf("%s: checkpoint at epoch %d rv %d, want epoch %d after its relist", name, e, rv, epoch)
		}
		return nil
	})
	return asOfMoment{name: name, at: time.Now(), list: list}
}

func TestAsOfEachMomentEqualsTheListTakenThenAcrossDeletesARecreateARelistAfterExpiredHistoryAndAnEtcdRestore(t *testing.T) {
	t.Parallel() // a private control plane: the test expires its history and restores its etcd
	k := testenv.NewKube(t, testenv.KubeOptions{})
	cs := k.Clientset()
	ctx := context.Background()
	const ns = "asof"
	createNamespace(t, cs, ns)
	dsn := pg.NewDatabase(t)
	cfg := travelConfig(t, k, dsn, ns)
	d := start(t, "run", "-c", cfg)
	cms := cs.CoreV1().ConfigMaps(ns)
	del := func(name string) {
		t.Helper()
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var moments []asOfMoment
	record := func(name string, epoch int) {
		t.Helper()
		moments = append(moments, asOfRecord(t, cs, dsn, ns, name, epoch, d))
	}

	// Watched: creates, updates, deletes, a delete and create under the same name.
	for _, n := range []string{"a", "b", "c", "d"} {
		setData(t, cs, ns, n, "1")
	}
	record("created", 0)
	setData(t, cs, ns, "a", "2")
	del("b")
	setData(t, cs, ns, "e", "1")
	record("updated and deleted", 0)
	del("c")
	setData(t, cs, ns, "c", "recreated")
	setData(t, cs, ns, "d", "2")
	record("recreated", 0)

	// Unwatched: kube-cdc is stopped, the namespace changes, the history expires; the
	// restart relists (an inferred delete, a recreate it infers, snapshots). While it is
	// down the sink has observed nothing new: as of then, the last moment's LIST.
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	setData(t, cs, ns, "a", "3")
	del("d")
	del("e")
	setData(t, cs, ns, "e", "recreated")
	setData(t, cs, ns, "f", "1")
	down := asOfMoment{name: "while kube-cdc was down", list: moments[len(moments)-1].list}
	asOfList(t, cs, ns) // the cluster has changed by now; the sink has not observed it
	down.at = time.Now()
	if err := k.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	record("relisted after expired history", 0)

	// Time travel: etcd is backed up, changes are made and observed, etcd is restored and
	// the restored cluster issues the same RVs again for other changes (a's new version has
	// a lower RV than its lost ones).
	backup, err := k.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		setData(t, cs, ns, "a", fmt.Sprintf("lost-%d", i))
	}
	del("f")
	setData(t, cs, ns, "g", "lost")
	record("before the restore", 0)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	setData(t, cs, ns, "a", "restored")
	setData(t, cs, ns, "h", "1")
	d = start(t, "run", "-c", cfg)
	record("restored", 1)
	setData(t, cs, ns, "e", "after the restore")
	record("after the restore", 1)

	conn := connect(t, dsn)
	for _, m := range append(moments, down) {
		if got := asOfRows(t, conn, ns, m.at); !slices.Equal(got, m.list) {
			t.Errorf("as of %s (%s):\n  %s\nwant the LIST then:\n  %s", m.name, m.at.Format(time.RFC3339Nano),
				strings.Join(got, "\n  "), strings.Join(m.list, "\n  "))
		}
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND inferred`, ns); n < 3 {
		t.Errorf("%d inferred deletes in changes, want at least 3 (d, e's old uid, g): the relists did not happen as scripted", n)
	}

	// The command prints the same objects, as a List.
	last := moments[len(moments)-1]
	code, out := runCLI(t, "as-of", last.at.Format(time.RFC3339Nano), "configmaps", "-n", ns, "-o", "json", "-c", cfg)
	if code != 0 {
		t.Fatalf("as-of: exit %d\n%s", code, out)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct{ Name, UID, ResourceVersion string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &list); err != nil || list.Kind != "List" {
		t.Fatalf("as-of -o json: %v\n%s", err, out)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.Metadata.Name+" "+it.Metadata.UID+" "+it.Metadata.ResourceVersion)
	}
	if !slices.Equal(got, last.list) {
		t.Errorf("as-of -o json: %v, want %v", got, last.list)
	}
	code, out = runCLI(t, "as-of", last.at.Format(time.RFC3339Nano), "configmaps", "-n", ns, "-c", cfg)
	if code != 0 || !strings.HasPrefix(out, "NAME   AGE") || strings.Count(out, "\n") < len(last.list)+1 {
		t.Errorf("as-of table: exit %d\n%s", code, out)
	}
	code, out = runCLI(t, "as-of", "yesterday", "configmaps", "-c", cfg)
	if code != 1 || !strings.Contains(out, `TIME "yesterday"`) {
		t.Errorf("as-of yesterday: exit %d, want 1 and a line naming TIME:\n%s", code, out)
	}
	code, out = runCLI(t, "as-of", "1m", "configmaps", "-o", "wide", "-c", cfg)
	if code != 1 || !strings.Contains(out, `--output "wide"`) {
		t.Errorf("as-of -o wide: exit %d, want 1 and a line naming --output:\n%s", code, out)
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
