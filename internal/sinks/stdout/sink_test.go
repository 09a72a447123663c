package stdout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

var configmaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

// recorder is an io.Writer that remembers each Write call and can fail.
type recorder struct {
	calls [][]byte
	err   error
	log   *[]string
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.log != nil {
		*r.log = append(*r.log, "write")
	}
	if r.err != nil {
		return 0, r.err
	}
	r.calls = append(r.calls, bytes.Clone(p))
	return len(p), nil
}

// memStore is an in-memory checkpoint.Store.
type memStore struct {
	rv     map[string]change.RV
	keys   map[change.Key]change.Entry
	err    error
	log    *[]string
	closed bool
}

func newMemStore(log *[]string) *memStore {
	return &memStore{rv: map[string]change.RV{}, keys: map[change.Key]change.Entry{}, log: log}
}

func (m *memStore) Load(_ context.Context, sink string, res change.Resource) (change.RV, error) {
	return m.rv[sink+"/"+res.ID()], nil
}

func (m *memStore) KeyIndex(_ context.Context, _ string, _ change.Resource, fn func(change.Key, change.Entry) error) error {
	for k, e := range m.keys {
		if err := fn(k, e); err != nil {
			return err
		}
	}
	return nil
}

// Intend is checkpoint.IntentStore's: the store is told the batch's keys before the
// lines go out.
func (m *memStore) Intend(context.Context, string, change.Batch) error {
	if m.log != nil {
		*m.log = append(*m.log, "intend")
	}
	return nil
}

func (m *memStore) Commit(_ context.Context, sink string, b change.Batch) error {
	if m.log != nil {
		*m.log = append(*m.log, "commit")
	}
	if m.err != nil {
		return m.err
	}
	for _, c := range b.Changes {
		if c.Op == change.OpDelete {
			delete(m.keys, c.Key)
		} else {
			m.keys[c.Key] = change.Entry{UID: c.UID, RV: c.RV}
		}
	}
	m.rv[sink+"/"+b.Resource.ID()] = b.Checkpoint
	return nil
}

func (m *memStore) Close() error { m.closed = true; return nil }

func batch() change.Batch {
	now := time.Now()
	obj := func(name string) json.RawMessage {
		return json.RawMessage(`{"metadata":{"name":"` + name + `","namespace":"ns"}}`)
	}
	return change.Batch{
		Resource: configmaps,
		Changes: []change.Change{
			{Cluster: "prod", Resource: configmaps, Key: change.Key{Namespace: "ns", Name: "a"}, UID: "ua", RV: 10, Op: change.OpCreate, Snapshot: true, Object: obj("a"), ObservedAt: now},
			{Cluster: "prod", Resource: configmaps, Key: change.Key{Namespace: "ns", Name: "b"}, UID: "ub", RV: 11, Op: change.OpCreate, Object: obj("b"), ObservedAt: now},
			{Cluster: "prod", Resource: configmaps, Key: change.Key{Namespace: "ns", Name: "a"}, UID: "ua", RV: 12, Op: change.OpUpdate, Object: obj("a"), ObservedAt: now},
			{Cluster: "prod", Resource: configmaps, Key: change.Key{Namespace: "ns", Name: "b"}, UID: "ub", RV: 13, Op: change.OpDelete, Object: obj("b"), ObservedAt: now},
			{Cluster: "prod", Resource: configmaps, Key: change.Key{Namespace: "ns", Name: "gone"}, UID: "ug", RV: 14, Op: change.OpDelete, Inferred: true, ObservedAt: now},
		},
		Checkpoint: 20,
	}
}

