package e2e

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The delivery contract as properties (after CockroachDB's cdctest validator), checked
// against what the test itself wrote: the apiserver told it the RV of every create and
// update and the uid of every delete. Every property here is one kube-cdc can break; the
// schema alone guarantees none of them (changes_once with ON CONFLICT DO NOTHING already
// makes "no (key, rv, op) twice" hold, and GREATEST "the checkpoint never moves back",
// whatever the daemon does, so tests do not assert those).
//
//   - Every acknowledged write is in changes, at the RV the apiserver returned
//     (checkDelivered), unless a relist happened across it: a relist sees only the state
//     at its LIST, so a version superseded before that LIST may be missing.
//   - Per key, changes rows in id order have strictly increasing RVs (checkDelivered).
//   - The checkpoint never runs ahead of the rows (checkpointSampler): in any snapshot of
//     the database taken while writes run, every acknowledged write at or below the
//     checkpoint has its row.

// ackedWrite is one write the apiserver acknowledged, or one whose answer was lost and a
// GET showed had happened.
type ackedWrite struct {
	name, op, uid string
	rv            int64     // the RV the apiserver returned; 0 for a delete (its RV is not returned)
	start, end    time.Time // the request's start, and when its outcome was known
}

func (w ackedWrite) String() string {
	if w.op == "delete" {
		return fmt.Sprintf("%s delete uid %s", w.name, w.uid)
	}
	return fmt.Sprintf("%s %s@%d uid %s", w.name, w.op, w.rv, w.uid)
}

// history is the writes of a test, safe for concurrent writers.
type history struct {
	kube *testenv.Kube // where the writes go; nil: the shared control plane
	mu   sync.Mutex
	w    []ackedWrite
}

// cms is the ConfigMaps client of namespace ns on the history's control plane.
func (h *history) cms(ns string) typedcorev1.ConfigMapInterface {
	if h.kube != nil {
		return h.kube.Clientset().CoreV1().ConfigMaps(ns)
	}
	return kube.Clientset().CoreV1().ConfigMaps(ns)
}

func (h *history) record(w ackedWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.w = append(h.w, w)
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.w)
}

func (h *history) all() []ackedWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ackedWrite(nil), h.w...)
}

// since returns the writes recorded after the first n.
func (h *history) since(n int) []ackedWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ackedWrite(nil), h.w[n:]...)
}

// recorder writes the ConfigMaps of one namespace and records what the apiserver
// acknowledged.
type recorder struct {
	h  *history
	ns string
}

func (h *history) configMaps(ns string) recorder { return recorder{h, ns} }

func rvInt(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

func (r recorder) create(ctx context.Context, name string, data map[string]string) (*corev1.ConfigMap, error) {
	start := time.Now()
	c, err := r.h.cms(r.ns).Create(ctx, configMap(r.ns, name, data), metav1.CreateOptions{})
	if err == nil {
		r.h.record(ackedWrite{c.Name, "create", string(c.UID), rvInt(c.ResourceVersion), start, time.Now()})
	}
	return c, err
}

// update writes c (with its resourceVersion, if set, as a precondition). An update that
// changes nothing (the same data again) is answered with the object as it was, at its old
// RV: no write happened, and none is recorded (recorded, its old RV would seem to come
// after writes acknowledged before it began).
func (r recorder) update(ctx context.Context, c *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	start := time.Now()
	sent := c.ResourceVersion
	c, err := r.h.cms(r.ns).Update(ctx, c, metav1.UpdateOptions{})
	if err == nil && (sent == "" || c.ResourceVersion != sent) {
		r.h.record(ackedWrite{c.Name, "update", string(c.UID), rvInt(c.ResourceVersion), start, time.Now()})
	}
	return c, err
}

// delete deletes the object name with uid.
func (r recorder) delete(ctx context.Context, name, uid string) error {
	start := time.Now()
	u := types.UID(uid)
	err := r.h.cms(r.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}})
	if err == nil {
		r.h.record(ackedWrite{name, "delete", uid, 0, start, time.Now()})
	}
	return err
}

