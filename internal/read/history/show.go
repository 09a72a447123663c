package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// Entry is one version as history prints it; its JSON is one element of -o json.
type Entry struct {
	ID              int64     `json:"id"`
	ObservedAt      time.Time `json:"observedAt"`
	Op              change.Op `json:"op"`
	ResourceVersion string    `json:"resourceVersion"`
	UID             string    `json:"uid"`
	ChangedBy       string    `json:"changedBy"`
	Inferred        bool      `json:"inferred"`
	Reason          string    `json:"reason"`
	Snapshot        bool      `json:"snapshot"`
	// Patch turns the previous version's object into this one's; for a version with
	// nothing to compare with (see store.Revision.Previous) it replaces the whole
	// document, so the patches applied in order from {} rebuild every version. Null for an
	// inferred delete, which carries no object (and changes nothing).
	Patch []PatchOp `json:"patch"`
	// Actor is who made the change, from the apiserver's audit events; absent when unknown.
	Actor *change.Actor `json:"actor,omitempty"`

	lines []DiffLine // the text form's body
}

// client is a user agent's first word: "kubectl/v1.36.5" of
// "kubectl/v1.36.5 (linux/amd64) kubernetes/0123abc".
func client(userAgent string) string {
	if c, _, ok := strings.Cut(userAgent, " "); ok {
		return c
	}
	return userAgent
}

// Header is the line history prints above a version's diff; characters that are
// invisible or reorder text (a user agent can hold any) are shown as markers (Visible).
func (v Entry) Header() string {
	h := fmt.Sprintf("#%d  %s  %s  rv %s", v.ID, FormatTime(v.ObservedAt), v.Op, v.ResourceVersion)
	switch {
	case v.Inferred:
		h += "  inferred (" + v.Reason + ")"
	case v.Op == change.OpDelete:
		h += "  observed"
	}
	switch a := v.Actor; {
	case a != nil:
		var about []string
		if c := client(a.UserAgent); c != "" {
			about = append(about, c)
		}
		if a.Impersonator != "" {
			about = append(about, "impersonated by "+a.Impersonator)
		}
		h += "  by " + a.Username
		if len(about) > 0 {
			h += " (" + strings.Join(about, ", ") + ")"
		}
		if a.Match != change.MatchExact {
			h += "  " + a.Match + " ±" + a.Distance.Round(time.Millisecond).String()
		}
		if v.ChangedBy != "" {
			h += "  manager " + v.ChangedBy
		}
	case v.ChangedBy != "":
		h += "  by " + v.ChangedBy
	}
	if v.Snapshot {
		h += "  snapshot" // read by a relist: versions between it and the one before were not seen
	}
	return Visible(h)
}

// Diff is the text history prints under the header: a unified diff of the YAML against
// the version before, or a note when there is none to show. Characters that are
// invisible or reorder text are shown as markers (Visible), so every line reads as stored.
func (v Entry) Diff() string { return text(v.lines) }

// Lines is Diff line by line, each classed for highlighting (the web UI's object page).
func (v Entry) Lines() []DiffLine { return v.lines }

// FormatTime is UTC with microseconds (PostgreSQL's precision), so a time printed by
// history is exact as --since.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// Show turns versions, in the order they were written, into what history prints.
func Show(versions []store.Revision) ([]Entry, error) {
	out := make([]Entry, 0, len(versions))
	var last document
	for _, v := range versions {
		sv := Entry{ID: v.ID, ObservedAt: v.ObservedAt.UTC(), Op: v.Op, ResourceVersion: v.RV.String(), UID: v.UID,
			ChangedBy: v.ChangedBy, Inferred: v.Inferred, Reason: v.Reason, Snapshot: v.Snapshot}
		sv.Actor = v.Actor
		if v.Object == nil {
			sv.lines = note(fmt.Sprintf("(no object: kube-cdc inferred this delete, reason %s; the last state it saw is the version before)", v.Reason))
			out = append(out, sv)
			continue
		}
		to, err := decoded(v.Object)
		if err != nil {
			return nil, fmt.Errorf("version %d: %w", v.ID, err)
		}
		from := document{} // nothing to compare with: shown whole
		switch {
		case v.Previous == nil:
		case bytes.Equal(v.Previous, last.raw):
			from = last // the version before, decoded already: most versions
		default:
			if from, err = decoded(v.Previous); err != nil {
				return nil, fmt.Errorf("the version before %d: %w", v.ID, err)
			}
		}
		last = to
		sv.Patch = JSONPatch(from.value, to.value)
		sv.lines = unified(from.yaml, to.yaml)
		if len(sv.lines) == 0 {
			sv.lines = note("(the object did not change besides its resourceVersion)")
		}
		out = append(out, sv)
	}
	return out, nil
}

// Print writes entries under title: in text, a header and a diff each; in json (output
// "json"), a JSON array of the entries.
func Print(w io.Writer, title string, entries []Entry, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	fmt.Fprintln(w, title)
	for _, v := range entries {
		fmt.Fprintln(w)
		fmt.Fprintln(w, v.Header())
		fmt.Fprint(w, v.Diff())
	}
	return nil
}

// note is a diff of one line that says why there is no diff to show.
func note(text string) []DiffLine { return []DiffLine{{Text: Visible(text)}} }

// document is a version's object decoded, and its YAML as the diff compares it.
type document struct {
	raw   []byte
	value any      // nil: no object
	yaml  []string // diffYAML's lines
}

func decoded(raw []byte) (document, error) {
	v, err := Decode(raw)
	if err != nil {
		return document{}, err
	}
	y, err := diffYAML(v)
	return document{raw: raw, value: v, yaml: y}, err
}
