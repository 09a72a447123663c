package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// epochSink is an in-memory sink that keeps what the PostgreSQL sink keeps of epochs: an
// RV guard on (epoch, RV) per object, a checkpoint ordered by (epoch, RV), and the epoch
// of its checkpoint (EpochKeeper).
type epochSink struct {
	mu      sync.Mutex
	ckpt    change.RV
	epoch   int
	objects map[change.Key]change.Change
	log     []change.Change
	travels []change.TimeTravel
}

func (s *epochSink) Name() string { return "pg" }
func (s *epochSink) Checkpoint(context.Context, change.Resource) (change.RV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ckpt, nil
}
func (s *epochSink) Epoch(context.Context, change.Resource) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch, nil
}
func (s *epochSink) KeyIndex(_ context.Context, _ change.Resource, fn func(change.Key, change.Entry) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.objects {
		if c.Op != change.OpDelete {
			if err := fn(k, change.Entry{UID: c.UID, RV: c.RV, Epoch: c.Epoch}); err != nil {
				return err
			}
		}
	}
	return nil
}

func newer(a, b change.Change) bool { return a.Epoch > b.Epoch || a.Epoch == b.Epoch && a.RV > b.RV }

func (s *epochSink) Write(_ context.Context, b change.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range b.Changes {
		s.log = append(s.log, c)
		if held, ok := s.objects[c.Key]; !ok || newer(c, held) {
			s.objects[c.Key] = c
		}
	}
	if b.Epoch > s.epoch || b.Epoch == s.epoch && b.Checkpoint > s.ckpt {
		s.epoch, s.ckpt = b.Epoch, b.Checkpoint
	}
	if b.TimeTravel != nil {
		s.travels = append(s.travels, *b.TimeTravel)
	}
	return nil
}
func (s *epochSink) Close() error { return nil }

func (s *epochSink) hold(name, uid string, rv change.RV) {
	c := obj(name, uid, rv)
	c.Epoch, c.Op = s.epoch, change.OpUpdate
	s.objects[c.Key] = c
}

func listedAt(listRV change.RV, c change.Change) change.Event {
	ev := listed(c)
	ev.Change.ListRV = listRV
	return ev
}

// travelCounter records the TimeTravel metric.
type travelCounter struct {
	nopMetrics
	mu      sync.Mutex
	reasons []string
}

func (m *travelCounter) TimeTravel(sink, resource, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reasons = append(m.reasons, sink+" "+resource+" "+reason)
}

func runEpochs(t *testing.T, s *epochSink, events []change.Event) *travelCounter {
	t.Helper()
	m := &travelCounter{}
	done := make(chan struct{})
	p := newP(Options{MaxWait: time.Millisecond, Metrics: m}, []Sink{s}, []Fixture{{Resource: cms, NewStream: func() Streamer {
		return &script{done: done, events: func(change.RV) []change.Event { return events }}
	}}})
	stop := startRun(p)
	<-done
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return m
}

func (s *epochSink) state() (objects []string, log []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.objects {
		objects = append(objects, fmt.Sprintf("%s %s %s@%d/%d", k.Name, c.Op, c.UID, c.Epoch, c.RV))
	}
	slices.Sort(objects)
	for _, c := range s.log {
		log = append(log, fmt.Sprintf("%s %s %s@%d/%d inferred=%v", c.Key.Name, c.Op, c.UID, c.Epoch, c.RV, c.Inferred))
	}
	return objects, log
}

// Issue 12, time travel: after an etcd restore (or a cluster rebuilt under the same name)
// the cluster's RVs are below what the sink holds. The RV guard used to keep the sink's
// newer-looking versions forever, and the watch from the checkpoint waited for a future
// that never came. A relist whose LIST is below the checkpoint starts a new epoch: every
// listed object is written over what the sink holds of an earlier epoch (whose RVs the
// restored cluster may have issued again for other contents), what the LIST lacks is
// tombstoned, and the checkpoint goes down to the LIST's RV, in the new epoch, so the
// watch after it (RVs below the old checkpoint) is written too.
func TestARelistBelowTheCheckpointStartsANewEpochWhoseVersionsReplaceTheSinks(t *testing.T) {
	s := &epochSink{ckpt: 100, objects: map[change.Key]change.Change{}}
	s.hold("restored", "u-r", 90) // changed after the backup: the cluster has it at 40 again
	s.hold("lost", "u-l", 95)     // created after the backup: gone
	s.hold("same", "u-s", 60)     // untouched since the backup
	m := runEpochs(t, s, []change.Event{
		{Type: change.RelistBegin},
		listedAt(50, obj("restored", "u-r", 40)),
		listedAt(50, obj("same", "u-s", 60)),
		listedAt(50, obj("new", "u-n", 45)),
		{Type: change.RelistEnd, RV: 50},
		watched(change.OpUpdate, obj("restored", "u-r", 55)),
	})
	objects, log := s.state()
	wantObjects := []string{"lost delete u-l@1/50", "new create u-n@1/45", "restored update u-r@1/55", "same update u-s@1/60"}
	if !slices.Equal(objects, wantObjects) {
		t.Errorf("the sink holds\n  %s\nwant\n  %s", strings.Join(objects, "\n  "), strings.Join(wantObjects, "\n  "))
	}
	wantLog := []string{"restored update u-r@1/40 inferred=false", "same update u-s@1/60 inferred=false", "new create u-n@1/45 inferred=false",
		"lost delete u-l@1/50 inferred=true", "restored update u-r@1/55 inferred=false"}
	if !slices.Equal(log, wantLog) {
		t.Errorf("changes written\n  %s\nwant\n  %s", strings.Join(log, "\n  "), strings.Join(wantLog, "\n  "))
	}
	if s.epoch != 1 || s.ckpt != 55 {
		t.Errorf("checkpoint %d in epoch %d, want 55 in epoch 1", s.ckpt, s.epoch)
	}
	want := change.TimeTravel{Epoch: 1, Reason: change.TravelListBelowCheckpoint, Checkpoint: 100, ListRV: 50}
	if len(s.travels) != 1 || func() change.TimeTravel { tt := s.travels[0]; tt.At = time.Time{}; return tt }() != want {
		t.Errorf("time travels recorded %+v, want one: %+v", s.travels, want)
	}
	if !slices.Equal(m.reasons, []string{"pg configmaps list-below-checkpoint"}) {
		t.Errorf("time travel metric %v, want one list-below-checkpoint", m.reasons)
	}
}

