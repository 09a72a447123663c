package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Issue 24: an object deleted before a relist's LIST and created again (a new uid) before
// the relist ends used to lose its old uid's end: the lookup at the end of the relist
// found an object under the key and took it for the held one, whatever its uid. The race
// is made to happen, against the real servers, by a proxy in front of the apiserver that
// the daemon talks to: when a relist's LIST of the race's scope arrives, the proxy deletes
// cm-00 of each raced namespace, lets the LIST through (it does not show the key), and
// creates cm-00 again before the LIST's answer reaches the daemon. Resyncs every 2 s
// relist repeatedly under other writes (churn) until each namespace was hit three times.
// Every recreated key's history must then hold, in PostgreSQL and in Kafka, a delete of
// each old uid before the create of its successor; the sink's row is the newest uid.
func TestAKeyRecreatedDuringARelistGetsTheOldUIDsDeleteBeforeTheNewUIDsCreateInEverySink(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	for _, tc := range []struct {
		name string
		// scope is the configmaps resource's YAML, given the two namespaces and the label.
		scope func(a, b, label string) string
		// raced says which namespaces a LIST request lists, when it is a relist's LIST of
		// the race's scope.
		raced func(path string, q url.Values, a, b string) []string
	}{
		{
			name: "one scope per namespace",
			scope: func(a, b, _ string) string {
				return fmt.Sprintf("  - name: configmaps\n    namespaces: [%s, %s]\n", a, b)
			},
			raced: func(path string, _ url.Values, a, b string) []string {
				for _, ns := range []string{a, b} {
					if path == "/api/v1/namespaces/"+ns+"/configmaps" {
						return []string{ns}
					}
				}
				return nil
			},
		},
		{
			name: "a cluster-wide scope with a selector",
			scope: func(_, _, label string) string {
				return fmt.Sprintf("  - name: configmaps\n    labelSelector: race=%s\n", label)
			},
			raced: func(path string, q url.Values, a, b string) []string {
				if path == "/api/v1/configmaps" && strings.HasPrefix(q.Get("labelSelector"), "race=") {
					return []string{a, b}
				}
				return nil
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b := namespace(t, "a"), namespace(t, "b")
			label := a // unique to the test
			cs := kube.Clientset()
			put := func(ns, name string) string {
				cm := configMap(ns, name, map[string]string{"v": "1"})
				cm.Labels = map[string]string{"race": label}
				got, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("create %s/%s: %v", ns, name, err)
					return ""
				}
				return string(got.UID)
			}
			// uids[ns] is the history of cm-00's uids in ns, oldest first.
			var mu sync.Mutex
			uids := map[string][]string{}
			for _, ns := range []string{a, b} {
				uids[ns] = []string{put(ns, "cm-00")}
				for i := 1; i <= 5; i++ {
					put(ns, fmt.Sprintf("cm-%02d", i))
				}
			}

			// The proxy: while armed, a relist's LIST of a namespace races there.
			armed, inflight := false, 0
			hits := map[string]int{}
			proxy := apiProxy(t, kube.Config, func(r *http.Request) func() {
				q := r.URL.Query()
				// Not a watch, a lookup by name, a later page, or a probe of the server's RV.
				if r.Method != http.MethodGet || q.Get("watch") != "" || q.Get("fieldSelector") != "" || q.Get("continue") != "" || q.Get("limit") == "1" {
					return nil
				}
				nss := tc.raced(r.URL.Path, q, a, b)
				mu.Lock()
				defer mu.Unlock()
				if !armed || len(nss) == 0 {
					return nil
				}
				for _, ns := range nss {
					deleteConfigMap(t, ns, "cm-00")
				}
				inflight++
				return func() { // the LIST was answered without cm-00: create it again
					mu.Lock()
					defer mu.Unlock()
					inflight--
					for _, ns := range nss {
						uids[ns] = append(uids[ns], put(ns, "cm-00"))
						hits[ns]++
					}
				}
			})

			k := testenv.NewKafka(t)
			dsn := pg.NewDatabase(t)
			cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
  listMode: paged
resources:
%ssinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      createTopics: true
    checkpoint: %s
pipeline:
  resync: 2s
metrics:
  address: ""
log:
  level: debug
`, proxy, tc.scope(a, b, label), dsn, k.Addr(), fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))))
			d := start(t, "run", "-c", cfg)
			conn := connect(t, dsn)
			liveRows := fmt.Sprintf(`SELECT count(*) FROM kube_cdc.objects WHERE namespace IN ('%s', '%s') AND deleted_at IS NULL`, a, b)
			eventually(t, 60*time.Second, func() error {
				var n int
				err := conn.QueryRow(ctx, liveRows).Scan(&n)
				if err == nil && n != 12 {
					err = fmt.Errorf("%d live rows, want 12", n)
				}
				return err
			})

			// Churn in both namespaces while the races are armed, until each raced three times.
			const rounds = 3
			mu.Lock()
			armed = true
			mu.Unlock()
			churn, stopChurn := context.WithCancel(ctx)
			var churned sync.WaitGroup
			churned.Go(func() {
				for i := 0; churn.Err() == nil; i++ {
					ns := []string{a, b}[i%2]
					name := fmt.Sprintf("cm-%02d", 1+i%5)
					cm, err := cs.CoreV1().ConfigMaps(ns).Get(churn, name, metav1.GetOptions{})
					if err == nil {
						cm.Data["v"] = fmt.Sprint(i)
						_, err = cs.CoreV1().ConfigMaps(ns).Update(churn, cm, metav1.UpdateOptions{})
					}
					if err != nil && churn.Err() == nil && !apierrors.IsConflict(err) {
						t.Errorf("churn: %v", err)
						return
					}
					select {
					case <-churn.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			})
			eventually(t, 3*time.Minute, func() error {
				mu.Lock()
				defer mu.Unlock()
				if hits[a] < rounds || hits[b] < rounds {
					return fmt.Errorf("the race was hit %v times, want %d in each namespace", hits, rounds)
				}
				if armed = false; inflight > 0 {
					return fmt.Errorf("a race under way")
				}
				return nil
			})
			stopChurn()
			churned.Wait()
			mu.Lock()
			t.Logf("the race (deleted before a relist's LIST, created again before its end) was hit %d times in %s, %d in %s", hits[a], a, hits[b], b)
			want := map[string][]string{a: slices.Clone(uids[a]), b: slices.Clone(uids[b])}
			mu.Unlock()

			// Every uid's create is written (the newest one's last); then every sink is checked.
			eventually(t, 60*time.Second, func() error {
				for _, ns := range []string{a, b} {
					newest := want[ns][len(want[ns])-1]
					if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND name = 'cm-00' AND uid = $2 AND deleted_at IS NULL`, ns, newest); n != 1 {
						return fmt.Errorf("%s/cm-00 is not the live newest uid %s yet", ns, newest)
					}
				}
				return nil
			})
			stopOK(t, d)

			for _, ns := range []string{a, b} {
				rows, err := conn.Query(ctx, `SELECT uid, op, resource_version, inferred, coalesce(reason, '') FROM kube_cdc.changes
					WHERE namespace = $1 AND name = 'cm-00' ORDER BY id`, ns)
				if err != nil {
					t.Fatal(err)
				}
				var history []historyRow
				for rows.Next() {
					var h historyRow
					if err := rows.Scan(&h.uid, &h.op, &h.rv, &h.inferred, &h.reason); err != nil {
						t.Fatal(err)
					}
					history = append(history, h)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if n := checkSuccession(t, "postgres "+ns+"/cm-00", want[ns], history); n < rounds {
					t.Errorf("postgres %s/cm-00: %d old uids ended by a relist's inferred delete (reason recreated), want one per race, at least %d", ns, n, rounds)
				}

				var recs []historyRow
				for _, rec := range mustRead(t, k, kafkaTopic) {
					if rec.key != ns+"/cm-00" || rec.tombstone() {
						continue
					}
					op := map[string]string{"c": "create", "r": "create", "u": "update", "d": "delete"}[rec.op]
					recs = append(recs, historyRow{uid: rec.env.Source.UID, op: op, rv: int64(rvOf(rec.rv)), inferred: rec.env.Source.Inferred})
				}
				if n := checkSuccession(t, "kafka "+ns+"/cm-00", want[ns], recs); n < rounds {
					t.Errorf("kafka %s/cm-00: %d old uids ended by a relist's inferred delete, want one per race, at least %d", ns, n, rounds)
				}
			}
		})
	}
}