type line struct {
	Op     string          `json:"op"`
	TS     int64           `json:"ts_ms"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Source struct {
		Cluster   string `json:"cluster"`
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		RV        string `json:"resourceVersion"`
		Inferred  bool   `json:"inferred"`
		Snapshot  bool   `json:"snapshot"`
	} `json:"source"`
}

func TestWriteWritesOneJSONLinePerChangeInOneCall(t *testing.T) {
	w := &recorder{}
	s := New("out", w, nil, Options{})
	b := batch()
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if len(w.calls) != 1 {
		t.Fatalf("%d Write calls, want 1", len(w.calls))
	}
	out := string(w.calls[0])
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("output does not end with a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(b.Changes) {
		t.Fatalf("%d lines for %d changes:\n%s", len(lines), len(b.Changes), out)
	}
	wantOps := []string{"r", "c", "u", "d", "d"}
	for i, l := range lines {
		var got line
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, l)
		}
		c := b.Changes[i]
		if got.Op != wantOps[i] {
			t.Errorf("line %d: op %q, want %q", i, got.Op, wantOps[i])
		}
		if got.TS != c.ObservedAt.UnixMilli() {
			t.Errorf("line %d: ts_ms %d, want %d", i, got.TS, c.ObservedAt.UnixMilli())
		}
		if got.Source.Cluster != "prod" || got.Source.Resource != "configmaps" ||
			got.Source.Namespace != c.Key.Namespace || got.Source.Name != c.Key.Name ||
			got.Source.RV != c.RV.String() || got.Source.Inferred != c.Inferred || got.Source.Snapshot != c.Snapshot {
			t.Errorf("line %d: source %+v does not match change %+v", i, got.Source, c)
		}
	}
	var del line
	_ = json.Unmarshal([]byte(lines[3]), &del)
	if string(del.Before) != string(b.Changes[3].Object) || string(del.After) != "null" {
		t.Errorf("delete line carries before %s after %s", del.Before, del.After)
	}
}

func TestWriteKeepsTheChangesOwnCluster(t *testing.T) {
	w := &recorder{}
	b := batch()
	b.Changes = b.Changes[:1]
	b.Changes[0].Cluster = "edge"
	if err := New("out", w, nil, Options{}).Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	var got line
	if err := json.Unmarshal(w.calls[0], &got); err != nil || got.Source.Cluster != "edge" {
		t.Errorf("got %+v, %v", got.Source, err)
	}
	if b.Changes[0].Cluster != "edge" {
		t.Error("Write modified the batch")
	}
}

func TestWriteCommitsToTheStoreAfterWriting(t *testing.T) {
	var log []string
	st := newMemStore(&log)
	s := New("out", &recorder{log: &log}, st, Options{})
	ctx := context.Background()
	if rv, err := s.Checkpoint(ctx, configmaps); err != nil || rv != 0 {
		t.Fatalf("Checkpoint before any write = %v, %v", rv, err)
	}
	if err := s.Write(ctx, batch()); err != nil {
		t.Fatal(err)
	}
	// The keys are noted before the lines are written (a kill between the write and the
	// commit must not leave lines whose keys the index lacks), the commit comes after.
	if strings.Join(log, ",") != "intend,write,commit" {
		t.Errorf("calls %v, want intend, write, then commit", log)
	}
	if rv, err := s.Checkpoint(ctx, configmaps); err != nil || rv != 20 {
		t.Errorf("Checkpoint = %v, %v; want 20", rv, err)
	}
	var keys []string
	if err := s.KeyIndex(ctx, configmaps, func(k change.Key, e change.Entry) error {
		keys = append(keys, k.String()+"@"+e.RV.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "ns/a@12" {
		t.Errorf("key index %v, want [ns/a@12]", keys)
	}
	if err := s.Close(); err != nil || !st.closed {
		t.Errorf("Close = %v, store closed %v", err, st.closed)
	}
}

func TestWriteDoesNotCommitWhenTheWriteFails(t *testing.T) {
	var log []string
	st := newMemStore(&log)
	boom := errors.New("broken pipe")
	s := New("out", &recorder{err: boom, log: &log}, st, Options{})
	err := s.Write(context.Background(), batch())
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want %v", err, boom)
	}
	if strings.Join(log, ",") != "intend,write" {
		t.Errorf("calls %v, want the keys noted and the write, no commit", log)
	}
	if rv, _ := s.Checkpoint(context.Background(), configmaps); rv != 0 {
		t.Errorf("checkpoint advanced to %v", rv)
	}
}

func TestWriteReportsACommitFailure(t *testing.T) {
	st := newMemStore(nil)
	st.err = errors.New("disk full")
	err := New("out", &recorder{}, st, Options{}).Write(context.Background(), batch())
	if !errors.Is(err, st.err) {
		t.Errorf("Write = %v, want %v", err, st.err)
	}
}

func TestWithoutAStoreThereIsNoCheckpoint(t *testing.T) {
	s := New("out", &recorder{}, nil, Options{})
	ctx := context.Background()
	if err := s.Write(ctx, batch()); err != nil {
		t.Fatal(err)
	}
	if rv, err := s.Checkpoint(ctx, configmaps); err != nil || rv != 0 {
		t.Errorf("Checkpoint = %v, %v; want 0", rv, err)
	}
	n := 0
	if err := s.KeyIndex(ctx, configmaps, func(change.Key, change.Entry) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("KeyIndex = %v with %d keys", err, n)
	}
	if s.Name() != "out" || s.Close() != nil {
		t.Error("Name or Close")
	}
}

func TestWriteOfAnEmptyBatchOnlyCommits(t *testing.T) {
	var log []string
	st := newMemStore(&log)
	s := New("out", &recorder{log: &log}, st, Options{})
	if err := s.Write(context.Background(), change.Batch{Resource: configmaps, Checkpoint: 99}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(log, ",") != "commit" {
		t.Errorf("calls %v, want only the commit (a bookmark advances the checkpoint)", log)
	}
	if rv, _ := s.Checkpoint(context.Background(), configmaps); rv != 99 {
		t.Errorf("checkpoint %v, want 99", rv)
	}
}

// lockedBuffer is an io.Writer safe to read while the sink writes resolved lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSuffix(l.b.String(), "\n"), "\n")
}

func TestResolvedLinesComeAfterTheChangeLinesTheyCoverAndBookmarksMoveThem(t *testing.T) {
	out := &lockedBuffer{}
	s := New("out", out, nil, Options{Cluster: "prod", ResolvedInterval: 5 * time.Millisecond})
	type resolvedLine struct {
		Op, Cluster, Sink, Group, Resource, Scope, ResolvedRV, Time string
		Epoch                                                       int
	}
	waitResolved := func(rv string) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			lines := out.lines()
			for i, l := range lines {
				var r resolvedLine
				if json.Unmarshal([]byte(l), &r) == nil && r.Op == "resolved" && r.ResolvedRV == rv {
					if r.Cluster != "prod" || r.Sink != "out" || r.Resource != "configmaps" || r.Epoch != 0 {
						t.Errorf("resolved line %s", l)
					}
					return lines[:i]
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no resolved line at RV %s in\n%s", rv, strings.Join(out.lines(), "\n"))
		return nil
	}
	if err := s.Write(context.Background(), batch()); err != nil {
		t.Fatal(err)
	}
	if before := waitResolved("20"); len(before) != len(batch().Changes) {
		t.Errorf("%d lines before the resolved line at RV 20, want the batch's %d changes", len(before), len(batch().Changes))
	}
	// A bookmark: a batch without changes moves the watermark.
	if err := s.Write(context.Background(), change.Batch{Resource: configmaps, Checkpoint: 25}); err != nil {
		t.Fatal(err)
	}
	waitResolved("25")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range out.lines() {
		if strings.Contains(l, `"op":"resolved"`) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d resolved lines, want 2: one per move of the watermark\n%s", n, strings.Join(out.lines(), "\n"))
	}
}

func TestWithoutAResolvedIntervalThereAreNoResolvedLines(t *testing.T) {
	out := &lockedBuffer{}
	s := New("out", out, nil, Options{Cluster: "prod"})
	if err := s.Write(context.Background(), batch()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range out.lines() {
		if strings.Contains(l, `"resolved"`) {
			t.Errorf("resolved line %s, though resolvedInterval is 0", l)
		}
	}
}