// Issue 24: the same restore when no listed object went back (each is at or past what the
// sink holds), so that only the LIST's RV below the checkpoint reveals it. Without the
// check the relist stays in epoch 0: lost's tombstone at 50 is below the 95 the sink
// holds and is dropped by the guard (lost stays alive), the watch's new@55 is dropped as
// already held (below the checkpoint), and the checkpoint sticks at 100.
func TestARestoreRevealedOnlyByTheListsRVBelowTheCheckpointStillConverges(t *testing.T) {
	s := &epochSink{ckpt: 100, objects: map[change.Key]change.Change{}}
	s.hold("lost", "u-l", 95) // created after the backup: gone
	s.hold("same", "u-s", 60) // untouched since the backup
	runEpochs(t, s, []change.Event{
		{Type: change.RelistBegin},
		listedAt(50, obj("same", "u-s", 60)),
		listedAt(50, obj("new", "u-n", 45)),
		{Type: change.RelistEnd, RV: 50},
		watched(change.OpUpdate, obj("new", "u-n", 55)),
	})
	objects, _ := s.state()
	wantObjects := []string{"lost delete u-l@1/50", "new update u-n@1/55", "same update u-s@1/60"}
	if !slices.Equal(objects, wantObjects) {
		t.Errorf("the sink holds\n  %s\nwant\n  %s", strings.Join(objects, "\n  "), strings.Join(wantObjects, "\n  "))
	}
	if s.epoch != 1 || s.ckpt != 55 {
		t.Errorf("checkpoint %d in epoch %d, want 55 in epoch 1", s.ckpt, s.epoch)
	}
}

// A LIST at or past the checkpoint that shows an object older than the version the sink
// holds is a time travel too (a restore to a backup older than that version, when the
// cluster's RVs have meanwhile grown past the checkpoint). The epoch goes on from the
// one the sink keeps, and the changes of the relist listed before the evidence are
// stamped with the new epoch as well.
func TestAnObjectListedBelowTheVersionTheSinkHoldsStartsTheNextEpoch(t *testing.T) {
	s := &epochSink{ckpt: 100, epoch: 2, objects: map[change.Key]change.Change{}}
	s.hold("changed", "u-c", 80)
	s.hold("restored", "u-r", 90)
	runEpochs(t, s, []change.Event{
		{Type: change.RelistBegin},
		listedAt(150, obj("changed", "u-c", 120)),
		listedAt(150, obj("restored", "u-r", 70)),
		{Type: change.RelistEnd, RV: 150},
	})
	objects, _ := s.state()
	wantObjects := []string{"changed update u-c@3/120", "restored update u-r@3/70"}
	if !slices.Equal(objects, wantObjects) {
		t.Errorf("the sink holds\n  %s\nwant\n  %s", strings.Join(objects, "\n  "), strings.Join(wantObjects, "\n  "))
	}
	if s.epoch != 3 || s.ckpt != 150 {
		t.Errorf("checkpoint %d in epoch %d, want 150 in epoch 3", s.ckpt, s.epoch)
	}
	if len(s.travels) != 1 || s.travels[0].Reason != change.TravelObjectWentBack || s.travels[0].Key.Name != "restored" ||
		s.travels[0].HeldRV != 90 || s.travels[0].ListRV != 150 || s.travels[0].Epoch != 3 {
		t.Errorf("time travels recorded %+v, want one object-went-back of restored (held 90) into epoch 3", s.travels)
	}
}

// An ordinary relist (after a 410) is no time travel: its LIST is past the checkpoint
// and shows every object at or past the version the sink holds.
func TestARelistPastTheCheckpointStaysInTheSameEpoch(t *testing.T) {
	s := &epochSink{ckpt: 100, epoch: 1, objects: map[change.Key]change.Change{}}
	s.hold("changed", "u-c", 80)
	s.hold("same", "u-s", 90)
	m := runEpochs(t, s, []change.Event{
		{Type: change.RelistBegin},
		listedAt(150, obj("changed", "u-c", 120)),
		listedAt(150, obj("same", "u-s", 90)),
		{Type: change.RelistEnd, RV: 150},
	})
	if _, log := s.state(); !slices.Equal(log, []string{"changed update u-c@1/120 inferred=false"}) {
		t.Errorf("changes written %v, want only changed's update in epoch 1", log)
	}
	if s.epoch != 1 || s.ckpt != 150 || len(s.travels) != 0 || len(m.reasons) != 0 {
		t.Errorf("checkpoint %d in epoch %d, travels %v, metric %v; want 150 in epoch 1 and no time travel", s.ckpt, s.epoch, s.travels, m.reasons)
	}
}
