package pipeline

import (
	"context"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// newestSink is a sink that holds the given versions, newest first (NewestKeeper).
type newestSink struct {
	*memSink
	held []change.Held
}

func (s newestSink) Newest(_ context.Context, _ change.Resource, n int) ([]change.Held, error) {
	return s.held[:min(n, len(s.held))], nil
}

func TestHeldAheadReadsPastVersionsThatCannotTellAndStopsAtOneThatCan(t *testing.T) {
	key := func(n string) change.Key { return change.Key{Namespace: "ns", Name: n} }
	held := func(n, uid string, rv change.RV) change.Held {
		return change.Held{Key: key(n), Entry: change.Entry{UID: uid, RV: rv}}
	}
	type obj struct {
		uid string
		rv  change.RV
	}
	for _, tc := range []struct {
		name    string
		held    []change.Held
		cluster map[string]obj
		want    string // the key of the version that went back, "" for none
	}{
		{
			name:    "the newest is back at a lower RV",
			held:    []change.Held{held("a", "u-a", 50)},
			cluster: map[string]obj{"a": {"u-a", 40}},
			want:    "a",
		},
		{
			name:    "the newest is gone, the next newest is back at a lower RV",
			held:    []change.Held{held("gone", "u-g", 60), held("a", "u-a", 50)},
			cluster: map[string]obj{"a": {"u-a", 40}},
			want:    "a",
		},
		{
			name:    "the newest was recreated, the next newest is back at a lower RV",
			held:    []change.Held{held("re", "u-old", 60), held("a", "u-a", 50)},
			cluster: map[string]obj{"re": {"u-new", 70}, "a": {"u-a", 40}},
			want:    "a",
		},
		{
			name:    "the newest is there at its RV: the cluster is not behind, whatever older ones show",
			held:    []change.Held{held("a", "u-a", 60), held("b", "u-b", 50)},
			cluster: map[string]obj{"a": {"u-a", 60}, "b": {"u-b", 40}},
			want:    "",
		},
		{
			name:    "every version is gone: nothing tells",
			held:    []change.Held{held("x", "u-x", 60), held("y", "u-y", 50)},
			cluster: map[string]obj{},
			want:    "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newestSink{memSink: newMemSink("s"), held: tc.held}
			tgt := Fixture{Resource: cms, Current: func(_ context.Context, k change.Key) (change.Entry, bool, error) {
				o, ok := tc.cluster[k.Name]
				return change.Entry{UID: o.uid, RV: o.rv}, ok, nil
			}}
			p := newP(Options{}, []Sink{s}, []Fixture{tgt})
			tt := p.heldAhead(context.Background(), s, tgt.Target(), cms)
			switch {
			case tc.want == "" && tt != nil:
				t.Errorf("a time travel at %s (held %d, now %d), want none", tt.Key, tt.HeldRV, tt.ListRV)
			case tc.want != "" && tt == nil:
				t.Errorf("no time travel, want one at ns/%s", tc.want)
			case tc.want != "" && (tt.Key != key(tc.want) || tt.Reason != change.TravelObjectWentBack):
				t.Errorf("a time travel at %s (%s), want ns/%s", tt.Key, tt.Reason, tc.want)
			}
		})
	}
}
