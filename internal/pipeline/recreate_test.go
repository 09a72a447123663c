package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Issue 12: an object deleted and created again under its name while nobody watched
// (kube-cdc down, or the history expired) used to get only a create of the new uid from
// the relist: a consumer keyed by uid never learned that the old object ended. Now the
// old uid's inferred delete (reason recreated) comes first, at the RV just below the new
// object's, so per key the RVs still grow. Batches of one change each show that the
// order holds whatever the batching.
func TestARelistThatFindsANewUIDUnderAKeyDeletesTheOldUIDBeforeCreatingTheNewOne(t *testing.T) {
	s := newMemSink("pg")
	s.objects[change.Key{Namespace: "ns", Name: "kept"}] = change.Entry{UID: "u-kept", RV: 10}
	s.objects[change.Key{Namespace: "ns", Name: "recreated"}] = change.Entry{UID: "u-old", RV: 13}
	done := make(chan struct{})
	var asked []string
	p := newP(Options{MaxWait: time.Millisecond, BatchSize: 1}, []Sink{s}, []Fixture{{
		Resource: cms,
		Lookup: func(_ context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
			for k := range held {
				asked = append(asked, k.Name)
			}
			return nil, nil
		},
		NewStream: func() Streamer {
			return &script{done: done, events: func(change.RV) []change.Event {
				return []change.Event{
					{Type: change.RelistBegin},
					listed(obj("kept", "u-kept", 10)),
					listed(obj("recreated", "u-new", 21)),
					{Type: change.RelistEnd, RV: 30},
				}
			}}
		},
	}})
	stop := startRun(p)
	<-done
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	log, ck := s.snapshot()
	var got []string
	for _, c := range log {
		got = append(got, fmt.Sprintf("%s %s uid=%s rv=%d inferred=%v reason=%s snapshot=%v",
			c.Key.Name, c.Op, c.UID, c.RV, c.Inferred, c.Reason, c.Snapshot))
	}
	want := []string{
		"recreated delete uid=u-old rv=20 inferred=true reason=recreated snapshot=false",
		"recreated create uid=u-new rv=21 inferred=false reason= snapshot=true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if e := s.objects[change.Key{Namespace: "ns", Name: "recreated"}]; e != (change.Entry{UID: "u-new", RV: 21}) {
		t.Errorf("the sink holds %+v under ns/recreated, want the new uid at 21", e)
	}
	if ck != 30 {
		t.Errorf("checkpoint %d, want the LIST's 30", ck)
	}
	if len(asked) > 0 {
		t.Errorf("looked up %v in the cluster; a listed key needs no lookup (the LIST showed what is there)", asked)
	}
}

// The inferred delete of a recreated object sits strictly between the two objects' RVs,
// whatever the LIST's RV: above the version the sink holds (so an RV guard takes it) and
// below the new object's (so it takes the create after it). Its time is the new
// object's, not the time of observation, which would put it after the create in time
// and make a re-emit differ.
func TestTheInferredDeleteOfARecreatedObjectIsBetweenTheHeldAndTheNewRV(t *testing.T) {
	for _, tc := range []struct{ held, next change.RV }{{13, 21}, {5, 7}, {100, 1 << 40}} {
		next := obj("a", "u-new", tc.next)
		next.Snapshot, next.ListRV, next.Time = true, tc.next+1000, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		d := change.InferredDeleteBefore(next, change.Entry{UID: "u-old", RV: tc.held})
		if d.RV <= tc.held || d.RV >= tc.next {
			t.Errorf("held %d, new %d: delete at %d, want strictly between", tc.held, tc.next, d.RV)
		}
		if d.UID != "u-old" || d.Op != change.OpDelete || !d.Inferred || d.Reason != change.ReasonRecreated ||
			d.Snapshot || d.Object != nil || d.Key != next.Key || d.Resource != next.Resource {
			t.Errorf("delete %+v, want an inferred delete (reason recreated) of u-old under %s, without object", d, next.Key)
		}
		if !d.Time.Equal(next.Time) {
			t.Errorf("delete at time %v, want the new object's %v (not after its create; the same on a re-emit)", d.Time, next.Time)
		}
	}
}

// Issue 24: an object deleted before a relist's LIST and created again (a new uid) before
// the relist ends is in neither the LIST nor the key index's leftovers as "gone": the
// lookup at the end of the relist finds an object under the key, in this target's scope.
// It used to be taken as the held object still alive, and the old uid never got a delete.
// Its inferred delete (reason recreated) must be written at the LIST's RV, before the
// watch's create of the new uid; so the sink shows the new uid, and a uid-keyed consumer
// learns that the old object ended.
func TestAKeyRecreatedDuringARelistGetsTheOldUIDsDeleteBeforeTheNewUIDsCreate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		presence change.Presence
		deleteRV change.RV
	}{
		// The new object is in this target's scope: its stream writes it after the LIST
		// (above the LIST's RV), so the delete goes at the LIST's RV.
		{"in this scope", change.Presence{UID: "u-new", InScope: true, Here: true}, 30},
		// In another scope only: that scope may have written it below the LIST's RV, so
		// the delete goes just above the held version, where it buries nothing.
		{"in another scope", change.Presence{UID: "u-new", InScope: true}, 11},
		// In no scope: the key holds nothing of ours; gone at the LIST's RV.
		{"in no scope", change.Presence{UID: "u-new"}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMemSink("pg")
			key := change.Key{Namespace: "ns", Name: "cm-00"}
			s.objects[key] = change.Entry{UID: "u-old", RV: 10}
			s.objects[change.Key{Namespace: "ns", Name: "kept"}] = change.Entry{UID: "u-kept", RV: 12}
			done := make(chan struct{})
			p := newP(Options{MaxWait: time.Millisecond}, []Sink{s}, []Fixture{{
				Resource: cms,
				Lookup: func(_ context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
					out := map[change.Key]change.Presence{}
					for k := range held {
						if k == key {
							out[k] = tc.presence
						}
					}
					return out, nil
				},
				NewStream: func() Streamer {
					return &script{done: done, events: func(change.RV) []change.Event {
						evs := []change.Event{
							{Type: change.RelistBegin},
							listed(obj("kept", "u-kept", 12)),
							{Type: change.RelistEnd, RV: 30},
						}
						if tc.presence.Here {
							evs = append(evs, watched(change.OpCreate, obj("cm-00", "u-new", 33)))
						}
						return evs
					}}
				},
			}})
			stop := startRun(p)
			<-done
			waitFor(t, func() bool { _, ck := s.snapshot(); return ck >= 30 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			log, _ := s.snapshot()
			var got []string
			for _, c := range log {
				got = append(got, fmt.Sprintf("%s %s uid=%s rv=%d inferred=%v reason=%s", c.Key.Name, c.Op, c.UID, c.RV, c.Inferred, c.Reason))
			}
			reason := change.ReasonRecreated
			if !tc.presence.InScope {
				reason = change.ReasonGone
			}
			want := []string{fmt.Sprintf("cm-00 delete uid=u-old rv=%d inferred=true reason=%s", tc.deleteRV, reason)}
			if tc.presence.Here {
				want = append(want, "cm-00 create uid=u-new rv=33 inferred=false reason=")
			}
			if !slices.Equal(got, want) {
				t.Errorf("changes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if e, ok := s.objects[key]; tc.presence.Here && e.UID != "u-new" || !tc.presence.Here && ok {
				t.Errorf("the sink holds %+v (present %v) under ns/cm-00; want the new uid when this scope streams it, else nothing", e, ok)
			}
		})
	}
}
