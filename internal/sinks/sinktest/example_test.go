package sinktest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/sinks/sinktest"
	"github.com/kube-cdc/kube-cdc/internal/sinks/stdout"
)

// output is where the sink under test writes (the stdout sink writes JSON lines to any
// io.Writer). It outlives the sinks opened on it, as a redirected file would, so a
// restart sees what was written before. While broken, a Write writes the first half of
// its lines and fails: a write that fails part-way.
type output struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	broken bool
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.broken {
		return o.buf.Write(p)
	}
	lines := bytes.SplitAfter(p, []byte("\n"))
	n := 0
	for _, l := range lines[:len(lines)/2] {
		o.buf.Write(l)
		n += len(l)
	}
	return n, errors.New("broken pipe")
}

func (o *output) setBroken(b bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.broken = b
}

// records reads the lines back as the suite's Records, in the order a consumer reads them.
func (o *output) records(t *testing.T, res change.Resource) []sinktest.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	ops := map[string]change.Op{"r": change.OpCreate, "c": change.OpCreate, "u": change.OpUpdate, "d": change.OpDelete}
	var out []sinktest.Record
	for _, l := range bytes.Split(o.buf.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var e struct {
			Op     string `json:"op"`
			Source struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
				RV        string `json:"resourceVersion"`
			} `json:"source"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("not an envelope: %v: %s", err, l)
		}
		rv, err := change.ParseRV(e.Source.RV)
		if err != nil {
			t.Fatal(err)
		}
		if e.Source.Resource == res.Resource {
			out = append(out, sinktest.Record{Key: change.Key{Namespace: e.Source.Namespace, Name: e.Source.Name}, RV: rv, Op: ops[e.Op]})
		}
	}
	return out
}

// harness describes the sink to the suite: how to start fresh durable state for a case
// (New), open a sink on it (Open, again after each restart), read back what it holds
// (Records), and make one write fail part-way (Break). The flags say which of the
// contract's stronger promises the sink makes; the stdout sink makes none of them (it
// delivers at least once, and its file store forgets deleted keys).
func harness() sinktest.Harness {
	return sinktest.Harness{
		Cluster: "prod",
		New: func(t *testing.T) sinktest.Target {
			out := &output{}
			state := filepath.Join(t.TempDir(), "state.db") // checkpoints and key index
			return sinktest.Target{
				Open: func(t *testing.T) sinktest.Sink {
					store, err := checkpoint.OpenFile(state)
					if err != nil {
						t.Fatal(err)
					}
					return stdout.New("out", out, store, stdout.Options{})
				},
				Records: out.records,
				Break: func(*testing.T, change.Batch) (heal func()) {
					out.setBroken(true)
					return func() { out.setBroken(false) }
				},
			}
		},
	}
}

// A sink's author runs the conformance suite from a test in the sink's package, handing
// it a Harness. The suite needs that test's *testing.T (each case is a subtest on fresh
// state), so this example shows the call without running it; the test
// TestTheExampleHarnessPassesTheSuite runs it. No server is needed for this sink; the
// PostgreSQL and Kafka sinks' harnesses start theirs through internal/testenv.
func Example_runTheSuite() {
	// In the sink's package, e.g. conformance_test.go:
	TestConformance := func(t *testing.T) {
		sinktest.Run(t, harness())
	}
	_ = TestConformance
}
