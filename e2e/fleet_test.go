package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// A fleet in one database (issue 22, item 5): three clusters, each with its own daemon,
// its own cluster name (and so its own identity, epochs, checkpoints and scopes) and its
// own retention, write into one schema at once. One of them is restored from an etcd
// backup (a new epoch) while the others write; another's retention deletes its own old
// changes rows and no one else's. Each cluster's objects rows end equal to its LIST.

// fleetMember is one cluster of the fleet and its daemon.
type fleetMember struct {
	name      string // the `cluster` key
	kube      *testenv.Kube
	cs        kubernetes.Interface
	retention string
	cfg       string
	d         *daemon
}

const fleetNS = "fleet"

func (m *fleetMember) config(t *testing.T, dsn string) string {
	p := writeConfig(t, fmt.Sprintf(`cluster: %s
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
      retention: %s
metrics:
  address: ""
log:
  level: debug
`, m.name, m.kube.Kubeconfig, fleetNS, dsn, m.retention))
	return p
}

// fleetRows is "name uid rv v" of every live objects row of the cluster, sorted.
func fleetRows(conn *pgx.Conn, cluster string) ([]string, error) {
	rows, err := conn.Query(context.Background(), `SELECT name || ' ' || uid || ' ' || resource_version || ' ' || (object->'data'->>'v')
		FROM kube_cdc.objects WHERE cluster = $1 AND namespace = $2 AND deleted_at IS NULL ORDER BY name`, cluster, fleetNS)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// converged waits until the member's live objects rows equal a fresh LIST of its cluster.
func (m *fleetMember) converged(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	eventually(t, 90*time.Second, func() error {
		select {
		case <-m.d.done:
			return fmt.Errorf("kube-cdc of %s exited:\n%s", m.name, m.d.log())
		default:
		}
		got, err := fleetRows(conn, m.name)
		if err != nil {
			return err
		}
		if want := travelListed(t, m.cs, fleetNS); !slices.Equal(got, want) {
			return fmt.Errorf("%s: live rows\n  %s\nwant a fresh LIST's\n  %s", m.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		return nil
	})
}

func TestThreeClustersWriteIntoOneDatabaseEachWithItsOwnRetentionAndEpochsAndOneRestoredWhileTheOthersWrite(t *testing.T) {
	t.Parallel() // private control planes: they overlap with other tests only
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	// a is restored from a backup; b keeps its changes rows 3 s; c keeps them an hour.
	fleet := []*fleetMember{{name: "fleet-a", retention: "0s"}, {name: "fleet-b", retention: "3s"}, {name: "fleet-c", retention: "1h"}}
	for _, m := range fleet {
		m.kube = testenv.NewKube(t, testenv.KubeOptions{})
		m.cs = m.kube.Clientset()
		createNamespace(t, m.cs, fleetNS)
		for _, n := range []string{"one", "two", "three"} {
			setData(t, m.cs, fleetNS, n, m.name+"-1")
		}
		m.cfg = m.config(t, dsn)
	}
	for _, m := range fleet {
		m.d = start(t, "run", "-c", m.cfg)
	}
	conn := connect(t, dsn)
	for _, m := range fleet {
		m.converged(t, conn)
	}
	a, b, c := fleet[0], fleet[1], fleet[2]

	// b and c write all along: a's restore and b's retention happen under their writes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErrs sync.Map
	for _, m := range []*fleetMember{b, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				cm, err := m.cs.CoreV1().ConfigMaps(fleetNS).Get(ctx, "two", metav1.GetOptions{})
				if err == nil {
					cm.Data = map[string]string{"v": fmt.Sprintf("%s-w%d", m.name, i)}
					_, err = m.cs.CoreV1().ConfigMaps(fleetNS).Update(ctx, cm, metav1.UpdateOptions{})
				}
				if err != nil {
					writeErrs.Store(m.name, err)
					return
				}
			}
		}()
	}
	halt := func() {
		t.Helper()
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
		writeErrs.Range(func(k, v any) bool { t.Errorf("writer of %s: %v", k, v); return true })
	}
	defer halt()

	// a: a backup, changes the restore loses, then the restore under the running daemon.
	backup, err := a.kube.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		setData(t, a.cs, fleetNS, "one", fmt.Sprintf("fleet-a-lost-%d", i))
	}
	setData(t, a.cs, fleetNS, "lost", "fleet-a-lost")
	a.converged(t, conn)
	if err := a.kube.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// Writes wait until a's daemon has seen its cluster go back (a new epoch): written
	// first, they could hide the restore (TestAfterAnEtcdRestoreWhoseRVsPassed…).
	eventually(t, 90*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints WHERE cluster = $1 AND epoch = 1`, a.name); n != 1 {
			return fmt.Errorf("%d checkpoints of %s in epoch 1", n, a.name)
		}
		return nil
	})
	setData(t, a.cs, fleetNS, "one", "fleet-a-3")
	setData(t, a.cs, fleetNS, "new", "fleet-a-3")
	a.converged(t, conn)

	// b's retention: every b row observed before cutoff goes at b's next retention (the
	// first write of a start, then at most every minute), a's and c's stay. A restart of
	// b's daemon starts one now rather than within the minute.
	var cutoff time.Time
	if err := conn.QueryRow(ctx, `SELECT max(observed_at) FROM kube_cdc.changes WHERE cluster = $1`, b.name).Scan(&cutoff); err != nil {
		t.Fatal(err)
	}
	older := func(cluster string) int {
		return count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE cluster = $1 AND observed_at <= $2`, cluster, cutoff)
	}
	// The rows of a and c before the cutoff, by id: c writes all along, and a batch it
	// observed before the cutoff may commit after this look, so a count could only grow.
	olderIDs := func(cluster string) []int64 {
		rows, err := conn.Query(ctx, `SELECT id FROM kube_cdc.changes WHERE cluster = $1 AND observed_at <= $2`, cluster, cutoff)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	keptA, keptC := olderIDs(a.name), olderIDs(c.name)
	if older(b.name) == 0 || len(keptA) == 0 || len(keptC) == 0 {
		t.Fatalf("changes rows before the cutoff: a %d, b %d, c %d; want some of each", len(keptA), older(b.name), len(keptC))
	}
	eventually(t, 30*time.Second, func() error { // b's rows up to the cutoff must be 3 s old first
		if time.Since(cutoff) < 4*time.Second {
			return fmt.Errorf("the cutoff is %v old", time.Since(cutoff))
		}
		return nil
	})
	if code := b.d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("%s: exit %d after SIGTERM", b.name, code)
	}
	b.d = start(t, "run", "-c", b.cfg)
	eventually(t, 60*time.Second, func() error {
		if n := older(b.name); n != 0 {
			return fmt.Errorf("%d changes rows of %s older than its retention", n, b.name)
		}
		return nil
	})
	for _, kept := range []struct {
		m   *fleetMember
		ids []int64
	}{{a, keptA}, {c, keptC}} {
		if got := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE id = ANY ($1)`, kept.ids); got != len(kept.ids) {
			t.Errorf("%s (retention %s) has %d of its %d changes rows before the cutoff: another cluster's retention took them",
				kept.m.name, kept.m.retention, got, len(kept.ids))
		}
	}

	halt()
	for _, m := range fleet {
		m.converged(t, conn)
	}
	// Each cluster's epochs are its own: only a went back in time.
	for _, m := range fleet {
		want := 0
		if m == a {
			want = 1
		}
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints WHERE cluster = $1 AND epoch <> $2`, m.name, want); n != 0 {
			t.Errorf("%s: %d checkpoints not in epoch %d", m.name, n, want)
		}
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE cluster = $1 AND epoch > $2`, m.name, want); n != 0 {
			t.Errorf("%s: %d objects rows past epoch %d", m.name, n, want)
		}
	}
	if n := tombstonedInFleet(t, conn, a.name, "lost"); n != 1 {
		t.Errorf("the object a's restore took away: %d inferred tombstones in epoch 1, want 1", n)
	}
	for _, m := range fleet {
		if code := m.d.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM", m.name, code)
		}
	}
}

func tombstonedInFleet(t *testing.T, conn *pgx.Conn, cluster, name string) int {
	t.Helper()
	return count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE cluster = $1 AND namespace = $2 AND name = $3
		AND deleted_at IS NOT NULL AND delete_inferred AND epoch = 1`, cluster, fleetNS, name)
}
