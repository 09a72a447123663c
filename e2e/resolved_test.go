package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// slowProduce makes k answer every produce request that writes to topic d late (and
// serve it only then); other requests are untouched.
func slowProduce(k *testenv.Kafka, topic string, d time.Duration) {
	c := k.Cluster()
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == topic {
				c.SleepControl(func() { time.Sleep(d) })
				break
			}
		}
		return nil, nil, false
	})
}

// Resolved watermarks (docs/guarantees.md, "Resolved watermarks") are sampled under load: many
// writers update ConfigMaps as fast as the apiserver takes them, and the test keeps
// reading the sink's watermark; every write the apiserver acknowledged at an RV at or
// below it must already be in the sink. Writes acknowledged after the watermark was read
// count too: a change at or below the watermark was in the sink when the watermark was
// written, whenever its writer heard back.

// watermarksWanted is how many distinct watermarks a test checks while the writers
// write; loadMaxRounds bounds how long they write on, waiting for them.
const (
	watermarksWanted = 10
	loadMaxRounds    = 3
)

// acked is one write the apiserver acknowledged.
type acked struct {
	name string
	rv   uint64
}

// ackedWrites collects the acknowledged writes of a load run.
type ackedWrites struct {
	mu       sync.Mutex
	writes   []acked
	done     chan struct{}
	enough   chan struct{} // closed when the sampler has checked enough watermarks
	stopOnce sync.Once
	err      error
}

// stop tells the writers that they may stop once they made their minimum of updates.
func (a *ackedWrites) stop() { a.stopOnce.Do(func() { close(a.enough) }) }

func (a *ackedWrites) add(name, rv string) {
	n, _ := strconv.ParseUint(rv, 10, 64)
	a.mu.Lock()
	a.writes = append(a.writes, acked{name, n})
	a.mu.Unlock()
}

// upTo returns the acknowledged writes at or below rv.
func (a *ackedWrites) upTo(rv uint64) []acked {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []acked
	for _, w := range a.writes {
		if w.rv <= rv {
			out = append(out, w)
		}
	}
	return out
}

func (a *ackedWrites) highest() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var m uint64
	for _, w := range a.writes {
		m = max(m, w.rv)
	}
	return m
}

func (a *ackedWrites) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// load starts writers goroutines, each creating keys ConfigMaps in ns and then updating
// them round robin: at least updates times, and on until stop is called (at most
// loadMaxRounds times updates), so that the sampling overlaps the writes however loaded
// the machine is.
func load(t *testing.T, ns string, writers, keys, updates int) *ackedWrites {
	t.Helper()
	a := &ackedWrites{done: make(chan struct{}), enough: make(chan struct{})}
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	var wg sync.WaitGroup
	var once sync.Once
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) { once.Do(func() { a.err = err }) }
			ctx := context.Background()
			for i := range keys + loadMaxRounds*updates {
				if i >= keys+updates {
					select {
					case <-a.enough:
						return
					default:
					}
				}
				name := fmt.Sprintf("w%d-%d", w, i%keys)
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}
				var got *corev1.ConfigMap
				var err error
				if i < keys {
					got, err = cms.Create(ctx, cm, metav1.CreateOptions{})
				} else {
					got, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				}
				if err != nil {
					fail(err)
					return
				}
				a.add(name, got.ResourceVersion)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(a.done)
	}()
	t.Cleanup(func() { <-a.done })
	return a
}

// sampleWatermark samples the sink, over and over while the load runs and until the
// watermark reaches the last write, and checks that it holds every acknowledged write at
// or below the watermark. sample returns the watermark (0: none yet) and the writes (name
// and RV) the sink holds at or below it, read the way a consumer would: from one snapshot
// (PostgreSQL), or the data topic read after the resolved record (Kafka). It returns how
// many distinct watermarks it checked while the writers were still writing.
func sampleWatermark(t *testing.T, a *ackedWrites, sample func() (uint64, map[acked]bool, error)) int {
	t.Helper()
	defer a.stop()
	seen := map[uint64]bool{}
	checked := 0
	deadline := time.Now().Add(2 * time.Minute)
	var failingSince time.Time
	for time.Now().Before(deadline) {
		running := a.running()
		w, have, err := sample()
		if err != nil {
			// The in-process broker answers a ListOffsets now and then with -1 (unknown
			// server error) under load (seen once in two make tests at once): a read is
			// tried again, and fails the test when it keeps failing for 15 s.
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) > 15*time.Second {
				t.Fatal(err)
			}
			t.Logf("read again after: %v", err)
			continue
		}
		failingSince = time.Time{}
		if w == 0 {
			continue
		}
		want := a.upTo(w)
		var lost []string
		for _, x := range want {
			if !have[x] {
				lost = append(lost, fmt.Sprintf("%s@%d", x.name, x.rv))
			}
		}
		if len(lost) > 0 {
			t.Fatalf("the watermark is at RV %d, but the sink lacks %d acknowledged writes at or below it: %s",
				w, len(lost), strings.Join(lost[:min(len(lost), 10)], ", "))
		}
		if running && len(want) > 0 && !seen[w] {
			seen[w] = true
			if checked++; checked >= watermarksWanted {
				a.stop()
			}
		}
		if !running {
			if a.err != nil {
				t.Fatalf("a writer failed: %v", a.err)
			}
			if w >= a.highest() {
				return checked
			}
		}
	}
	t.Fatalf("the watermark did not reach the last write (RV %d) within 2m", a.highest())
	return 0
}

