package sinktest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Resource is the resource every case writes.
var Resource = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

var observedAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// uid is the uid of generation gen of the object name: a re-created object gets a new one.
func uid(name string, gen int) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", h.Sum32(), gen)
}

// fixture builds changes of Resource for one cluster.
type fixture struct{ cluster string }

// change is one change of ns/name, generation gen; its object records its RV.
func (f fixture) change(name string, gen int, rv change.RV, op change.Op) change.Change {
	id := uid(name, gen)
	return change.Change{
		Cluster: f.cluster, Resource: Resource,
		Key: change.Key{Namespace: "ns", Name: name}, UID: id, RV: rv, Op: op,
		Object: json.RawMessage(fmt.Sprintf(
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d"},"data":{"rv":"%d"}}`,
			name, id, rv, rv)),
		Labels:     json.RawMessage(`{"app":"sinktest"}`),
		ChangedBy:  "kubectl/Update",
		Time:       observedAt.Add(time.Duration(rv) * time.Second),
		ObservedAt: observedAt.Add(time.Duration(rv) * time.Second),
	}
}

// inferredDelete is what the reconcile diff emits for a key the LIST no longer has: no
// object, the LIST's RV.
func (f fixture) inferredDelete(name string, gen int, rv change.RV) change.Change {
	c := f.change(name, gen, rv, change.OpDelete)
	c.Inferred, c.Object, c.Labels, c.Time = true, nil, nil, time.Time{}
	return c
}

// snapshot is a create written by a relist whose LIST was at listRV.
func (f fixture) snapshot(name string, gen int, rv, listRV change.RV) change.Change {
	c := f.change(name, gen, rv, change.OpCreate)
	c.Snapshot, c.ListRV = true, listRV
	return c
}

func batch(checkpoint change.RV, changes ...change.Change) change.Batch {
	return change.Batch{Resource: Resource, Changes: changes, Checkpoint: checkpoint}
}

// keys is a key index, as the suite compares it.
type keys map[change.Key]change.Entry

func (k keys) String() string {
	s := "{"
	for _, key := range sortedKeys(k) {
		if len(s) > 1 {
			s += " "
		}
		s += fmt.Sprintf("%s:%d", key, k[key].RV)
	}
	return s + "}"
}

