package change

import (
	"database/sql/driver"
	"fmt"
	"math"
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

// Scan implements sql.Scanner (like pgx's LSN), so sinks read a bigint column straight
// into an RV: NULL scans as zero.
func (r *RV) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*r = 0
	case int64:
		if v < 0 {
			return fmt.Errorf("resourceVersion %d is negative", v)
		}
		*r = RV(v)
	case string:
		rv, err := ParseRV(v)
		if err != nil {
			return err
		}
		*r = rv
	case []byte:
		rv, err := ParseRV(string(v))
		if err != nil {
			return err
		}
		*r = rv
	default:
		return fmt.Errorf("cannot scan %T into a resourceVersion", src)
	}
	return nil
}

// Value implements driver.Valuer: an RV is stored as a bigint. RVs above the largest
// bigint (which no etcd revision reaches) are an error rather than a wrapped negative.
func (r RV) Value() (driver.Value, error) {
	if r > math.MaxInt64 {
		return nil, fmt.Errorf("resourceVersion %d does not fit a bigint", uint64(r))
	}
	return int64(r), nil
}