func TestThePostgresWatermarkIsNeverAheadOfAWriteTheApiserverAcknowledged(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "pg")
	dsn := pg.NewDatabase(t)
	start(t, "run", "-c", pgConfig(t, dsn, fmt.Sprintf("  - name: configmaps\n    namespaces: [%s]\n", ns), ""))
	conn := connect(t, dsn)
	ctx := context.Background()
	sample := func() (w uint64, out map[acked]bool, err error) {
		err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT coalesce(max(resolved_rv), 0) FROM kube_cdc.resolved
				WHERE cluster = 'e2e' AND sink = 'warehouse' AND api_group = '' AND resource = 'configmaps' AND epoch = 0`).Scan(&w)
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT name, resource_version FROM kube_cdc.changes
				WHERE cluster = 'e2e' AND resource = 'configmaps' AND namespace = $1 AND resource_version <= $2 AND op <> 'delete'`, ns, w)
			if err != nil {
				return err
			}
			out = map[acked]bool{}
			for rows.Next() {
				var x acked
				if err := rows.Scan(&x.name, &x.rv); err != nil {
					return err
				}
				out[x] = true
			}
			return rows.Err()
		})
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			return 0, nil, nil // not migrated yet
		}
		return w, out, err
	}
	eventually(t, time.Minute, func() error {
		if w, _, err := sample(); err != nil || w == 0 {
			return fmt.Errorf("no watermark yet (%v)", err)
		}
		return nil
	})
	a := load(t, ns, 8, 4, 300)
	n := sampleWatermark(t, a, sample)
	t.Logf("checked %d distinct watermarks while %d writes were under way", n, len(a.upTo(^uint64(0))))
	if n < watermarksWanted {
		t.Errorf("checked %d distinct watermarks during the load, want at least %d (the sampling did not overlap the writes)", n, watermarksWanted)
	}
	// The per-resource view agrees with the per-scope one for a resource configured once.
	var perScope, perResource uint64
	if err := conn.QueryRow(ctx, `SELECT s.resolved_rv, r.resolved_rv FROM kube_cdc.resolved s
		JOIN kube_cdc.resolved_resources r USING (cluster, sink, api_group, resource)
		WHERE s.resource = 'configmaps'`).Scan(&perScope, &perResource); err != nil {
		t.Fatal(err)
	}
	if perResource > perScope {
		t.Errorf("resolved_resources says %d, above its one scope's %d", perResource, perScope)
	}
}

// resolvedRecord is a resolved record's value.
type resolvedRecord struct {
	Op         string `json:"op"`
	Cluster    string `json:"cluster"`
	Sink       string `json:"sink"`
	Group      string `json:"group"`
	Resource   string `json:"resource"`
	Scope      string `json:"scope"`
	ResolvedRV string `json:"resolvedRV"`
	Epoch      int    `json:"epoch"`
	Time       string `json:"time"`
}

