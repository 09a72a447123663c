package moment

import (
	"strings"
	"testing"
	"time"
)

func TestParseReadsNowRFC3339AndDurationsBackFromNow(t *testing.T) {
	now := time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{" now ", now},
		{"2026-05-01T12:00:00Z", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)},
		{"2026-05-01T14:00:00.5+02:00", time.Date(2026, 5, 1, 12, 0, 0, 5e8, time.UTC)},
		{"15m", now.Add(-15 * time.Minute)},
		{"2h", now.Add(-2 * time.Hour)},
		{"-90s", now.Add(-90 * time.Second)},
		{"1h30m ago", now.Add(-90 * time.Minute)},
	} {
		got, err := Parse(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseRefusesWhatItCannotReadSayingWhatItWants(t *testing.T) {
	now := time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC)
	for _, in := range []string{"", "yesterday", "2d", "--15m", "15m from now", "2026-05-01 12:00"} {
		_, err := Parse(in, now)
		if err == nil || !strings.Contains(err.Error(), "want an RFC 3339 time") || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("Parse(%q): error %v, want one quoting the input and saying what is read", in, err)
		}
	}
}
