package asof

import (
	"fmt"
	"strings"
	"time"
)

// ParseTime reads the moment of `kube-cdc as-of`: "now"; an RFC 3339 time
// (2026-05-01T14:03:00Z, 2026-05-01T16:03:00+02:00, fractions of a second allowed); or a
// duration back from now in Go's syntax, as history's --since reads it ("15m", "1h30m"),
// or written "15m ago" or "-15m" (a leading "-" reads as a flag on the command line unless
// "--" comes first). Days and calendar words are not read: say "48h".
func ParseTime(s string, now time.Time) (time.Time, error) {
	in := strings.TrimSpace(s)
	if in == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, in); err == nil {
		return t, nil
	}
	back := strings.TrimPrefix(in, "-")
	back = strings.TrimSpace(strings.TrimSuffix(back, " ago"))
	if d, err := time.ParseDuration(back); err == nil && d >= 0 && !strings.HasPrefix(back, "-") {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("TIME %q: want an RFC 3339 time (2026-05-01T14:03:00Z), now, or a duration back from now (15m, \"2h ago\", -90s)", s)
}
