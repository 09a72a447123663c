package keyindex

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// randomUID is a canonical UUID most of the time, and now and then what a sink might hold
// that is not one (a hand-edited row, an old export): they must come back unchanged.
func randomUID(r *rand.Rand) string {
	switch r.IntN(20) {
	case 0:
		return ""
	case 1:
		return "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9" // upper case: not canonical
	case 2:
		return fmt.Sprintf("not-a-uuid-%d", r.IntN(1000))
	case 3:
		return "{0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9}"
	case 4:
		return "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8fg" // one digit is not hex
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func TestTheIndexAnswersAsAMapWithDeletesWouldWhateverTheKeysAndUids(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		want := map[change.Key]change.Entry{}
		var x Index
		namespaces := []string{"", "default", "kube-system", "team-a", "a", "ab", "b"}
		n := 1 + r.IntN(3000)
		var keys []change.Key
		for range n {
			k := change.Key{Namespace: namespaces[r.IntN(len(namespaces))], Name: fmt.Sprintf("obj-%d", r.IntN(n))}
			if r.IntN(50) == 0 {
				k.Name = "" // the index must not confuse an empty name with a missing one
			}
			e := change.Entry{UID: randomUID(r), RV: change.RV(r.Uint64()), Epoch: r.IntN(4), Drifted: r.IntN(10) == 0}
			x.Add(k, e) // a key added twice keeps the later entry, as a map does
			want[k] = e
			keys = append(keys, k)
		}
		x.Seal()
		if x.Len() != len(want) {
			t.Fatalf("seed %d: Len %d after sealing, want %d", seed, x.Len(), len(want))
		}
		// Take about half of the keys (some twice, some never added), in random order.
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for _, k := range keys[:len(keys)/2] {
			e, ok := x.Take(k)
			w, wok := want[k]
			if ok != wok || e != w {
				t.Fatalf("seed %d: Take(%v) = %+v, %v; want %+v, %v", seed, k, e, ok, w, wok)
			}
			delete(want, k)
		}
		for _, k := range []change.Key{{Namespace: "nowhere", Name: "obj-1"}, {Namespace: "default", Name: "obj-missing"}} {
			if e, ok := x.Take(k); ok {
				t.Fatalf("seed %d: Take(%v) of a key never added = %+v", seed, k, e)
			}
		}
		if x.Len() != len(want) {
			t.Fatalf("seed %d: Len %d after the takes, want %d", seed, x.Len(), len(want))
		}
		if got := x.Left(); !maps.Equal(got, want) {
			t.Fatalf("seed %d: Left has %d entries, want %d; first difference: %s", seed, len(got), len(want), firstDifference(got, want))
		}
	}
}

func firstDifference(got, want map[change.Key]change.Entry) string {
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			return fmt.Sprintf("%v: got %+v (present %v), want %+v", k, g, ok, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("%v: got %+v, want absent", k, g)
		}
	}
	return "none"
}

func TestALaterAddOfAKeyReplacesTheEarlierOneEvenAcrossNamespacesOfTheSameName(t *testing.T) {
	var x Index
	a := change.Entry{UID: "11111111-1111-1111-1111-111111111111", RV: 5}
	b := change.Entry{UID: "22222222-2222-2222-2222-222222222222", RV: 9, Drifted: true}
	x.Add(change.Key{Namespace: "ns", Name: "n"}, a)
	x.Add(change.Key{Namespace: "other", Name: "n"}, a)
	x.Add(change.Key{Namespace: "ns", Name: "n"}, b)
	if got, ok := x.Take(change.Key{Namespace: "ns", Name: "n"}); !ok || got != b {
		t.Fatalf("Take = %+v, %v; want the later entry %+v", got, ok, b)
	}
	if got, ok := x.Take(change.Key{Namespace: "ns", Name: "n"}); ok {
		t.Fatalf("a second Take of the key = %+v; want absent", got)
	}
	if got := x.Left(); len(got) != 1 || got[change.Key{Namespace: "other", Name: "n"}] != a {
		t.Fatalf("Left = %v; want only other/n", got)
	}
}

