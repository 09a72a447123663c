package why

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// row is a store.WhyRow as -o json prints it.
type row struct {
	ObservedAt time.Time `json:"observedAt"`
	Relation   string    `json:"relation"`
	Depth      int       `json:"depth,omitempty"`
	Cluster    string    `json:"cluster"`
	Group      string    `json:"group"`
	Resource   string    `json:"resource"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	ChangeID   int64     `json:"changeID"`
	Op         string    `json:"op"`
	RV         string    `json:"resourceVersion"`
	UID        string    `json:"uid"`
	Changed    []string  `json:"changed,omitempty"`
	ChangedBy  string    `json:"changedBy,omitempty"`
	Actor      any       `json:"actor,omitempty"`
}

// Print writes title and rows to w as text (a line per change) or json.
func Print(w io.Writer, title string, rows []store.WhyRow, output string) error {
	if output == "json" {
		out := make([]row, len(rows))
		for i, r := range rows {
			out[i] = row{ObservedAt: r.ObservedAt.UTC(), Relation: r.Relation, Depth: r.Depth, Cluster: r.Cluster,
				Group: r.Resource.Group, Resource: r.Resource.Resource, Namespace: r.Key.Namespace, Name: r.Key.Name,
				ChangeID: r.ChangeID, Op: string(r.Op), RV: r.RV.String(), UID: r.UID, Changed: r.Changed, ChangedBy: r.ChangedBy}
			if r.Actor != nil {
				out[i].Actor = r.Actor
			}
		}
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(out)
	}
	fmt.Fprintln(w, title)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "(nothing it depends on changed in the window)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVED (UTC)\tRELATION\tOBJECT\tOP\tRV\tBY\tCHANGED")
	for _, r := range rows {
		rel := r.Relation
		if r.Depth > 0 && r.Relation == "controller" {
			rel = fmt.Sprintf("controller (%d up)", r.Depth)
		}
		res := r.Resource.Resource
		if r.Resource.Group != "" {
			res += "." + r.Resource.Group
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", r.ObservedAt.UTC().Format("2006-01-02 15:04:05.000"), rel,
			res, history.Visible(r.Key.String()), r.Op, r.RV, by(r), history.Visible(strings.Join(r.Changed, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "A change's diff: kube-cdc history RESOURCE NAME -n NAMESPACE --since TIME.")
	return err
}

// by is who made the change: the audit user (impersonator, client, how joined) where
// kube-cdc has it, and the field manager.
func by(r store.WhyRow) string {
	var b strings.Builder
	if a := r.Actor; a != nil {
		b.WriteString(a.Username)
		var notes []string
		if a.Impersonator != "" {
			notes = append(notes, "impersonated by "+a.Impersonator)
		}
		if ua := strings.Fields(a.UserAgent); len(ua) > 0 {
			notes = append(notes, ua[0])
		}
		if a.Match != "" && a.Match != "exact" {
			notes = append(notes, a.Match)
		}
		if len(notes) > 0 {
			b.WriteString(" (" + strings.Join(notes, ", ") + ")")
		}
	}
	if r.ChangedBy != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("manager " + r.ChangedBy)
	}
	if b.Len() == 0 {
		return "-"
	}
	return history.Visible(b.String())
}
