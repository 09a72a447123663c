//go:build soak

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The soak (`make soak`, build tag soak; never part of `make test`): the nemesis's
// properties over hundreds of faults of every kind the e2e knows, with one scope per
// namespace, once with a PostgreSQL sink and once with a Kafka sink. Every write the
// apiserver acknowledged is in the sink (unless a relist happened across it), per key and
// epoch RVs grow, a key's new uid never comes without a delete of the old one, no
// checkpoint is ever ahead of a missing write, and once the writes stop the sink equals
// the cluster. KUBE_CDC_SOAK_FAULTS sets the number of faults (default 220),
// KUBE_CDC_SOAK_SEED the order they come in.

const (
	soakNamespaces = 3  // one scope each
	soakWriters    = 2  // writers per namespace
	soakPerFault   = 10 // writes per namespace between faults, checkpointed before the next
)

func soakFaults(t *testing.T) int {
	t.Helper()
	n := 220
	if s := os.Getenv("KUBE_CDC_SOAK_FAULTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("KUBE_CDC_SOAK_FAULTS=%q: want a positive number", s)
		}
	}
	return n
}

func soakSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("KUBE_CDC_SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KUBE_CDC_SOAK_SEED=%q: want a number", s)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// The faults every sink gets; each sink adds its own.
var soakCommonFaults = []string{
	"kill -9", "SIGTERM", "SIGSTOP", "restart apiserver", "restart etcd", "expire history",
	"kill -9, expire history", "etcd restore", "poison", "CRD churn", "recreate racing a relist",
}

func TestSoakPostgresManyFaultsOfEveryKindNeverBreakTheDeliveryContract(t *testing.T) {
	t.Parallel() // a control plane of its own
	pg := privatePostgres(t)
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	soak(t, &soakSink{
		name: "warehouse",
		yaml: fmt.Sprintf("  - name: warehouse\n    type: postgres\n    postgres:\n      dsn: %q\n", dsn),
		read: func(ctx context.Context, nss []string, rows bool) (map[string]soakSnapshot, error) {
			return pgSnapshot(ctx, pool, nss, rows)
		},
		rows: func(t *testing.T, ns string) []epochRow { return epochChangeRows(t, dsn, ns) },
		gizmos: func(t *testing.T, group, ns string) []string {
			c, err := pool.Acquire(context.Background())
			mustDo(t, err)
			defer c.Release()
			return gizmoRows(t, c.Conn(), ns)
		},
		quarantine: func(t *testing.T, d *daemon, ns, name string, rv int64, epoch int, resolved bool) {
			waitQuarantine(t, d, dsn, ns, name, rv, epoch, resolved)
		},
		converged: func(t *testing.T, k *testenv.Kube, ns string, d *daemon) { waitConverged(t, k.Clientset(), dsn, ns, d) },
		faults: map[string]func(n *nemesis){
			"restart postgres":   func(n *nemesis) { n.restartPostgres(pg, "warehouse") },
			"terminate backends": func(n *nemesis) { terminateBackends(n.t, pg, db) },
		},
	})
}

func TestSoakKafkaManyFaultsOfEveryKindNeverBreakTheDeliveryContract(t *testing.T) {
	t.Parallel() // a control plane of its own
	k := testenv.NewKafka(t)
	const offsets = "e2e.offsets"
	soak(t, &soakSink{
		name: "stream",
		yaml: fmt.Sprintf("  - name: stream\n    type: kafka\n    kafka:\n      brokers: [%q]\n      createTopics: true\n      partitions: 3\n    checkpoint: {type: kafka, topic: %s}\n", k.Addr(), offsets),
		read: func(ctx context.Context, nss []string, rows bool) (map[string]soakSnapshot, error) {
			return kafkaSnapshot(k, offsets, nss, rows)
		},
		rows: func(t *testing.T, ns string) []epochRow { return kafkaRows(mustRead(t, k, kafkaTopic), ns) },
		gizmos: func(t *testing.T, group, ns string) []string {
			recs := mustRead(t, k, "kube.e2e."+group+".gizmos")
			return kafkaLive(recs, ns, func(name, uid, rv, _ string) string { return name + " " + uid + " " + rv })
		},
		converged: func(t *testing.T, kube *testenv.Kube, ns string, d *daemon) {
			eventually(t, 90*time.Second, func() error {
				isoRunning(t, d)
				recs, err := readRecords(k, kafkaTopic)
				if err != nil {
					return err
				}
				live := kafkaLive(recs, ns, func(name, uid, rv, v string) string { return strings.Join([]string{name, uid, rv, v}, " ") })
				if want := travelListed(t, kube.Clientset(), ns); !slices.Equal(live, want) {
					return fmt.Errorf("the topic's latest records of %s\n  %s\nwant a fresh LIST's\n  %s", ns, strings.Join(live, "\n  "), strings.Join(want, "\n  "))
				}
				return nil
			})
		},
		faults: map[string]func(n *nemesis){
			"restart broker": func(n *nemesis) { mustDo(n.t, k.Restart(context.Background())) },
		},
	})
}

