package keyindex

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Index is a sealed-once, take-once key index. The zero value is empty and ready for Add.
type Index struct {
	nsID       map[string]uint32 // namespace → its number
	namespaces []string          // by number; each string held once
	nsRange    [][2]uint32       // by number: the namespace's entries [from, to) once sealed
	names      []byte            // every name, back to back
	entries    []entry           // sorted by (namespace, name) once sealed
	rawUIDs    map[uint32]string // by entry position: uids that are not canonical UUIDs
	live       int               // entries not taken
	sealed     bool
}

// entry is one held object. It holds no pointer: 48 bytes that the GC does not scan.
type entry struct {
	rv      uint64
	nameOff uint32
	nameLen uint32
	ns      uint32
	epoch   int32
	uid     [16]byte
	flags   uint8
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
	en := entry{rv: uint64(e.RV), nameOff: uint32(len(x.names)), nameLen: uint32(len(k.Name)), ns: ns, epoch: int32(e.Epoch)}
	x.names = append(x.names, k.Name...)
	if e.Drifted {
		en.flags |= drifted
	}
	if en.uid, ok = change.PackUID(e.UID); !ok {
		en.flags |= rawUID
		if x.rawUIDs == nil {
			x.rawUIDs = map[uint32]string{}
		}
		// Keyed by the position in adding order; Seal renumbers.
		x.rawUIDs[uint32(len(x.entries))] = strings.Clone(e.UID)
	}
	x.entries = append(x.entries, en)
}

// Seal sorts the index for Take; Add is refused after it. The entries and names are
// copied to their exact sizes, so no growth slack outlives the loading.
func (x *Index) Seal() {
	if x.sealed {
		return
	}
	x.sealed = true
	order := make([]uint32, len(x.entries))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortStableFunc(order, func(a, b uint32) int {
		ea, eb := &x.entries[a], &x.entries[b]
		if c := cmp.Compare(x.namespaces[ea.ns], x.namespaces[eb.ns]); c != 0 {
			return c
		}
		return bytes.Compare(x.nameBytes(ea), x.nameBytes(eb))
	})
	sorted := make([]entry, len(order))
	names := make([]byte, 0, len(x.names))
	var raw map[uint32]string
	for i, o := range order {
		e := x.entries[o]
		name := x.names[e.nameOff : e.nameOff+e.nameLen]
		e.nameOff = uint32(len(names))
		names = append(names, name...)
		if e.flags&rawUID != 0 {
			if raw == nil {
				raw = make(map[uint32]string, len(x.rawUIDs))
			}
			raw[uint32(i)] = x.rawUIDs[o]
		}
		sorted[i] = e
	}
	// A key added twice: the later one (last of its run, the sort being stable) wins.
	x.live = len(sorted)
	for i := 1; i < len(sorted); i++ {
		a, b := &sorted[i-1], &sorted[i]
		if a.ns == b.ns && bytes.Equal(names[a.nameOff:a.nameOff+a.nameLen], names[b.nameOff:b.nameOff+b.nameLen]) {
			a.flags |= taken
			x.live--
		}
	}
	x.entries, x.names, x.rawUIDs = sorted, names, raw
	x.nsRange = make([][2]uint32, len(x.namespaces))
	for i := 0; i < len(sorted); {
		ns := sorted[i].ns
		j := i
		for j < len(sorted) && sorted[j].ns == ns {
			j++
		}
		x.nsRange[ns] = [2]uint32{uint32(i), uint32(j)}
		i = j
	}
}

func (x *Index) nameBytes(e *entry) []byte { return x.names[e.nameOff : e.nameOff+e.nameLen] }

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

// Len is the number of entries not taken yet.
func (x *Index) Len() int {
	x.Seal()
	return x.live
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
	part := x.entries[r[0]:r[1]]
	i, found := slices.BinarySearchFunc(part, k.Name, func(e entry, name string) int {
		return compareName(x.nameBytes(&e), name)
	})
	if !found {
		return change.Entry{}, false
	}
	// Duplicates are marked taken and sort before the entry that won: look at the last.
	for i+1 < len(part) && string(x.nameBytes(&part[i+1])) == k.Name {
		i++
	}
	en := &part[i]
	if en.flags&taken != 0 {
		return change.Entry{}, false
	}
	en.flags |= taken
	x.live--
	return x.entryAt(r[0]+uint32(i), en), true
}

func (x *Index) entryAt(pos uint32, en *entry) change.Entry {
	e := change.Entry{RV: change.RV(en.rv), Epoch: int(en.epoch), Drifted: en.flags&drifted != 0}
	if en.flags&rawUID != 0 {
		e.UID = x.rawUIDs[pos]
	} else {
		e.UID = change.UnpackUID(&en.uid)
	}
	return e
}

// Left returns every entry not taken: what the sink holds that no LIST showed.
func (x *Index) Left() map[change.Key]change.Entry {
	x.Seal()
	out := make(map[change.Key]change.Entry, x.live)
	for i := range x.entries {
		en := &x.entries[i]
		if en.flags&taken != 0 {
			continue
		}
		out[change.Key{Namespace: x.namespaces[en.ns], Name: string(x.nameBytes(en))}] = x.entryAt(uint32(i), en)
	}
	return out
}
