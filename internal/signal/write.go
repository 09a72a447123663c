package signal

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Write prints the result's outcomes as a table, each scope as scope names it (by
// content, as status shows it), and who answered; nothing at all for a failed request
// without outcomes, whose error says everything there is.
func (res Result) Write(w io.Writer, scope func(id string) string) {
	answered := fmt.Sprintf("answered by %s in %s\n", res.By, res.Finished.Sub(res.Started).Round(time.Millisecond))
	switch {
	case len(res.Outcomes) > 0:
	case res.State == StateFailed:
		return
	default:
		io.WriteString(w, answered)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tRESOURCE\tSCOPE\tLISTED\tWRITTEN\tDELETED\tDRIFT")
	out := slices.Clone(res.Outcomes)
	slices.SortFunc(out, func(a, b Outcome) int {
		return strings.Compare(a.Sink+"\x00"+a.Resource+"\x00"+scope(a.Scope), b.Sink+"\x00"+b.Resource+"\x00"+scope(b.Scope))
	})
	for _, o := range out {
		if o.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\tskipped: %s\n", o.Sink, o.Resource, scope(o.Scope), o.Skipped)
			continue
		}
		var drift []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range o.Drift {
				if !yield(k) {
					return
				}
			}
		}) {
			drift = append(drift, fmt.Sprintf("%s=%d", k, o.Drift[k]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", o.Sink, o.Resource, scope(o.Scope), o.Listed, o.Written, o.Deleted, dash(strings.Join(drift, ",")))
	}
	tw.Flush()
	io.WriteString(w, answered)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Report prints the result as `kube-cdc resnapshot -o output` does (json: the result
// itself, indented; otherwise Write's table) and returns an error naming the replica and
// its error when the request failed.
func (res Result) Report(w io.Writer, output string, scope func(id string) string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		res.Write(w, scope)
	}
	if res.State == StateFailed {
		return fmt.Errorf("resnapshot failed (answered by %s): %s", res.By, res.Error)
	}
	return nil
}