func TestTheKafkaResolvedRecordIsNeverAheadOfAWriteTheApiserverAcknowledged(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	k := testenv.NewKafka(t)
	ns := namespace(t, "kafka")
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, kafka: "      resolvedInterval: 20ms\n",
		checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))}
	// A slow broker: every produce to the data topic is answered 50 ms late, so a resolved
	// record written before the data records are acknowledged would be seen here.
	slowProduce(k, kafkaTopic, 50*time.Millisecond)
	start(t, "run", "-c", cfg.write(t))
	const resolvedTopic = "kube.e2e.resolved"
	var last resolvedRecord
	read := func() (uint64, error) {
		recs, err := readRecords(k, resolvedTopic)
		if err != nil {
			if strings.Contains(err.Error(), "Unknown Topic") || strings.Contains(err.Error(), "does not exist") {
				return 0, nil
			}
			return 0, err
		}
		var w uint64
		for _, r := range recs {
			if r.resource != "configmaps" || r.op != "resolved" {
				return 0, fmt.Errorf("resolved record with headers op %q resource %q", r.op, r.resource)
			}
		}
		if len(recs) > 0 {
			var rr resolvedRecord
			m := recs[len(recs)-1].m
			if err := json.Unmarshal(m.Value, &rr); err != nil {
				return 0, fmt.Errorf("resolved record %s: %v", m.Value, err)
			}
			last = rr
			w = rvOf(rr.ResolvedRV)
			if string(m.Key) != "e2e/stream/configmaps/"+rr.Scope || rr.Scope == "" {
				return 0, fmt.Errorf("resolved record key %q for scope %q", m.Key, rr.Scope)
			}
		}
		return w, nil
	}
	eventually(t, time.Minute, func() error {
		if w, err := read(); err != nil || w == 0 {
			return fmt.Errorf("no resolved record yet (%v)", err)
		}
		return nil
	})
	a := load(t, ns, 8, 4, 300)
	held := func(w uint64) (map[acked]bool, error) {
		recs, err := readRecords(k, kafkaTopic)
		if err != nil {
			return nil, err
		}
		out := map[acked]bool{}
		for _, r := range recs {
			if r.tombstone() || r.op == "d" {
				continue
			}
			name, _ := strings.CutPrefix(r.key, ns+"/")
			if x := (acked{name, rvOf(r.rv)}); x.rv <= w {
				out[x] = true
			}
		}
		return out, nil
	}
	sample := func() (uint64, map[acked]bool, error) {
		w, err := read()
		if err != nil || w == 0 {
			return 0, nil, err
		}
		have, err := held(w)
		return w, have, err
	}
	n := sampleWatermark(t, a, sample)
	t.Logf("checked %d distinct resolved records while %d writes were under way", n, len(a.upTo(^uint64(0))))
	if n < watermarksWanted {
		t.Errorf("checked %d distinct resolved records during the load, want at least %d (the sampling did not overlap the writes)", n, watermarksWanted)
	}
	if last.Op != "resolved" || last.Cluster != "e2e" || last.Sink != "stream" || last.Group != "" || last.Resource != "configmaps" {
		t.Errorf("resolved record %+v", last)
	}
	if _, err := time.Parse(time.RFC3339, last.Time); err != nil {
		t.Errorf("resolved record time %q: %v", last.Time, err)
	}
	// A record only when the watermark moved: their RVs strictly increase.
	recs, err := readRecords(k, resolvedTopic)
	if err != nil {
		t.Fatal(err)
	}
	rvs := make([]uint64, len(recs))
	for i, r := range recs {
		rvs[i] = rvOf(r.rv)
	}
	if !slices.IsSorted(rvs) || len(slices.Compact(slices.Clone(rvs))) != len(rvs) {
		t.Errorf("resolved RVs %v are not strictly increasing", rvs)
	}
}

func TestTheStdoutSinkPrintsAResolvedLineAfterTheChangesItCoversWhenAsked(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "out")
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: out
    type: stdout
    stdout:
      resolvedInterval: 50ms
metrics:
  address: ""
`, kube.Kubeconfig, ns))
	d := start(t, "run", "-c", cfg)
	cm, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "hello", map[string]string{"a": "b"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := rvOf(cm.ResourceVersion)
	eventually(t, 30*time.Second, func() error {
		seen := false // the change line of hello
		for _, l := range strings.Split(strings.TrimSpace(d.out.String()), "\n") {
			var v struct {
				Op         string `json:"op"`
				Sink       string `json:"sink"`
				ResolvedRV string `json:"resolvedRV"`
				Source     struct{ Name, ResourceVersion string }
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				return fmt.Errorf("stdout line is not JSON: %q: %v", l, err)
			}
			switch {
			case v.Op == "resolved" && rvOf(v.ResolvedRV) >= rv:
				if !seen {
					t.Fatalf("resolved line %s before the change at RV %d it covers", l, rv)
				}
				if v.Sink != "out" {
					t.Errorf("resolved line %s", l)
				}
				return nil
			case v.Source.Name == "hello" && rvOf(v.Source.ResourceVersion) == rv:
				seen = true
			}
		}
		return fmt.Errorf("no resolved line at or past RV %d yet", rv)
	})
}