// terminateBackends ends every session of database db at once, kube-cdc's among them.
// Unlike testenv's TerminateBackends it does not wait for the database to have none left:
// kube-cdc, writing all the time, connects again within milliseconds.
func terminateBackends(t *testing.T, pg *testenv.Postgres, db string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.AdminDSN())
	mustDo(t, err)
	defer conn.Close(ctx)
	var n int
	mustDo(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, db).Scan(&n))
	if n == 0 {
		t.Errorf("terminate backends: no session of %s to end", db)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// soakSink is what the soak needs of one sink.
type soakSink struct {
	name string // the sink's name in the config
	yaml string // its item of the config's sinks list
	// read takes a snapshot of each namespace's checkpoint (its scope's) and, with rows,
	// the rows at or below it, consistent: the rows are read after the checkpoint, or in
	// one transaction.
	read func(ctx context.Context, nss []string, rows bool) (map[string]soakSnapshot, error)
	// gizmos is the live gizmos of ns in the sink, "name uid rv" sorted (as listedGizmos).
	gizmos func(t *testing.T, group, ns string) []string
	// quarantine waits until the poison is quarantined (or resolved); nil when the sink
	// can store the poison.
	quarantine func(t *testing.T, d *daemon, ns, name string, rv int64, epoch int, resolved bool)
	// rows is every row of ns's ConfigMaps in the sink, in order (exact re-emits left out).
	rows func(t *testing.T, ns string) []epochRow
	// converged waits until the sink's live objects of ns equal a fresh LIST.
	converged func(t *testing.T, k *testenv.Kube, ns string, d *daemon)
	faults    map[string]func(n *nemesis) // the sink's own faults
}

// soakSnapshot is one namespace's checkpoint and the rows at or below it of its epoch
// and the epochs before (sorted out by generation when checked).
type soakSnapshot struct {
	epoch      int
	checkpoint int64
	rows       []epochRow
}

// scopeOf is the scope (source.scope) of one namespace of a resource.
func scopeOf(ns string) string {
	h := sha256.Sum256([]byte(ns + "||"))
	return hex.EncodeToString(h[:6])
}

func pgSnapshot(ctx context.Context, pool *pgxpool.Pool, nss []string, withRows bool) (map[string]soakSnapshot, error) {
	out := map[string]soakSnapshot{}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for _, ns := range nss {
			var s soakSnapshot
			err := tx.QueryRow(ctx, `SELECT resource_version, epoch FROM kube_cdc.checkpoints WHERE resource = 'configmaps' AND scope = $1`,
				scopeOf(ns)).Scan(&s.checkpoint, &s.epoch)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if !withRows {
				out[ns] = s
				continue
			}
			rows, err := tx.Query(ctx, `SELECT id, resource_version, name, uid, op, inferred, snapshot, epoch FROM kube_cdc.changes
				WHERE resource = 'configmaps' AND namespace = $1 AND epoch <= $2 AND resource_version <= $3 ORDER BY id`, ns, s.epoch, s.checkpoint)
			if err != nil {
				return err
			}
			if s.rows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (epochRow, error) {
				var c epochRow
				err := r.Scan(&c.id, &c.rv, &c.name, &c.uid, &c.op, &c.inferred, &c.snapshot, &c.epoch)
				return c, err
			}); err != nil {
				return err
			}
			out[ns] = s
		}
		return nil
	})
	return out, err
}

// kafkaCheckpoints reads the kafka checkpoint store's topic: the latest checkpoint of
// each configmaps scope, by scope.
func kafkaCheckpoints(k *testenv.Kafka, topic string) (map[string]soakSnapshot, error) {
	recs, err := readRecords(k, topic)
	if err != nil {
		return nil, err
	}
	out := map[string]soakSnapshot{}
	for _, r := range recs {
		var key []json.RawMessage
		var body struct{ Resource, Scope string }
		if json.Unmarshal(r.m.Key, &key) != nil || len(key) != 2 || json.Unmarshal(key[1], &body) != nil || body.Resource != "configmaps" {
			continue
		}
		if r.m.Value == nil {
			delete(out, body.Scope)
			continue
		}
		var v struct {
			ResourceVersion string
			Epoch           int
		}
		if err := json.Unmarshal(r.m.Value, &v); err != nil {
			return nil, fmt.Errorf("%v: %w", r, err)
		}
		out[body.Scope] = soakSnapshot{epoch: v.Epoch, checkpoint: int64(rvOf(v.ResourceVersion))}
	}
	return out, nil
}