// resolve settles the outcome of a write whose answer was lost (the apiserver restarted
// under it): it GETs name until the apiserver answers and records the write if the
// object differs from had (nil: it did not exist). Only the caller may write name. It
// returns the object now (nil: none).
func (r recorder) resolve(ctx context.Context, name string, had *corev1.ConfigMap, op string, start time.Time) (*corev1.ConfigMap, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := r.h.cms(r.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if had != nil {
				r.h.record(ackedWrite{name, "delete", string(had.UID), 0, start, time.Now()})
			}
			return nil, nil
		case err == nil:
			if had == nil || had.ResourceVersion != c.ResourceVersion {
				if had == nil {
					op = "create"
				}
				r.h.record(ackedWrite{name, op, string(c.UID), rvInt(c.ResourceVersion), start, time.Now()})
			}
			return c, nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("the outcome of a %s of %s is unknown: %w", op, name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relist is one relist seen in a daemon's log: the watch had delivered everything up to
// from (0 when there was no checkpoint) and the LIST was at to.
type relist struct{ from, to int64 }

var (
	goneLine     = regexp.MustCompile(`msg="watch history expired[^"]*".*\bresourceVersion=(\d+)`)
	relistedLine = regexp.MustCompile(`msg=relisted\b.*\bresourceVersion=(\d+)`)
)

// relistsOf reads the relists from the logs of the daemons.
func relistsOf(ds ...*daemon) []relist {
	var out []relist
	for _, d := range ds {
		var from int64
		for _, line := range strings.Split(d.log(), "\n") {
			if m := goneLine.FindStringSubmatch(line); m != nil {
				from = rvInt(m[1])
			} else if m := relistedLine.FindStringSubmatch(line); m != nil {
				out = append(out, relist{from, rvInt(m[1])})
				from = 0
			}
		}
	}
	return out
}

// contract holds a test's writes with what can be derived from them: the RV range of
// each delete and the next write of each key.
type contract struct {
	writes  []ackedWrite
	lo, hi  []int64 // the RV of writes[i] is within [lo[i], hi[i]]
	next    []int   // index of the next write of the same name, or -1
	relists []relist
}

func newContract(writes []ackedWrite, relists []relist) *contract {
	c := &contract{writes: writes, lo: make([]int64, len(writes)), hi: make([]int64, len(writes)),
		next: make([]int, len(writes)), relists: relists}
	byStart := make([]int, len(writes))
	for i, w := range writes {
		byStart[i] = i
		c.lo[i], c.hi[i], c.next[i] = w.rv, w.rv, -1
	}
	sort.SliceStable(byStart, func(a, b int) bool { return writes[byStart[a]].start.Before(writes[byStart[b]].start) })
	last := map[string]int{}
	for _, i := range byStart {
		if j, ok := last[writes[i].name]; ok {
			c.next[j] = i
		}
		last[writes[i].name] = i
	}
	// A delete comes after every write acknowledged before it began, and before every
	// write that began after it was acknowledged.
	for i, d := range writes {
		if d.op != "delete" {
			continue
		}
		c.lo[i], c.hi[i] = 1, math.MaxInt64
		for _, w := range writes {
			if w.rv == 0 {
				continue
			}
			if !w.end.After(d.start) && w.rv+1 > c.lo[i] {
				c.lo[i] = w.rv + 1
			}
			if !w.start.Before(d.end) && w.rv-1 < c.hi[i] {
				c.hi[i] = w.rv - 1
			}
		}
	}
	return c
}

// mayMiss says whether writes[i] may legitimately be absent from changes: a relist
// happened across it and its key had changed again by the LIST.
func (c *contract) mayMiss(i int) bool {
	for _, r := range c.relists {
		if c.writes[i].op == "delete" {
			if c.hi[i] > r.from && c.lo[i] <= r.to {
				return true
			}
			continue
		}
		if n := c.next[i]; n >= 0 && r.from < c.writes[i].rv && c.writes[i].rv <= r.to && c.lo[n] <= r.to {
			return true
		}
	}
	return false
}

// changeRow is one row of changes.
type changeRow struct {
	id, rv             int64
	name, uid, op      string
	inferred, snapshot bool
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readChanges returns the changes rows of ns's ConfigMaps at or below maxRV, in id order.
func readChanges(ctx context.Context, q querier, ns string, maxRV int64) ([]changeRow, error) {
	rows, err := q.Query(ctx, `SELECT id, resource_version, name, uid, op, inferred, snapshot FROM kube_cdc.changes
		WHERE resource = 'configmaps' AND namespace = $1 AND resource_version <= $2 ORDER BY id`, ns, maxRV)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (changeRow, error) {
		var c changeRow
		err := r.Scan(&c.id, &c.rv, &c.name, &c.uid, &c.op, &c.inferred, &c.snapshot)
		return c, err
	})
}

// rowIndex finds the rows that show a write.
type rowIndex struct {
	byRV      map[string][]changeRow // name@rv
	deletesOf map[string][]changeRow // uid → its observed (not inferred) delete rows
}

func indexRows(rows []changeRow) rowIndex {
	x := rowIndex{byRV: map[string][]changeRow{}, deletesOf: map[string][]changeRow{}}
	for _, r := range rows {
		k := r.name + "@" + strconv.FormatInt(r.rv, 10)
		x.byRV[k] = append(x.byRV[k], r)
		if r.op == "delete" && !r.inferred {
			x.deletesOf[r.uid] = append(x.deletesOf[r.uid], r)
		}
	}
	return x
}

// shows reports whether the rows show writes[i]: a create or update at its RV with its
// uid (a relist's snapshot row may call an update a create), a delete of its uid within
// its RV range, observed rather than inferred.
func (c *contract) shows(x rowIndex, i int) bool { return len(c.showing(x, i)) > 0 }

// showing returns the rows that show writes[i] (see shows).
func (c *contract) showing(x rowIndex, i int) []changeRow {
	w := c.writes[i]
	var out []changeRow
	if w.op == "delete" {
		for _, r := range x.deletesOf[w.uid] {
			if r.name == w.name && c.lo[i] <= r.rv && r.rv <= c.hi[i] {
				out = append(out, r)
			}
		}
		return out
	}
	for _, r := range x.byRV[w.name+"@"+strconv.FormatInt(w.rv, 10)] {
		if r.uid == w.uid && (r.op == w.op || r.snapshot) {
			out = append(out, r)
		}
	}
	return out
}

// checkDelivered checks, once the writes stopped and kube-cdc caught up, that every
// acknowledged write of ns's ConfigMaps is in changes unless a relist (read from the
// daemons' logs) happened across it, and that each key's rows in id order have strictly
// increasing RVs.
func checkDelivered(t *testing.T, dsn, ns string, writes []ackedWrite, ds ...*daemon) {
	t.Helper()
	if len(writes) == 0 {
		t.Fatalf("no writes to check: the test wrote nothing")
	}
	conn := connect(t, dsn)
	rows, err := readChanges(context.Background(), conn, ns, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	c := newContract(writes, relistsOf(ds...))
	x := indexRows(rows)
	missing, exempt := 0, 0
	for i := range c.writes {
		if c.mayMiss(i) {
			exempt++
			continue
		}
		if !c.shows(x, i) {
			if missing++; missing <= 10 {
				t.Errorf("%v: acknowledged by the apiserver, not in changes", c.writes[i])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes are missing from changes (relists %v)", missing, len(writes), c.relists)
	}
	t.Logf("%d writes, %d in changes, %d across a relist (%d relists), %d changes rows", len(writes), len(writes)-exempt-missing, exempt, len(c.relists), len(rows))

	last := map[string]changeRow{}
	back := 0
	for _, r := range rows {
		if p, ok := last[r.name]; ok && r.rv <= p.rv {
			if back++; back <= 10 {
				t.Errorf("%s: changes row %d (%s@%d) comes after row %d (%s@%d): per-key order by id is not by RV", r.name, r.id, r.op, r.rv, p.id, p.op, p.rv)
			}
		}
		last[r.name] = r
	}
}

// checkpointSampler takes consistent snapshots of the checkpoint and the changes rows at
// or below it while a test runs, for checkRows: a checkpoint ahead of a missing row is
// what a crash at that moment would make permanent.
type checkpointSampler struct {
	pool  *pgxpool.Pool
	ns    string
	stopc chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []sample
	failed  int // samples that could not be read (PostgreSQL restarting, schema not there yet)
}

type sample struct {
	checkpoint int64
	rows       rowIndex
}

// newSampler returns a sampler that samples when told (sample).
func newSampler(t *testing.T, dsn, ns string) *checkpointSampler {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	s := &checkpointSampler{pool: pool, ns: ns, stopc: make(chan struct{}), done: make(chan struct{})}
	close(s.done)
	t.Cleanup(func() {
		s.stop()
		pool.Close()
	})
	return s
}

// startSampler samples every 200 ms until stop.
func startSampler(t *testing.T, dsn, ns string) *checkpointSampler {
	t.Helper()
	s := newSampler(t, dsn, ns)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(200 * time.Millisecond)
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

// sample reads the checkpoint and the rows at or below it in one snapshot.
func (s *checkpointSampler) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var smp sample
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0) FROM kube_cdc.checkpoints WHERE resource = 'configmaps'`).Scan(&smp.checkpoint); err != nil {
			return err
		}
		rows, err := readChanges(ctx, tx, s.ns, smp.checkpoint)
		smp.rows = indexRows(rows)
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		return
	}
	s.samples = append(s.samples, smp)
}

func (s *checkpointSampler) stop() {
	select {
	case <-s.stopc:
	default:
		close(s.stopc)
	}
	<-s.done
}

// check stops the sampler and checks every sample: each acknowledged write whose RV is
// surely at or below the sample's checkpoint (whenever it was acknowledged: the
// checkpoint claims every change up to it) has its row, unless a relist happened across
// it. It takes a last sample, of the state the test ends with, and returns how many
// (sample, write) pairs it checked.
func (s *checkpointSampler) check(t *testing.T, writes []ackedWrite, ds ...*daemon) int {
	t.Helper()
	s.stop()
	s.sample()
	c := newContract(writes, relistsOf(ds...))
	checked, ahead := 0, 0
	var maxCK int64
	for _, smp := range s.samples {
		maxCK = max(maxCK, smp.checkpoint)
		for i := range c.writes {
			if c.hi[i] > smp.checkpoint || c.mayMiss(i) {
				continue
			}
			checked++
			if !c.shows(smp.rows, i) {
				if ahead++; ahead <= 10 {
					t.Errorf("checkpoint %d committed while %v was not in changes", smp.checkpoint, c.writes[i])
				}
			}
		}
	}
	if ahead > 0 {
		t.Errorf("%d times a checkpoint was ahead of an acknowledged write missing from changes", ahead)
	}
	t.Logf("checkpoint vs rows: %d samples (%d unreadable), checkpoint up to %d, %d (sample, write) pairs checked", len(s.samples), s.failed, maxCK, checked)
	return checked
}

// checkpointOf reads the ConfigMaps checkpoint (0 when there is none).
func checkpointOf(ctx context.Context, dsn string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var rv int64
	err = conn.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0) FROM kube_cdc.checkpoints WHERE resource = 'configmaps'`).Scan(&rv)
	return rv, err
}

// waitCaughtUp waits until the checkpoint covers the RV of the n-th write recorded after
// mark (and at least n writes were recorded since then): kube-cdc is streaming.
func waitCaughtUp(t *testing.T, dsn string, h *history, mark, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		ws := h.since(mark)
		if len(ws) < n {
			return fmt.Errorf("%d writes since the mark, want %d", len(ws), n)
		}
		var target int64
		for _, w := range ws[:n] {
			target = max(target, w.rv)
		}
		ck, err := checkpointOf(context.Background(), dsn)
		if err == nil && ck < target {
			err = fmt.Errorf("checkpoint %d is behind the write at %d", ck, target)
		}
		return err
	})
}

// metric scrapes addr and returns the value of one series (0 when absent).
func metric(addr, name string, labels map[string]string) (float64, error) {
	code, body, err := opsGet("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("GET /metrics: %d", code)
	}
	samples, err := opsParseMetrics(body)
	if err != nil {
		return 0, err
	}
	v, _ := opsMetric(samples, name, labels)
	return v, nil
}

// waitMetricAbove waits until the series exceeds floor, and returns its value.
func waitMetricAbove(t *testing.T, d *daemon, addr, name string, labels map[string]string, floor float64, timeout time.Duration) float64 {
	t.Helper()
	var v float64
	eventually(t, timeout, func() error {
		select {
		case <-d.done:
			t.Fatalf("kube-cdc exited while waiting for %s > %v:\n%s", name, floor, d.log())
		default:
		}
		var err error
		if v, err = metric(addr, name, labels); err == nil && v <= floor {
			err = fmt.Errorf("%s%v = %v, want more than %v", name, labels, v, floor)
		}
		return err
	})
	return v
}
