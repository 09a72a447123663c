package resolved

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

var configMaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func TestAWatermarkIsEmittedOnceWhenItMovesAndNeverBackwards(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	var emitted []Watermark
	fail := false
	e := &Emitter{Cluster: "prod", Sink: "stream", Clock: clk, Emit: func(_ context.Context, ws []Watermark) error {
		if fail {
			return errors.New("broker down")
		}
		emitted = append(emitted, ws...)
		return nil
	}}
	flush := func() []Watermark {
		t.Helper()
		emitted = nil
		if err := e.Flush(context.Background()); err != nil && !fail {
			t.Fatal(err)
		}
		return emitted
	}
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 10})
	if got := flush(); len(got) != 1 || got[0].RV != 10 {
		t.Fatalf("emitted %+v, want RV 10", got)
	}
	if got := flush(); len(got) != 0 {
		t.Errorf("emitted %+v again though nothing moved", got)
	}
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 7}) // a replayed batch
	if got := flush(); len(got) != 0 {
		t.Errorf("a replayed older checkpoint emitted %+v", got)
	}
	// A failed emission is emitted again, with what moved meanwhile.
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 12})
	fail = true
	flush()
	fail = false
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 15})
	if got := flush(); len(got) != 1 || got[0].RV != 15 {
		t.Errorf("after a failure emitted %+v, want RV 15", got)
	}
	// A new epoch's relist holds checkpoint 0: nothing to say until it ends, then a lower
	// RV in the higher epoch.
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 0, Epoch: 1})
	if got := flush(); len(got) != 0 {
		t.Errorf("emitted %+v for a relist under way in a new epoch", got)
	}
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 3, Epoch: 1})
	if got := flush(); len(got) != 1 || got[0].RV != 3 || got[0].Epoch != 1 {
		t.Errorf("emitted %+v, want RV 3 in epoch 1", got)
	}
	e.Committed(change.Batch{Resource: configMaps, Checkpoint: 14, Epoch: 0})
	if got := flush(); len(got) != 0 {
		t.Errorf("an older epoch's checkpoint emitted %+v", got)
	}
}

func TestTheRecordIsJSONWithEveryField(t *testing.T) {
	scoped := configMaps
	scoped.Scope = "ns=a"
	w := Watermark{Cluster: "prod", Sink: "stream", Resource: scoped, RV: 18446744073709551615, Epoch: 2,
		Time: time.Date(2001, 2, 3, 4, 5, 6, 789e6, time.FixedZone("x", 3600))}
	var got map[string]any
	if err := json.Unmarshal(Append(nil, w), &got); err != nil {
		t.Fatalf("%s: %v", Append(nil, w), err)
	}
	want := map[string]any{"op": "resolved", "cluster": "prod", "sink": "stream", "group": "", "resource": "configmaps",
		"scope": "ns=a", "resolvedRV": "18446744073709551615", "epoch": 2.0, "time": "2001-02-03T03:05:06.789Z"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if k := w.Key(); k != "prod/stream/configmaps/ns=a" {
		t.Errorf("key %q", k)
	}
}
