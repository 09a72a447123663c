package asof

import (
	"fmt"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/moment"
)

// ParseTime reads the moment of `kube-cdc as-of` as moment.Parse does: "now"; an RFC 3339
// time (2026-05-01T14:03:00Z, 2026-05-01T16:03:00+02:00, fractions of a second allowed);
// or a duration back from now in Go's syntax, as history's --since reads it ("15m",
// "1h30m"), or written "15m ago" or "-15m" (a leading "-" reads as a flag on the command
// line unless "--" comes first). Days and calendar words are not read: say "48h". The
// web UI's as-of page reads its at the same way.
func ParseTime(s string, now time.Time) (time.Time, error) {
	t, err := moment.Parse(s, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("TIME %w", err)
	}
	return t, nil
}
