package sinktest

import (
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func TestCheckOrderAcceptsReEmitsAndRejectsAKeyGoingBackInTime(t *testing.T) {
	a, b := change.Key{Namespace: "ns", Name: "a"}, change.Key{Namespace: "ns", Name: "b"}
	rec := func(k change.Key, rv change.RV) Record { return Record{Key: k, RV: rv, Op: change.OpUpdate} }
	for _, tc := range []struct {
		name string
		recs []Record
		bad  int
	}{
		{"in order", []Record{rec(a, 1), rec(b, 2), rec(a, 3)}, 0},
		{"a re-emitted batch", []Record{rec(a, 1), rec(a, 3), rec(a, 1), rec(a, 3), rec(a, 4)}, 0},
		{"other keys do not interfere", []Record{rec(b, 9), rec(a, 1)}, 0},
		{"an older version never seen before", []Record{rec(a, 3), rec(a, 2)}, 1},
		{"the same version twice in a row is a copy", []Record{rec(a, 3), rec(a, 3)}, 0},
		{"a delete at the RV of a seen update is new", []Record{rec(a, 3), {Key: a, RV: 3, Op: change.OpDelete}}, 1},
	} {
		if got := checkOrder(tc.recs); len(got) != tc.bad {
			t.Errorf("%s: %d violations %v, want %d", tc.name, len(got), got, tc.bad)
		}
	}
}