// historyRow is one change of a key, from PostgreSQL's changes or a Kafka record.
type historyRow struct {
	uid, op, reason string
	rv              int64
	inferred        bool
}

// checkSuccession checks that history (in write order) ends each uid of uids, oldest
// first, with a delete before the first change of the uid after it, at a lower RV. It
// returns how many of those deletes were inferred (a relist's, not a watch's).
func checkSuccession(t *testing.T, what string, uids []string, history []historyRow) (inferred int) {
	t.Helper()
	first := map[string]int{}   // uid → index of its first change
	deleted := map[string]int{} // uid → index of its first delete
	for i, h := range history {
		if _, ok := first[h.uid]; !ok {
			first[h.uid] = i
		}
		if _, ok := deleted[h.uid]; !ok && h.op == "delete" {
			deleted[h.uid] = i
		}
	}
	var lines []string
	for _, h := range history {
		lines = append(lines, fmt.Sprintf("%s %s@%d inferred=%v reason=%s", h.uid, h.op, h.rv, h.inferred, h.reason))
	}
	for i := 0; i+1 < len(uids); i++ {
		old, next := uids[i], uids[i+1]
		d, ok := deleted[old]
		c, created := first[next]
		switch {
		case !created:
			t.Errorf("%s: no change of uid %s (the %d. recreation)\n  %s", what, next, i+1, strings.Join(lines, "\n  "))
		case !ok:
			t.Errorf("%s: uid %s never ended: no delete before uid %s was created\n  %s", what, old, next, strings.Join(lines, "\n  "))
		case d > c || history[d].rv >= history[c].rv:
			t.Errorf("%s: uid %s's delete (#%d @%d) is not before uid %s's first change (#%d @%d)\n  %s",
				what, old, d, history[d].rv, next, c, history[c].rv, strings.Join(lines, "\n  "))
		case history[d].inferred:
			inferred++
		}
	}
	return inferred
}

// deleteConfigMap deletes ns/name (at once: a ConfigMap has no finalizers).
func deleteConfigMap(t *testing.T, ns, name string) {
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	if err := cms.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete %s/%s: %v", ns, name, err)
	}
}
