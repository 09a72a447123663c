package audit

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// batchReader produces an EventList of n kept events, each with a request and a response
// object of objBytes, as it is read: the body never exists whole, so the heap seen while
// it is decoded is the decoder's. Every sampleEvery bytes it samples the live heap.
type batchReader struct {
	n, objBytes, next int
	pending           string
	done              bool
	read              atomic.Int64 // the client's transport reads in a goroutine of its own
	sampled           int64
	sampleEvery       int64
	maxHeap           uint64
}

func (b *batchReader) sent() int64 { return b.read.Load() }

func (b *batchReader) Read(p []byte) (int, error) {
	if b.pending == "" {
		switch {
		case b.done:
			return 0, io.EOF
		case b.next == 0 && b.n > 0:
			b.pending = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`
		case b.next == b.n:
			b.pending, b.done = `]}`, true
		}
		if b.next < b.n {
			if b.next > 0 {
				b.pending += ","
			}
			obj := func(rv int) string {
				return fmt.Sprintf(`{"kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"big","uid":"u-%d","resourceVersion":"%d"},"data":{"k":"%s"}}`,
					b.next, b.next, rv, strings.Repeat("v", b.objBytes))
			}
			b.pending += `{"kind":"Event","level":"RequestResponse","auditID":"id-` + fmt.Sprint(b.next) + `","stage":"ResponseComplete","verb":"update",` +
				`"requestURI":"/api/v1/namespaces/big/configmaps/cm","user":{"username":"dev-a@example.com","groups":["system:authenticated"]},` +
				`"sourceIPs":["127.0.0.1"],"userAgent":"kubectl","objectRef":{"resource":"configmaps","namespace":"big","name":"cm-` + fmt.Sprint(b.next) + `"},` +
				`"responseStatus":{"metadata":{},"code":200},"requestObject":` + obj(b.next) + `,"responseObject":` + obj(b.next+1) +
				`,"requestReceivedTimestamp":"2026-11-27T05:00:00.000001Z","stageTimestamp":"2026-11-27T05:00:00.002000Z"}`
			b.next++
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	read := b.read.Add(int64(n))
	if read-b.sampled >= b.sampleEvery {
		b.sampled = read
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b.maxHeap = max(b.maxHeap, m.HeapAlloc)
	}
	return n, nil
}

// A batch of 400 events of 160 KiB each (64 MiB, ConfigMaps of 80 KiB at level
// RequestResponse) is decoded holding about one event at a time, and what is kept of the
// 400 events holds none of their objects.
func TestDecodingABatchHoldsOneEventNotTheBody(t *testing.T) {
	const n, objBytes = 400, 80 << 10
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	body := &batchReader{n: n, objBytes: objBytes, sampleEvery: 2 << 20}
	events, counts, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if counts.Kept != n || len(events) != n || events[n-1].ResponseRV != n || events[n-1].Name != fmt.Sprintf("cm-%d", n-1) {
		t.Fatalf("kept %d (%+v), the last %+v", len(events), counts, events[len(events)-1])
	}
	const limit = 8 << 20
	peak := int64(body.maxHeap) - int64(before.HeapAlloc)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("a body of %d MiB: live heap %.1f MiB above the start at most while decoding, %.1f MiB held by the %d events kept",
		body.read.Load()>>20, float64(peak)/(1<<20), float64(kept)/(1<<20), len(events))
	if peak > limit {
		t.Errorf("decoding a %d MiB body held up to %d MiB of heap, want at most %d MiB", body.read.Load()>>20, peak>>20, limit>>20)
	}
	if kept > 1<<20 {
		t.Errorf("the %d events kept hold %d KiB of heap, want at most 1 MiB: they keep their items' bytes", len(events), kept>>10)
	}
	runtime.KeepAlive(events)
}
