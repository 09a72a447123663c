package change

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Version is a position in one resource's change log: an RV within an epoch (see
// Change.Epoch). Versions order by (Epoch, RV) and never by RV alone: a cluster restored
// from a backup issues its RVs again, in a new epoch. The zero Version is "none".
type Version struct {
	Epoch int
	RV    RV
}

// Compare returns -1, 0 or +1 as v is before, at or after w.
func (v Version) Compare(w Version) int {
	if c := cmp.Compare(v.Epoch, w.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(v.RV, w.RV)
}

// CompareInEpoch compares v and w as two versions of one epoch: -1, 0 or +1 as v's RV is
// below, at or above w's, and true; 0 and false when their epochs differ. Versions of two
// epochs have no RV order worth reading: Compare puts the later epoch after, but within
// an epoch only the RVs tell whether a version is older, newer or the same.
func (v Version) CompareInEpoch(w Version) (int, bool) {
	if v.Epoch != w.Epoch {
		return 0, false
	}
	return cmp.Compare(v.RV, w.RV), true
}

// String is the RV, prefixed by "EPOCH/" outside epoch 0: "123", "2/45".
func (v Version) String() string {
	if v.Epoch == 0 {
		return v.RV.String()
	}
	return strconv.Itoa(v.Epoch) + "/" + v.RV.String()
}

// ParseVersion inverts Version.String.
func ParseVersion(s string) (Version, error) {
	e, r, ok := strings.Cut(s, "/")
	if !ok {
		rv, err := ParseRV(s)
		return Version{RV: rv}, err
	}
	epoch, err := strconv.Atoi(e)
	if err != nil || epoch < 0 {
		return Version{}, fmt.Errorf("version %q: the epoch is not a natural number", s)
	}
	rv, err := ParseRV(r)
	return Version{Epoch: epoch, RV: rv}, err
}

// Version is the change's position: (Epoch, RV).
func (c *Change) Version() Version { return Version{Epoch: c.Epoch, RV: c.RV} }

// Version is the held version's position: (Epoch, RV).
func (e Entry) Version() Version { return Version{Epoch: e.Epoch, RV: e.RV} }

// Version is the batch's checkpoint position: (Epoch, Checkpoint).
func (b *Batch) Version() Version { return Version{Epoch: b.Epoch, RV: b.Checkpoint} }

// ParseKey inverts Key.String: "namespace/name", or "name" for a cluster-scoped object
// (names and namespaces contain no "/").
func ParseKey(s string) Key {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return Key{Namespace: ns, Name: name}
	}
	return Key{Name: s}
}