func sortedKeys(k keys) []change.Key {
	out := make([]change.Key, 0, len(k))
	for key := range k {
		out = append(out, key)
	}
	slices.SortFunc(out, func(a, b change.Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// want is the key index a sink must hold after the changes, applied in order with the
// RV guard: the newest version of each live key.
func want(changes ...change.Change) keys {
	k := keys{}
	dead := map[change.Key]change.RV{}
	for _, c := range changes {
		if e, ok := k[c.Key]; ok && e.RV > c.RV || dead[c.Key] > c.RV {
			continue
		}
		if c.Op == change.OpDelete {
			delete(k, c.Key)
			dead[c.Key] = c.RV
			continue
		}
		k[c.Key] = change.Entry{UID: c.UID, RV: c.RV}
	}
	return k
}

// run is one case: its target, the sink open on it, and the helpers that read it back.
type run struct {
	t      *testing.T
	h      Harness
	target Target
	sink   Sink
	f      fixture
}

func newRun(t *testing.T, h Harness) *run {
	r := &run{t: t, h: h, target: h.New(t), f: fixture{cluster: h.Cluster}}
	r.open()
	t.Cleanup(func() {
		if r.sink != nil {
			r.sink.Close()
		}
	})
	return r
}

func (r *run) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *run) open() {
	r.t.Helper()
	r.sink = r.target.Open(r.t)
}

// restart closes the sink and opens another on the same state.
func (r *run) restart() {
	r.t.Helper()
	if err := r.sink.Close(); err != nil {
		r.t.Fatalf("Close: %v", err)
	}
	r.sink = nil
	r.open()
}

// prepare is the sink's Prepare where it has one, else Write bound to b.
func (r *run) prepare(b change.Batch) func(ctx context.Context) error {
	if p, ok := r.sink.(Preparer); ok {
		return p.Prepare(b)
	}
	s := r.sink
	return func(ctx context.Context) error { return s.Write(ctx, b) }
}

func (r *run) write(b change.Batch) {
	r.t.Helper()
	if err := r.prepare(b)(r.ctx()); err != nil {
		r.t.Fatalf("write of %d changes, checkpoint %d: %v", len(b.Changes), b.Checkpoint, err)
	}
}

func (r *run) checkpoint() change.RV {
	r.t.Helper()
	rv, err := r.sink.Checkpoint(r.ctx(), Resource)
	if err != nil {
		r.t.Fatalf("Checkpoint: %v", err)
	}
	return rv
}

func (r *run) keyIndex() keys {
	r.t.Helper()
	k := keys{}
	err := r.sink.KeyIndex(r.ctx(), Resource, func(key change.Key, e change.Entry) error {
		if _, dup := k[key]; dup {
			return fmt.Errorf("key %s listed twice", key)
		}
		k[key] = e
		return nil
	})
	if err != nil {
		r.t.Fatalf("KeyIndex: %v", err)
	}
	return k
}

func (r *run) records() []Record {
	r.t.Helper()
	return r.target.Records(r.t, Resource)
}

// expectCheckpoint fails the case unless the checkpoint reads rv.
func (r *run) expectCheckpoint(rv change.RV, why string) {
	r.t.Helper()
	if got := r.checkpoint(); got != rv {
		r.t.Errorf("%s: checkpoint %d, want %d", why, got, rv)
	}
}

// expectKeys fails the case unless the key index reads k exactly (uids and RVs).
func (r *run) expectKeys(k keys, why string) {
	r.t.Helper()
	if got := r.keyIndex(); !maps.Equal(got, k) {
		r.t.Errorf("%s: key index %v, want %v", why, got, k)
		for _, key := range sortedKeys(k) {
			if got[key] != k[key] {
				r.t.Errorf("  %s: %+v, want %+v", key, got[key], k[key])
			}
		}
	}
}

// expectKeysAfterAFailedWrite fails the case unless the key index, after b's write
// failed part-way, is k0 (what was committed before) plus, at most, keys of b at RV 0:
// noted before b's records went out (checkpoint.IntentStore) but never committed. Every
// key a record of recs went out for must be in it, or a relist after its object is gone
// would never tombstone it.
func (r *run) expectKeysAfterAFailedWrite(k0 keys, b change.Batch, recs []Record, why string) {
	r.t.Helper()
	got := r.keyIndex()
	inBatch := map[change.Key]bool{}
	for _, c := range b.Changes {
		inBatch[c.Key] = true
	}
	for key, e := range got {
		if old, ok := k0[key]; ok {
			if e != old {
				r.t.Errorf("%s: key %s is %+v, was %+v: an uncommitted write changed it", why, key, e, old)
			}
		} else if !inBatch[key] || e.RV != 0 {
			r.t.Errorf("%s: key %s is %+v: only keys of the failed batch, at RV 0, may be added", why, key, e)
		}
	}
	for key := range k0 {
		if _, ok := got[key]; !ok {
			r.t.Errorf("%s: key %s is gone from the index", why, key)
		}
	}
	for _, rec := range recs {
		if _, ok := got[rec.Key]; !ok && rec.Op != change.OpDelete {
			r.t.Errorf("%s: a record of %s went out, but the index lacks the key", why, rec.Key)
		}
	}
}

// expectRecords fails the case unless every change is among recs (exactly once when
// exactly is set, else at least once), recs hold nothing else, and the per-key order holds.
func (r *run) expectRecords(recs []Record, changes []change.Change, exactly bool, why string) {
	r.t.Helper()
	n := counts(recs)
	wanted := map[Record]bool{}
	for _, c := range changes {
		rec := recordOf(c)
		wanted[rec] = true
		switch {
		case n[rec] == 0:
			r.t.Errorf("%s: change %s is missing from the records %s", why, rec, formatRecords(recs))
		case exactly && n[rec] > 1:
			r.t.Errorf("%s: change %s is held %d times: %s", why, rec, n[rec], formatRecords(recs))
		}
	}
	for rec := range n {
		if !wanted[rec] {
			r.t.Errorf("%s: record %s of no written change", why, rec)
		}
	}
	for _, bad := range checkOrder(recs) {
		r.t.Errorf("%s: per-key order broken: %s", why, bad)
	}
}