// kafkaSnapshot reads the checkpoints, then the data topic: records only ever get added,
// so every record behind a checkpoint is in the later read.
func kafkaSnapshot(k *testenv.Kafka, offsets string, nss []string, withRows bool) (map[string]soakSnapshot, error) {
	cks, err := kafkaCheckpoints(k, offsets)
	if err != nil {
		return nil, err
	}
	var recs []record
	if withRows {
		if recs, err = readRecords(k, kafkaTopic); err != nil {
			return nil, err
		}
	}
	out := map[string]soakSnapshot{}
	for _, ns := range nss {
		s, ok := cks[scopeOf(ns)]
		if !ok {
			continue
		}
		for _, r := range kafkaRows(recs, ns) {
			if r.epoch <= s.epoch && r.rv <= s.checkpoint {
				s.rows = append(s.rows, r)
			}
		}
		out[ns] = s
	}
	return out, nil
}

// kafkaRows is the records of ns's ConfigMaps as changes rows (id: the record's place in
// partition and offset order, which is each key's order), exact re-emits left out.
func kafkaRows(recs []record, ns string) []epochRow {
	sort.SliceStable(recs, func(a, b int) bool {
		if recs[a].m.Partition != recs[b].m.Partition {
			return recs[a].m.Partition < recs[b].m.Partition
		}
		return recs[a].m.Offset < recs[b].m.Offset
	})
	ops := map[string]string{"c": "create", "u": "update", "d": "delete", "r": "create"}
	seen := map[string]bool{}
	var out []epochRow
	for i, r := range recs {
		name, ok := strings.CutPrefix(r.key, ns+"/")
		if !ok || r.tombstone() {
			continue
		}
		s := r.env.Source
		id := fmt.Sprintf("%s %d %s@%s", r.key, s.Epoch, r.op, r.rv)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, epochRow{changeRow{id: int64(i), rv: int64(rvOf(r.rv)), name: name, uid: s.UID, op: ops[r.op],
			inferred: s.Inferred, snapshot: s.Snapshot}, s.Epoch})
	}
	return out
}

// kafkaLive is the latest record of every key of ns whose latest record is not a
// delete, formatted by f(name, uid, rv, data v), sorted.
func kafkaLive(recs []record, ns string, f func(name, uid, rv, v string) string) []string {
	latest := map[string]record{}
	for _, r := range recs { // one key is in one partition: offset order is its order
		if strings.HasPrefix(r.key, ns+"/") {
			latest[r.key] = r
		}
	}
	var live []string
	for _, r := range latest {
		if r.tombstone() || r.env.Op == "d" {
			continue
		}
		var obj struct {
			Metadata struct{ Name, UID, ResourceVersion string }
			Data     map[string]string
		}
		_ = json.Unmarshal(r.env.After, &obj)
		live = append(live, f(obj.Metadata.Name, obj.Metadata.UID, obj.Metadata.ResourceVersion, obj.Data["v"]))
	}
	slices.Sort(live)
	return live
}

// soakSampler samples the sink every 2 s while the soak runs. Rows are never removed
// and a checkpoint only moves forward within an epoch, so a row seen in one snapshot is in
// every later one of its epoch: the sampler keeps, per row, the first sample that showed
// it, rather than every sample's rows.
type soakSampler struct {
	read  func(ctx context.Context) (map[string]soakSnapshot, error)
	stopc chan struct{}
	done  chan struct{}

	paused  sync.Mutex // held while a fault must not see the sampler's connections come and go
	mu      sync.Mutex
	samples map[string][]soakSample // by namespace
	first   map[string]map[soakRowKey]int
	failed  int
}

type soakSample struct {
	epoch      int
	checkpoint int64
}

type soakRowKey struct {
	row   changeRow // id zeroed
	epoch int
}

