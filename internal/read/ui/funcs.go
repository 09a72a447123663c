package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	_ "time/tzdata" // tz=Europe/Berlin works in the scratch image, which has no zoneinfo

	"github.com/kube-cdc/kube-cdc/internal/read/history"
)

// funcs are the templates' helpers. None returns template.HTML: every value is escaped.
var funcs = template.FuncMap{
	"when":  when,
	"resid": resourceID,
	"lower": strings.ToLower,
	"sub":   func(a, b float64) float64 { return max(a-b, 0) },
	// visible shows a character that is invisible or reorders text as a marker, as
	// history does (a user or user agent can hold any).
	"visible": history.Visible,
	// client is a user agent's first word, its client: "kubectl/v1.36.5".
	"client": func(userAgent string) string {
		c, _, _ := strings.Cut(userAgent, " ")
		return history.Visible(c)
	},
}

// timeLayout is how every page shows a moment: 24-hour, to the millisecond, with the
// zone's name, so a time copied from a page says which zone it is in.
const timeLayout = "2006-01-02 15:04:05.000 MST"

// when shows t in loc (UTC when nil).
func when(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format(timeLayout)
}

// zone reads the tz parameter: "" (and "UTC", and "local", which timeline.js replaces with
// the browser's zone before it is followed) is UTC; anything else is an IANA zone name.
func zone(tz string) (*time.Location, error) {
	switch strings.TrimSpace(tz) {
	case "", "UTC", "utc", "local":
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.HasPrefix(tz, "/") {
		return nil, fmt.Errorf("tz %q: want UTC or an IANA time zone name (Europe/Berlin)", tz)
	}
	return loc, nil
}
