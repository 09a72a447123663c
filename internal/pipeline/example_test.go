package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
)

// memSink is the smallest pipeline.Sink: a map of the live objects it holds (its key
// index), the log of every change written, and one checkpoint. Real sinks
// (internal/sinks/...) make the same things durable; internal/sinks/sinktest checks
// that they do.
type memSink struct {
	mu      sync.Mutex
	rows    map[change.Key]change.Entry
	log     []change.Change
	ckpt    change.RV
	written chan struct{} // told (without blocking) after every Write
}

func newMemSink() *memSink {
	return &memSink{rows: map[change.Key]change.Entry{}, written: make(chan struct{}, 1)}
}

func (s *memSink) Name() string { return "memory" }

// Checkpoint is 0 at first: the pipeline then relists.
func (s *memSink) Checkpoint(context.Context, change.Resource) (change.RV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ckpt, nil
}

// KeyIndex is what the reconcile diff compares a relist with.
func (s *memSink) KeyIndex(_ context.Context, _ change.Resource, fn func(change.Key, change.Entry) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.rows {
		if err := fn(k, e); err != nil {
			return err
		}
	}
	return nil
}

// Write applies the batch and moves the checkpoint, both at once (under the lock).
func (s *memSink) Write(_ context.Context, b change.Batch) error {
	s.mu.Lock()
	for _, c := range b.Changes {
		s.log = append(s.log, c)
		if c.Op == change.OpDelete {
			delete(s.rows, c.Key)
		} else {
			s.rows[c.Key] = change.Entry{UID: c.UID, RV: c.RV, Epoch: c.Epoch}
		}
	}
	s.ckpt = max(s.ckpt, b.Checkpoint)
	s.mu.Unlock()
	select {
	case s.written <- struct{}{}:
	default:
	}
	return nil
}

func (s *memSink) Close() error { return nil }

// waitFor waits until the sink's checkpoint reaches rv, or the deadline passes.
func (s *memSink) waitFor(rv change.RV, deadline time.Duration) error {
	timeout := time.After(deadline)
	for {
		if ck, _ := s.Checkpoint(context.Background(), change.Resource{}); ck >= rv {
			return nil
		}
		select {
		case <-s.written:
		case <-timeout:
			return errors.New("timed out waiting for the sink")
		}
	}
}

var configmaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

// scripted is the smallest pipeline.Target: one resource, configured once, whose stream
// is a fixed script instead of a List+Watch of a cluster (internal/source streams real
// ones).
type scripted struct{}

func (scripted) Resource() change.Resource { return configmaps }

func (scripted) Resolve(context.Context) (change.Resource, error) { return configmaps, nil }

// Stream starts with a relist, since the sink holds nothing (from is 0): the LIST shows
// two objects at RV 10. Then the watch from 10 is accepted and brings three changes.
func (scripted) Stream(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error, accepted func()) error {
	obj := func(name string, rv change.RV) change.Change {
		return change.Change{Resource: configmaps, Key: change.Key{Namespace: "ns", Name: name}, UID: "uid-" + name, RV: rv,
			Object: []byte(`{"kind":"ConfigMap"}`), ObservedAt: time.Now()}
	}
	listed := func(c change.Change) change.Event {
		c.Snapshot = true
		return change.Event{Type: change.Listed, Change: c}
	}
	watched := func(op change.Op, c change.Change) change.Event {
		c.Op = op
		return change.Event{Type: change.Changed, Change: c}
	}

	var events []change.Event
	if from == 0 {
		events = append(events,
			change.Event{Type: change.RelistBegin},
			listed(obj("a", 7)),
			listed(obj("b", 9)),
			change.Event{Type: change.RelistEnd, RV: 10})
		from = 10
	}
	accepted() // the watch from `from` is open
	events = append(events,
		change.Event{Type: change.Established, RV: from},
		watched(change.OpUpdate, obj("a", 11)),
		watched(change.OpDelete, obj("b", 12)),
		watched(change.OpCreate, obj("c", 13)))
	for _, ev := range events {
		if err := emit(ctx, ev); err != nil {
			return err
		}
	}
	<-ctx.Done() // a watch goes on until the pipeline stops
	return nil
}

// Owns every key: the only target of its resource, without namespaces.
func (scripted) Owns(change.Key) bool { return true }
func (scripted) Sweeps() bool         { return true }

// Lookup answers nil: every held key the LIST lacks is gone.
func (scripted) Lookup(context.Context, map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	return nil, nil
}
func (scripted) Current(context.Context, change.Key) (change.Entry, bool, error) {
	return change.Entry{}, false, nil
}
func (scripted) ServerRV(context.Context) (change.RV, error) { return 0, nil }
func (scripted) Resync() time.Duration                       { return 0 }

// A pipeline streams each target into every sink: here one scripted target into one
// in-memory sink. The relist's objects arrive as snapshot creates (the sink held
// nothing), the watch's changes follow in order, and the checkpoint ends at the last
// change the sink acknowledged.
func Example() {
	sink := newMemSink()
	p := pipeline.New(pipeline.Options{Cluster: "demo"}, []pipeline.Sink{sink}, []pipeline.Target{scripted{}})

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	if err := sink.waitFor(13, time.Minute); err != nil {
		fmt.Println(err)
	}
	stop() // Run flushes what is queued, then returns nil
	if err := <-done; err != nil {
		fmt.Println("Run:", err)
	}

	sink.mu.Lock()
	defer sink.mu.Unlock()
	fmt.Println("written, in order:")
	for _, c := range sink.log {
		fmt.Printf("  %s %s %s rv=%d snapshot=%v\n", c.Cluster, c.Op, c.Key, c.RV, c.Snapshot)
	}
	fmt.Println("held:")
	keys := make([]change.Key, 0, len(sink.rows))
	for k := range sink.rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y change.Key) int { return strings.Compare(x.String(), y.String()) })
	for _, k := range keys {
		fmt.Printf("  %s uid=%s rv=%d\n", k, sink.rows[k].UID, sink.rows[k].RV)
	}
	fmt.Println("checkpoint:", sink.ckpt)
	// Output:
	// written, in order:
	//   demo create ns/a rv=7 snapshot=true
	//   demo create ns/b rv=9 snapshot=true
	//   demo update ns/a rv=11 snapshot=false
	//   demo delete ns/b rv=12 snapshot=false
	//   demo create ns/c rv=13 snapshot=false
	// held:
	//   ns/a uid=uid-a rv=11
	//   ns/c uid=uid-c rv=13
	// checkpoint: 13
}