func startSoakSampler(read func(ctx context.Context) (map[string]soakSnapshot, error)) *soakSampler {
	s := &soakSampler{read: read, stopc: make(chan struct{}), done: make(chan struct{}),
		samples: map[string][]soakSample{}, first: map[string]map[soakRowKey]int{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-tick.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *soakSampler) sample() {
	s.paused.Lock()
	defer s.paused.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snaps, err := s.read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		return
	}
	for ns, snap := range snaps {
		k := len(s.samples[ns])
		s.samples[ns] = append(s.samples[ns], soakSample{snap.epoch, snap.checkpoint})
		if s.first[ns] == nil {
			s.first[ns] = map[soakRowKey]int{}
		}
		for _, r := range snap.rows {
			r.id = 0
			key := soakRowKey{r.changeRow, r.epoch}
			if _, ok := s.first[ns][key]; !ok {
				s.first[ns][key] = k
			}
		}
	}
}

func (s *soakSampler) stop() {
	select {
	case <-s.stopc:
	default:
		close(s.stopc)
	}
	<-s.done
}

// check checks every sample of ns against the writes of each generation (genOf maps a
// sink epoch to one): each acknowledged write whose RV is surely at or below the
// sample's checkpoint has its row in that sample, unless a relist happened across it.
// It returns the (sample, write) pairs checked and the checkpoints found ahead.
func (s *soakSampler) check(t *testing.T, ns string, gens []*contract, genOf func(epoch int) int) (checked, ahead int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for g, c := range gens {
		var rows []changeRow
		at := map[int64]int{} // row id here → first sample
		for key, k := range s.first[ns] {
			if genOf(key.epoch) == g {
				r := key.row
				r.id = int64(len(rows))
				rows = append(rows, r)
				at[r.id] = k
			}
		}
		x := indexRows(rows)
		for i := range c.writes {
			if c.mayMiss(i) {
				continue
			}
			shownAt := -1
			for _, r := range c.showing(x, i) {
				if k := at[r.id]; shownAt < 0 || k < shownAt {
					shownAt = k
				}
			}
			for k, smp := range s.samples[ns] {
				if genOf(smp.epoch) != g || c.hi[i] > smp.checkpoint {
					continue
				}
				checked++
				if shownAt < 0 || shownAt > k {
					if ahead++; ahead <= 10 {
						t.Errorf("%s: checkpoint %d of epoch %d committed while %v was not in the sink", ns, smp.checkpoint, smp.epoch, c.writes[i])
					}
				}
			}
		}
	}
	return checked, ahead
}

// soakMark is the state when a fault began: the daemon running and how far its log
// went, the generation, and the lowest checkpoint of the scopes in that generation (0 if
// any scope has none there). A relist logged after the mark started from at least floor:
// a scope's checkpoint never passes what its watch delivered, and does not move until its
// relist commits.
type soakMark struct {
	daemon int
	offset int64
	gen    int
	floor  int64
}

// soakRelists reads the relists of configmaps from the daemons' logs, by generation.
// The log does not say which scope relisted. A relist after 410 Gone started from the
// RV its gone line names, so a relist's from is the lowest RV of the gone lines not yet
// matched by a relist (the highest is taken off when one is: what stays is never more
// than a true from); a requested relist (resnapshot) or one after time travel starts from
// an RV its line does not name, and while one is pending every relist's from is the floor
// of the last mark before it. No from is below that floor.
func soakRelists(ds []*daemon, marks []soakMark) map[int][]relist {
	out := map[int][]relist{}
	for i, d := range ds {
		var off int64
		var gone []int64 // pending, sorted
		unnamed := 0     // pending relists whose from no line names
		gen := -1
		for _, line := range strings.SplitAfter(d.log(), "\n") {
			at := off
			off += int64(len(line))
			if !strings.Contains(line, "resource=configmaps ") {
				continue
			}
			mk := soakMark{}
			for _, k := range marks {
				if k.daemon < i || k.daemon == i && k.offset <= at {
					mk = k
				}
			}
			if mk.gen != gen { // a restore: what was pending belongs to the old RVs
				gen, gone, unnamed = mk.gen, nil, 0
			}
			switch {
			case strings.Contains(line, `msg="relisting on request`), strings.Contains(line, `msg="the server is behind this stream`):
				unnamed++
			case goneLine.MatchString(line):
				gone = append(gone, rvInt(goneLine.FindStringSubmatch(line)[1]))
				slices.Sort(gone)
			case relistedLine.MatchString(line):
				from := mk.floor
				switch {
				case unnamed > 0:
					unnamed--
				case len(gone) > 0:
					from = max(from, gone[0])
					gone = gone[:len(gone)-1]
				}
				out[mk.gen] = append(out[mk.gen], relist{from, rvInt(relistedLine.FindStringSubmatch(line)[1])})
			}
		}
	}
	return out
}

// uidGap is a key's row of a new uid (next) after a row of another uid (prev) with no
// delete of prev's uid between.
type uidGap struct{ prev, next epochRow }

// uidGaps checks that a key's rows never go from one uid to another without a delete of
// the first (observed or inferred) in between: a recreated object's old uid is deleted
// before its new uid appears.
func uidGaps(rows []epochRow) []uidGap {
	type state struct {
		deleted bool
		row     epochRow
	}
	var out []uidGap
	last := map[string]state{}
	for _, r := range rows {
		p, ok := last[r.name]
		if r.op == "delete" {
			if !ok || p.row.uid == r.uid {
				last[r.name] = state{true, r}
			}
			continue
		}
		if ok && !p.deleted && p.row.uid != r.uid {
			out = append(out, uidGap{p.row, r})
		}
		last[r.name] = state{false, r}
	}
	return out
}

// explain says what the history and the relists tell of a gap: when the old uid's
// delete was acknowledged, its RV range, and the relists whose LIST came between it and
// the new uid's row.
func (g uidGap) explain(c *contract, relists []relist) string {
	p, r := g.prev, g.next
	msg := fmt.Sprintf("%s: row %d (%s@%d uid %s, epoch %d, snapshot %v) comes after row %d (%s@%d uid %s, epoch %d) with no delete of uid %s between",
		r.name, r.id, r.op, r.rv, r.uid, r.epoch, r.snapshot, p.id, p.op, p.rv, p.uid, p.epoch, p.uid)
	lo := p.rv
	for i, w := range c.writes {
		if w.op == "delete" && w.uid == p.uid {
			lo = c.lo[i]
			msg += fmt.Sprintf("; the delete of %s was acknowledged %s–%s, at an RV within [%d, %d]", p.uid,
				w.start.Format("15:04:05.000"), w.end.Format("15:04:05.000"), c.lo[i], c.hi[i])
		}
	}
	var between []string
	for _, l := range relists {
		if lo <= l.to && l.to < r.rv {
			between = append(between, fmt.Sprintf("(from %d, LIST at %d)", l.from, l.to))
		}
	}
	return msg + fmt.Sprintf("; relists whose LIST came between: %v", between)
}

func soak(t *testing.T, sink *soakSink) {
	kube := privatePlane(t)
	cs := kube.Clientset()
	ctx := context.Background()
	faults, seed := soakFaults(t), soakSeed(t)
	began := time.Now()
	t.Logf("soak of %s: %d faults, KUBE_CDC_SOAK_SEED=%d", sink.name, faults, seed)
	var nss []string
	for i := range soakNamespaces {
		nss = append(nss, namespace(t, "s"+strconv.Itoa(i)))
	}
	crdNS := namespace(t, "crd")
	group := isoGroup(crdNS)
	gizmos := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	mustDo(t, kube.CreateCRD(ctx, isoCRD(group)))
	newGizmo := func(name string) {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": crdNS},
		}}
		_, err := kube.Dynamic().Resource(gizmos).Namespace(crdNS).Create(ctx, o, metav1.CreateOptions{})
		mustDo(t, err)
	}
	newGizmo("g-0")
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
  - name: gizmos.%s
    namespaces: [%s]
