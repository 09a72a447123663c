package change

import (
	"fmt"
	"strconv"
)

// RV is a Kubernetes resourceVersion read as an unsigned integer. Kubernetes guarantees
// since 1.35 that resource versions compare as integers (etcd's revisions always did), so
// RVs order changes per key and checkpoints compare with <. Zero means "none".
type RV uint64

// ParseRV parses a resourceVersion string. The empty string parses as zero.
func ParseRV(s string) (RV, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not an unsigned integer: %w", s, err)
	}
	return RV(v), nil
}

// String formats the RV the way the apiserver accepts it back; zero formats as "".
func (r RV) String() string {
	if r == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(r), 10)
}
