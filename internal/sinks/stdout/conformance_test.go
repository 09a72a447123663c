package stdout

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
)

// output is the stdout the sink writes to, surviving restarts like a redirected file. While
// broken, a Write prints the lines before the middle one and then fails, as a pipe that
// breaks part-way would.
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
	return n, errors.New("write /dev/stdout: broken pipe")
}

var opOf = map[string]change.Op{"r": change.OpCreate, "c": change.OpCreate, "u": change.OpUpdate, "d": change.OpDelete}

func (o *output) records(t *testing.T, res change.Resource) []sinktest.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []sinktest.Record
	for i, l := range bytes.Split(bytes.TrimSuffix(o.buf.Bytes(), []byte("\n")), []byte("\n")) {
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
			t.Fatalf("line %d is not an envelope: %v: %s", i, err, l)
		}
		rv, err := change.ParseRV(e.Source.RV)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if e.Source.Resource != res.Resource {
			continue
		}
		out = append(out, sinktest.Record{Key: change.Key{Namespace: e.Source.Namespace, Name: e.Source.Name}, RV: rv, Op: opOf[e.Op]})
	}
	return out
}

func TestConformanceWithAFileStore(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Cluster: "prod",
		New: func(t *testing.T) sinktest.Target {
			out := &output{}
			path := filepath.Join(t.TempDir(), "state.db")
			return sinktest.Target{
				Open: func(t *testing.T) sinktest.Sink {
					store, err := checkpoint.OpenFile(path)
					if err != nil {
						t.Fatal(err)
					}
					return New("out", out, store, Options{})
				},
				Records: out.records,
				Break: func(t *testing.T, _ change.Batch) func() {
					out.mu.Lock()
					out.broken = true
					out.mu.Unlock()
					return func() {
						out.mu.Lock()
						out.broken = false
						out.mu.Unlock()
					}
				},
			}
		},
	})
}