sinks:
%smetrics:
  address: %q
log:
  level: info
`, kube.Kubeconfig, strings.Join(nss, ", "), group, crdNS, sink.yaml, addr))

	// One history and one pool of writers per namespace. An etcd restore starts a
	// generation: RVs are issued again, and each scope goes to a new epoch in the sink. A
	// generation is a stretch of each history (genWrites: where each starts) and a run
	// of each scope's epochs (genEpoch: the first): kube-cdc may start more epochs than
	// restores (a time travel found at start by another resource makes every resource
	// of the sink relist in a new epoch), never fewer.
	hs := map[string]*history{}
	pools := map[string]*writerPool{}
	genWrites := map[string][]int{}
	genEpoch := map[string][]int{}
	genOf := func(ns string, epoch int) int {
		g := 0
		for i, e := range genEpoch[ns] {
			if e <= epoch {
				g = i
			}
		}
		return g
	}
	total := func() int {
		n := 0
		for _, h := range hs {
			n += h.len()
		}
		return n
	}
	for _, ns := range nss {
		hs[ns] = &history{kube: kube}
		genWrites[ns] = []int{0}
		genEpoch[ns] = []int{0}
	}
	n := &nemesis{t: t, kube: kube, cfg: cfg, addr: addr, daemons: []*daemon{start(t, "run", "-c", cfg)}, writes: total}
	gen := 0
	caughtUp := func(marks map[string]int, what string) {
		t.Helper()
		eventually(t, 120*time.Second, func() error {
			isoRunning(t, n.current())
			snaps, err := sink.read(ctx, nss, false)
			if err != nil {
				return err
			}
			for _, ns := range nss {
				ws := hs[ns].since(marks[ns])
				if len(ws) < soakPerFault {
					return fmt.Errorf("%s: %d writes since %s, want %d", ns, len(ws), what, soakPerFault)
				}
				var target int64
				for _, w := range ws[:soakPerFault] {
					target = max(target, w.rv)
				}
				s, ok := snaps[ns]
				if !ok || genOf(ns, s.epoch) != gen || s.checkpoint < target {
					return fmt.Errorf("%s: checkpoint %d in epoch %d (found %v), want at least %d in generation %d (epochs from %d)", ns, s.checkpoint, s.epoch, ok, target, gen, genEpoch[ns][gen])
				}
			}
			return nil
		})
	}
	marksNow := func() map[string]int {
		m := map[string]int{}
		for _, ns := range nss {
			m[ns] = hs[ns].len()
		}
		return m
	}
	// The first sync: every scope has a checkpoint.
	eventually(t, 90*time.Second, func() error {
		isoRunning(t, n.current())
		snaps, err := sink.read(ctx, nss, false)
		if err == nil && len(snaps) < len(nss) {
			err = fmt.Errorf("%d of %d scopes have a checkpoint", len(snaps), len(nss))
		}
		return err
	})
	sampler := startSoakSampler(func(ctx context.Context) (map[string]soakSnapshot, error) { return sink.read(ctx, nss, true) })
	defer sampler.stop()
	for i, ns := range nss {
		pools[ns] = startWriters(ctx, hs[ns].configMaps(ns), soakWriters, seed+uint64(i))
	}
	defer func() {
		for _, p := range pools {
			p.halt()
		}
	}()
	lockAll := func() {
		for _, ns := range nss {
			pools[ns].Gate.Lock()
		}
	}
	unlockAll := func() {
		for _, ns := range nss {
			pools[ns].Gate.Unlock()
		}
	}
	var marks []soakMark
	mark := func(floor bool) {
		t.Helper()
		d := n.current()
		st, err := os.Stat(d.logPath)
		mustDo(t, err)
		m := soakMark{daemon: len(n.daemons) - 1, offset: st.Size(), gen: gen}
		if floor {
			var snaps map[string]soakSnapshot
			eventually(t, 60*time.Second, func() error {
				var err error
				snaps, err = sink.read(ctx, nss, false)
				return err
			})
			m.floor = -1
			for _, ns := range nss {
				s, ok := snaps[ns]
				if !ok || genOf(ns, s.epoch) != gen {
					m.floor = 0
					break
				}
				if m.floor < 0 || s.checkpoint < m.floor {
					m.floor = s.checkpoint
				}
			}
			m.floor = max(m.floor, 0)
		}
		marks = append(marks, m)
	}

	// fence writes a ConfigMap "fence" (not recorded) in every namespace and waits until
	// each scope's checkpoint passed it: every write before it was delivered.
	fence := func() {
		t.Helper()
		rvs := map[string]int64{}
		for _, ns := range nss {
			rvs[ns] = rvInt(setData(t, cs, ns, "fence", strconv.Itoa(len(marks))).ResourceVersion)
		}
		eventually(t, 120*time.Second, func() error {
			isoRunning(t, n.current())
			snaps, err := sink.read(ctx, nss, false)
			if err != nil {
				return err
			}
			for _, ns := range nss {
				if s := snaps[ns]; genOf(ns, s.epoch) != gen || s.checkpoint < rvs[ns] {
					return fmt.Errorf("%s: checkpoint %d in epoch %d, want at least the fence's %d in generation %d", ns, s.checkpoint, s.epoch, rvs[ns], gen)
				}
			}
			return nil
		})
	}

	r := rand.New(rand.NewPCG(seed, 24))
	kinds := append([]string(nil), soakCommonFaults...)
	for k := range sink.faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	done := map[string]int{}
	took := map[string]time.Duration{}
	raceLive := map[string]*corev1.ConfigMap{}
	var order []string
	for len(order) < faults {
		round := slices.Clone(kinds)
		r.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		order = append(order, round...)
	}
	order = order[:faults]

	for i, f := range order {
		mustDo(t, ctx.Err())
		t0 := time.Now()
		ns := nss[r.IntN(len(nss))]
		t.Logf("soak %s: fault %d/%d: %s (%s; %d writes so far, generation %d, %v)", sink.name, i+1, faults, f, ns, total(), gen, time.Since(began).Round(time.Second))
		mark(true)
		before := marksNow()
		switch f {
		case "kill -9":
			n.kill9()
		case "SIGTERM":
			n.sigterm()
		case "SIGSTOP":
			d := n.current()
			mustDo(t, d.cmd.Process.Signal(syscall.SIGSTOP))
			n.whileDown()
			mustDo(t, d.cmd.Process.Signal(syscall.SIGCONT))
		case "restart apiserver":
			mustDo(t, kube.RestartAPIServer(ctx))
		case "restart etcd":
			mustDo(t, kube.StopEtcd())
			eventually(t, 60*time.Second, func() error {
				if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
					return errors.New("the apiserver is still ready with etcd stopped")
				}
				return nil
			})
			mustDo(t, kube.StartEtcd(ctx))
		case "expire history":
			var ps []*writerPool
			for _, ns := range nss {
				ps = append(ps, pools[ns])
			}
			n.expireHistory(ps...)
		case "kill -9, expire history":
			n.killExpire()
		case "etcd restore":
			lockAll()
			backup, err := kube.BackupEtcd(ctx)
			unlockAll()
			mustDo(t, err)
			caughtUp(marksNow(), "the backup") // writes the restore takes away
			lockAll()
			fence() // every one of them delivered before the restore takes it away
			snaps, err := sink.read(ctx, nss, false)
			if err != nil {
				unlockAll()
				t.Fatal(err)
			}
			gen++
			for _, ns := range nss {
				genWrites[ns] = append(genWrites[ns], hs[ns].len())
			}
			mark(false)
			if err := kube.RestoreEtcd(ctx, backup); err != nil {
				unlockAll()
				t.Fatal(err)
			}
			// Writers wait until every scope is in a new epoch: writes past the
			// checkpoint first would hide the restore from the probe before the watch.
			var now map[string]soakSnapshot
			eventually(t, 120*time.Second, func() error {
				isoRunning(t, n.current())
				var err error
				if now, err = sink.read(ctx, nss, false); err != nil {
					return err
				}
				for _, ns := range nss {
					if now[ns].epoch <= snaps[ns].epoch {
						return fmt.Errorf("%s: checkpoint in epoch %d, as before the restore", ns, now[ns].epoch)
					}
				}
				return nil
			})
			for _, ns := range nss {
				genEpoch[ns] = append(genEpoch[ns], now[ns].epoch)
				pools[ns].restores.Add(1)
				before[ns] = genWrites[ns][gen]
			}
			unlockAll()
			_ = os.RemoveAll(backup)
			for _, ns := range nss {
				if c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "race", metav1.GetOptions{}); err == nil {
					raceLive[ns] = c
				} else {
					delete(raceLive, ns)
				}
			}
		case "poison":
			name := "poison"
			p := setData(t, cs, ns, name, "nul\x00byte")
			if sink.quarantine != nil {
				snaps, err := sink.read(ctx, nss, false)
				mustDo(t, err)
				e := snaps[ns].epoch
				sink.quarantine(t, n.current(), ns, name, rvInt(p.ResourceVersion), e, false)
				setData(t, cs, ns, name, "fixed")
				sink.quarantine(t, n.current(), ns, name, rvInt(p.ResourceVersion), e, true)
			} else {
				setData(t, cs, ns, name, "fixed")
			}
		case "CRD churn":
			crds := isoCRDs
			mustDo(t, kube.Dynamic().Resource(crds).Delete(ctx, "gizmos."+group, metav1.DeleteOptions{}))
			eventually(t, 60*time.Second, func() error {
				if _, err := kube.Dynamic().Resource(crds).Get(ctx, "gizmos."+group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("CRD still there: %v", err)
				}
				return nil
			})
			mustDo(t, kube.CreateCRD(ctx, isoCRD(group)))
			newGizmo("g-" + strconv.Itoa(i+1))
			eventually(t, 120*time.Second, func() error {
				isoRunning(t, n.current())
				if got, want := sink.gizmos(t, group, crdNS), listedGizmos(t, kube, gizmos, crdNS); !slices.Equal(got, want) {
					return fmt.Errorf("live gizmos %v, want a fresh LIST's %v", got, want)
				}
				return nil
			})
		case "recreate racing a relist":
			rec := hs[ns].configMaps(ns)
			if raceLive[ns] == nil {
				c, err := rec.create(ctx, "race", map[string]string{"v": "0"})
				mustDo(t, err)
				raceLive[ns] = c
			}
			relists := n.metric("kube_cdc_relists_total", configMapsRes)
			mustDo(t, rec.delete(ctx, "race", string(raceLive[ns].UID)))
			cmd := exec.Command(binary, "resnapshot", "-c", cfg, "--timeout", "120s", "configmaps")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kube.Kubeconfig)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			mustDo(t, cmd.Start())
			// The relist begins; the object comes back moments later, most often while
			// the relist runs. A request left unanswered is an error of its own, and the
			// soak goes on without it.
			began := time.Now()
			for n.metric("kube_cdc_relists_total", configMapsRes) <= relists && time.Since(began) < 60*time.Second {
				isoRunning(t, n.current())
				time.Sleep(20 * time.Millisecond)
			}
			unanswered := n.metric("kube_cdc_relists_total", configMapsRes) <= relists
			c, err := rec.create(ctx, "race", map[string]string{"v": strconv.Itoa(i)})
			mustDo(t, err)
			raceLive[ns] = c
			if unanswered {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Errorf("fault %d: kube-cdc resnapshot was not answered within 60s (no relist began):\n%s", i+1, out.String())
				done["resnapshot unanswered"]++
			} else if err := cmd.Wait(); err != nil {
				t.Fatalf("kube-cdc resnapshot: %v\n%s", err, out.String())
			}
		default:
			// TerminateBackends waits until no session of the database is left, which
			// the sampler's sessions coming and going would hold off.
			func() {
				sampler.paused.Lock()
				defer sampler.paused.Unlock() // also when the fault fails the test
				sink.faults[f](n)
			}()
		}
		caughtUp(before, f)
		done[f]++
		took[f] += time.Since(t0)
	}

	for _, ns := range nss {
		for _, err := range pools[ns].halt() {
			t.Fatal(err)
		}
	}
	d := n.current()
	stillRunning(t, d)
	fence()
	for _, ns := range nss {
		sink.converged(t, kube, ns, d)
	}
	if got, want := sink.gizmos(t, group, crdNS), listedGizmos(t, kube, gizmos, crdNS); !slices.Equal(got, want) {
		t.Errorf("live gizmos %v, want a fresh LIST's %v", got, want)
	}
	mark(true)
	sampler.stop()
	sampler.sample()
	relists := soakRelists(n.daemons, marks)

	// The properties, per namespace and generation.
	var writes, lost, exempt, misordered, uids, checked, ahead, rowsN, maxEpoch int
	for _, ns := range nss {
		all := hs[ns].all()
		writes += len(all)
		var rows []epochRow
		rows = sink.rows(t, ns)
		rowsN += len(rows)
		for _, r := range rows {
			maxEpoch = max(maxEpoch, r.epoch)
		}
		var contracts []*contract
		starts := append(genWrites[ns], len(all))
		for g := 0; g+1 < len(starts); g++ {
			c := newContract(all[starts[g]:starts[g+1]], relists[g])
			contracts = append(contracts, c)
			var in []changeRow
			for _, r := range rows {
				if genOf(ns, r.epoch) == g {
					in = append(in, r.changeRow)
				}
			}
			x := indexRows(in)
			for i := range c.writes {
				switch {
				case c.mayMiss(i):
					exempt++
				case !c.shows(x, i):
					if lost++; lost <= 20 {
						t.Errorf("%s generation %d: %v%s: acknowledged by the apiserver, not in the sink; its key's rows: %s",
							ns, g, c.writes[i], bounds(c, i), keyRows(rows, c.writes[i].name))
					}
				}
			}
		}
		for _, v := range orderViolations(rows) {
			if misordered++; misordered <= 20 {
				t.Errorf("%s: %s", ns, v)
			}
		}
		for _, gap := range uidGaps(rows) {
			if uids++; uids <= 20 {
				g := genOf(ns, gap.next.epoch)
				t.Errorf("%s: %s", ns, gap.explain(contracts[g], relists[g]))
			}
		}
		c, a := sampler.check(t, ns, contracts, func(e int) int { return genOf(ns, e) })
		checked += c
		ahead += a
	}
	if checked == 0 {
		t.Errorf("no sample checked a write: the checkpoint-vs-rows property was not tested")
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after the final SIGTERM, want 0", code)
	}

	var kindsDone []string
	for _, k := range kinds {
		kindsDone = append(kindsDone, fmt.Sprintf("%s %d (%v)", k, done[k], took[k].Round(time.Second)))
	}
	if k := done["resnapshot unanswered"]; k > 0 {
		kindsDone = append(kindsDone, fmt.Sprintf("of which resnapshot unanswered %d", k))
	}
	nRelists := 0
	for _, rs := range relists {
		nRelists += len(rs)
	}
	samples := 0
	for _, ns := range nss {
		samples += len(sampler.samples[ns])
	}
	t.Logf(`soak of %s: %d faults in %v (seed %d, %d namespaces, %d etcd restores, sink epochs up to %d, %d kube-cdc processes)
  faults by kind: %s
  writes acknowledged: %d; changes rows: %d; relists seen: %d; writes across a relist (may be missing): %d
  lost: %d; order violations: %d; new uid without a delete of the old: %d
  checkpoint ahead of a missing write: %d in %d (sample, write) pairs checked (%d samples, %d unreadable)`,
		sink.name, len(order), time.Since(began).Round(time.Second), seed, len(nss), gen, maxEpoch, len(n.daemons),
		strings.Join(kindsDone, ", "), writes, rowsN, nRelists, exempt, lost, misordered, uids, ahead, checked, samples, sampler.failed)
	if lost > 0 || misordered > 0 || uids > 0 || ahead > 0 {
		t.Errorf("the delivery contract broke: %d lost, %d order violations, %d new uids without a delete, %d checkpoints ahead", lost, misordered, uids, ahead)
	}
}

// bounds says which writes bound the RV of a delete, for a failure message.
func bounds(c *contract, i int) string {
	d := c.writes[i]
	if d.op != "delete" {
		return ""
	}
	var out []string
	for _, w := range c.writes {
		if w.rv != 0 && (w.rv+1 == c.lo[i] && !w.end.After(d.start) || w.rv-1 == c.hi[i] && !w.start.Before(d.end)) {
			out = append(out, fmt.Sprintf("%v %s–%s", w, w.start.Format("15:04:05.000"), w.end.Format("15:04:05.000")))
		}
	}
	return fmt.Sprintf(" (RV within [%d, %d]; acknowledged %s–%s; bound by %s)", c.lo[i], c.hi[i], d.start.Format("15:04:05.000"), d.end.Format("15:04:05.000"), strings.Join(out, ", "))
}

// keyRows is the rows of one name, for a failure message.
func keyRows(rows []epochRow, name string) string {
	var out []string
	for _, r := range rows {
		if r.name == name {
			out = append(out, fmt.Sprintf("%d:%s@%d/e%d uid %s inferred=%v snapshot=%v", r.id, r.op, r.rv, r.epoch, r.uid, r.inferred, r.snapshot))
		}
	}
	return strings.Join(out, "; ")
}
