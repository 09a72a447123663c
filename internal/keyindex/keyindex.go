package keyindex

import (
	"bytes"
	"slices"
	"strings"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Storage is in fixed-size chunks, so that loading a large index never copies what it
// holds (a growing slice would, holding old and new at once) and Seal adds only a sorted
// permutation of 4 bytes per entry.
// The first chunk of each starts small and grows as a slice does, so that an index of a
// few objects (most resources of a cluster) does not hold whole chunks.
const (
	entriesPerChunk = 1024     // 48 KiB
	namesPerChunk   = 64 << 10 // bytes; a longer name gets a chunk of its own
	firstEntries    = 16
	firstNames      = 512
)

// Index is a sealed-once, take-once key index. The zero value is empty and ready for Add.
type Index struct {
	nsID       map[string]uint32 // namespace → its number
	namespaces []string          // by number; each string held once
	entries    [][]entry         // chunks of entriesPerChunk, in adding order
	n          int               // entries added
	names      [][]byte          // chunks of names, back to back
	rawUIDs    []string          // uids that are not canonical UUIDs (entry.uid holds the index)
	order      []uint32          // once sealed: entry numbers sorted by (namespace, name)
	nsRange    [][2]uint32       // once sealed, by namespace number: its part of order
	live       int               // entries not taken
	sealed     bool
}

// entry is one held object. It holds no pointer: 48 bytes that the GC does not scan.
type entry struct {
	rv        uint64
	uid       [16]byte // packed (change.PackUID); with rawUID, the first 4 bytes index rawUIDs
	nameChunk uint32
	namePos   uint32
	nameLen   uint32
	ns        uint32
	epoch     int32
	flags     uint8
}

const (
	taken   uint8 = 1 << iota // Take returned it, or a later Add of its key replaced it
	drifted                   // change.Entry.Drifted
	rawUID                    // the uid is in rawUIDs (not a canonical lowercase UUID)
)

// Add records what the sink holds under k. Adding a key twice keeps the later entry.
// Add panics after Seal.
func (x *Index) Add(k change.Key, e change.Entry) {
	if x.sealed {
		panic("keyindex: Add after Seal")
	}
	if x.nsID == nil {
		x.nsID = map[string]uint32{}
	}
	ns, ok := x.nsID[k.Namespace]
	if !ok {
		ns = uint32(len(x.namespaces))
		held := strings.Clone(k.Namespace) // not the caller's (a row buffer's) string
		x.nsID[held] = ns
		x.namespaces = append(x.namespaces, held)
	}
	en := entry{rv: uint64(e.RV), ns: ns, epoch: int32(e.Epoch)}
	en.nameChunk, en.namePos, en.nameLen = x.addName(k.Name)
	if e.Drifted {
		en.flags |= drifted
	}
	if en.uid, ok = change.PackUID(e.UID); !ok {
		en.flags |= rawUID
		en.uid = [16]byte{}
		putIndex(&en.uid, uint32(len(x.rawUIDs)))
		x.rawUIDs = append(x.rawUIDs, strings.Clone(e.UID))
	}
	switch {
	case len(x.entries) == 0:
		x.entries = append(x.entries, make([]entry, 0, firstEntries))
	case len(x.entries[len(x.entries)-1]) == entriesPerChunk:
		x.entries = append(x.entries, make([]entry, 0, entriesPerChunk))
	}
	last := &x.entries[len(x.entries)-1]
	*last = append(*last, en) // grows only the first chunk
	x.n++
}

// addName copies name into the name chunks and says where it is.
func (x *Index) addName(name string) (chunk, pos, n uint32) {
	switch {
	case len(x.names) == 0:
		x.names = append(x.names, make([]byte, 0, max(firstNames, len(name))))
	case len(x.names[len(x.names)-1])+len(name) > namesPerChunk:
		x.names = append(x.names, make([]byte, 0, max(namesPerChunk, len(name))))
	}
	c := len(x.names) - 1
	pos = uint32(len(x.names[c]))
	x.names[c] = append(x.names[c], name...)
	return uint32(c), pos, uint32(len(name))
}

func putIndex(u *[16]byte, i uint32) {
	u[0], u[1], u[2], u[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
}

func getIndex(u *[16]byte) uint32 {
	return uint32(u[0]) | uint32(u[1])<<8 | uint32(u[2])<<16 | uint32(u[3])<<24
}

func (x *Index) at(i uint32) *entry { return &x.entries[i/entriesPerChunk][i%entriesPerChunk] }

func (x *Index) nameOf(e *entry) []byte { return x.names[e.nameChunk][e.namePos : e.namePos+e.nameLen] }

// Seal sorts the index for Take; Add is refused after it.
func (x *Index) Seal() {
	if x.sealed {
		return
	}
	x.sealed = true
	x.order = make([]uint32, x.n)
	for i := range x.order {
		x.order[i] = uint32(i)
	}
	// Stable, so that of a key added twice the later entry sorts last (and wins below).
	slices.SortStableFunc(x.order, func(a, b uint32) int {
		ea, eb := x.at(a), x.at(b)
		if ea.ns != eb.ns {
			return strings.Compare(x.namespaces[ea.ns], x.namespaces[eb.ns])
		}
		return bytes.Compare(x.nameOf(ea), x.nameOf(eb))
	})
	x.live = x.n
	for i := 1; i < len(x.order); i++ {
		a, b := x.at(x.order[i-1]), x.at(x.order[i])
		if a.ns == b.ns && bytes.Equal(x.nameOf(a), x.nameOf(b)) {
			a.flags |= taken
			x.live--
		}
	}
	x.nsRange = make([][2]uint32, len(x.namespaces))
	for i := 0; i < len(x.order); {
		ns := x.at(x.order[i]).ns
		j := i
		for j < len(x.order) && x.at(x.order[j]).ns == ns {
			j++
		}
		x.nsRange[ns] = [2]uint32{uint32(i), uint32(j)}
		i = j
	}
}

// Len is the number of entries not taken yet.
func (x *Index) Len() int {
	x.Seal()
	return x.live
}

// compareName is strings.Compare(string(b), s) without converting b (a comparison of a
// converted []byte does not allocate).
func compareName(b []byte, s string) int {
	switch {
	case string(b) == s:
		return 0
	case string(b) < s:
		return -1
	}
	return 1
}

// Take returns the entry held under k and marks it taken; ok is false when the index
// holds no entry under k, or it was taken before.
func (x *Index) Take(k change.Key) (e change.Entry, ok bool) {
	x.Seal()
	ns, ok := x.nsID[k.Namespace]
	if !ok {
		return change.Entry{}, false
	}
	r := x.nsRange[ns]
	part := x.order[r[0]:r[1]]
	i, found := slices.BinarySearchFunc(part, k.Name, func(o uint32, name string) int {
		return compareName(x.nameOf(x.at(o)), name)
	})
	if !found {
		return change.Entry{}, false
	}
	// Duplicates are marked taken and sort before the entry that won: look at the last.
	for i+1 < len(part) && string(x.nameOf(x.at(part[i+1]))) == k.Name {
		i++
	}
	en := x.at(part[i])
	if en.flags&taken != 0 {
		return change.Entry{}, false
	}
	en.flags |= taken
	x.live--
	return x.entryOf(en), true
}

func (x *Index) entryOf(en *entry) change.Entry {
	e := change.Entry{RV: change.RV(en.rv), Epoch: int(en.epoch), Drifted: en.flags&drifted != 0}
	if en.flags&rawUID != 0 {
		e.UID = x.rawUIDs[getIndex(&en.uid)]
	} else {
		e.UID = change.UnpackUID(&en.uid)
	}
	return e
}

// Left returns every entry not taken: what the sink holds that no LIST showed.
func (x *Index) Left() map[change.Key]change.Entry {
	x.Seal()
	out := make(map[change.Key]change.Entry, x.live)
	for _, chunk := range x.entries {
		for i := range chunk {
			en := &chunk[i]
			if en.flags&taken != 0 {
				continue
			}
			out[change.Key{Namespace: x.namespaces[en.ns], Name: string(x.nameOf(en))}] = x.entryOf(en)
		}
	}
	return out
}