func TestAddAfterSealPanics(t *testing.T) {
	var x Index
	x.Seal()
	defer func() {
		if recover() == nil {
			t.Fatal("Add after Seal did not panic")
		}
	}()
	x.Add(change.Key{Name: "n"}, change.Entry{})
}

// podKeys are n keys shaped like a cluster's pods: 20 namespaces, names of a
// Deployment's ReplicaSet plus a random suffix, canonical uids (as the apiserver makes
// them), RVs in the millions.
func podKeys(n int) ([]change.Key, []change.Entry) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]change.Key, n)
	entries := make([]change.Entry, n)
	for i := range n {
		// Each string its own allocation, as rows read from a sink are.
		keys[i] = change.Key{Namespace: fmt.Sprintf("team-%02d", i%20), Name: fmt.Sprintf("web-%04d-7c5d9f8b6d-%05x", i/100, r.IntN(1<<20))}
		var u [16]byte
		for j := range u {
			u[j] = byte(r.UintN(256))
		}
		entries[i] = change.Entry{UID: change.UnpackUID(&u), RV: change.RV(1_000_000 + i), Epoch: 0}
	}
	return keys, entries
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// BenchmarkHeapPerEntry: the live heap of the index per entry, against the map of
// (namespace, name) → change.Entry that the pipeline held before, on the same keys; and
// the bytes each allocated while loading (growth copies, beyond the keys' own strings).
func BenchmarkHeapPerEntry(b *testing.B) {
	for _, n := range []int{10, 10_000, 150_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			keys, entries := podKeys(n)
			var mapB, idxB, mapAlloc, idxAlloc float64
			for range b.N {
				base := liveHeap()
				a0 := allocated()
				m := map[change.Key]change.Entry{}
				for i, k := range keys { // copies, as each row scanned is a new string
					m[change.Key{Namespace: string([]byte(k.Namespace)), Name: string([]byte(k.Name))}] = change.Entry{UID: string([]byte(entries[i].UID)), RV: entries[i].RV}
				}
				mapAlloc = float64(allocated()-a0) / float64(n)
				mapB = float64(liveHeap()-base) / float64(n)
				runtime.KeepAlive(m)
				m = nil

				base = liveHeap()
				a0 = allocated()
				var x Index
				for i, k := range keys {
					x.Add(change.Key{Namespace: string([]byte(k.Namespace)), Name: string([]byte(k.Name))}, change.Entry{UID: string([]byte(entries[i].UID)), RV: entries[i].RV})
				}
				x.Seal()
				idxAlloc = float64(allocated()-a0) / float64(n)
				idxB = float64(liveHeap()-base) / float64(n)
				runtime.KeepAlive(&x)
			}
			b.ReportMetric(mapB, "map_B/entry")
			b.ReportMetric(idxB, "index_B/entry")
			b.ReportMetric(idxB/mapB, "index/map")
			b.ReportMetric(mapAlloc, "map_alloc_B/entry")
			b.ReportMetric(idxAlloc, "index_alloc_B/entry")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func TestNamesAcrossChunksAndLongerThanAChunkComeBackWhole(t *testing.T) {
	var x Index
	want := map[change.Key]change.Entry{}
	for i := range 2000 {
		// 200-byte names fill several name chunks; now and then one longer than a chunk.
		name := fmt.Sprintf("%0200d", i)
		if i%500 == 7 {
			name = fmt.Sprintf("%0*d", namesPerChunk+100, i)
		}
		k := change.Key{Namespace: fmt.Sprintf("ns-%d", i%3), Name: name}
		e := change.Entry{UID: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", RV: change.RV(i + 1)}
		x.Add(k, e)
		want[k] = e
	}
	x.Seal()
	if len(x.names) < 4 {
		t.Fatalf("the names took %d chunks; the test means to cross chunk boundaries", len(x.names))
	}
	taken := 0
	for k, w := range want {
		if taken%2 == 0 {
			if e, ok := x.Take(k); !ok || e != w {
				t.Fatalf("Take(%.20s…) = %+v, %v; want %+v", k.Name, e, ok, w)
			}
			delete(want, k)
		}
		taken++
	}
	if got := x.Left(); !maps.Equal(got, want) {
		t.Fatalf("Left has %d entries, want %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}
