package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The delivery contract as a property (after CockroachDB's cdctest validator): whatever
// happens to kube-cdc, the apiserver and PostgreSQL while objects change, once the writes
// stop `objects` equals the cluster, no (key, rv, op) is in `changes` twice, and each
// key's rows, in id order, have increasing resource versions.
func TestNemesisKillsRestartsAndExpiredHistoryNeverBreakTheDeliveryContract(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "n")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", "")
	d := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)

	// Writers: 4 goroutines doing random creates, updates and deletes of 40 names. Errors
	// while the apiserver restarts are expected and skipped.
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for wctx.Err() == nil {
				name := fmt.Sprintf("cm-%d", w*10+r.IntN(10)) // each writer owns its names
				var err error
				switch r.IntN(4) {
				case 0:
					err = cms.Delete(wctx, name, metav1.DeleteOptions{})
				default:
					c, gerr := cms.Get(wctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(gerr) {
						_, err = cms.Create(wctx, configMap(ns, name, map[string]string{"v": "0"}), metav1.CreateOptions{})
					} else if gerr == nil {
						c.Data["v"] = strconv.Itoa(r.IntN(1000))
						_, err = cms.Update(wctx, c, metav1.UpdateOptions{})
					}
				}
				if err == nil {
					mu.Lock()
					writes++
					mu.Unlock()
				}
				time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
			}
		}()
	}

	faults := []string{"kill -9", "SIGTERM", "expire history", "restart postgres", "kill -9", "expire history"}
	for _, f := range faults {
		time.Sleep(2 * time.Second)
		t.Logf("nemesis: %s", f)
		switch f {
		case "kill -9":
			_ = d.cmd.Process.Kill()
			<-d.done
			time.Sleep(500 * time.Millisecond)
			d = start(t, "run", "-c", cfg)
		case "SIGTERM":
			if code := d.stop(syscall.SIGTERM); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
			d = start(t, "run", "-c", cfg)
		case "expire history":
			if err := kube.ExpireHistory(ctx); err != nil {
				t.Fatal(err)
			}
		case "restart postgres":
			if err := pg.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(2 * time.Second)
	stopWriters()
	wg.Wait()
	mu.Lock()
	t.Logf("%d writes survived by the apiserver", writes)
	mu.Unlock()

	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited:\n%s", d.log())
	default:
	}
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM (SELECT 1 FROM kube_cdc.changes WHERE namespace = $1
		GROUP BY name, resource_version, op HAVING count(*) > 1) d`, ns); n != 0 {
		t.Errorf("%d (key, rv, op) appear more than once in changes", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM (SELECT resource_version < lag(resource_version) OVER (PARTITION BY name ORDER BY id) AS back
		FROM kube_cdc.changes WHERE namespace = $1) o WHERE back`, ns); n != 0 {
		t.Errorf("%d changes rows have a lower resource version than the row before them for the same key", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns); n < len(want) {
		t.Errorf("only %d changes rows for %d live objects", n, len(want))
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after the final SIGTERM, want 0", code)
	}
}
