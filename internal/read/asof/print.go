package asof

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kube-cdc/kube-cdc/internal/read/columns"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// Outputs are the values of -o.
var Outputs = []string{"table", "yaml", "json"}

// Print writes objs, as the sink had observed them at at, in output ("table", "yaml" or
// "json"). The table has a NAMESPACE column when namespaces is true (every namespace was
// read and some object is namespaced) and the first column says NAME otherwise; AGE is the object's age at that moment
// (at minus its metadata.creationTimestamp), as kubectl get would have printed it then.
// yaml and json are a kubectl List of the objects, in the table's order.
func Print(w io.Writer, objs []store.AsOfObject, at time.Time, output string, namespaces bool) error {
	return printAs(w, nil, objs, at, output, namespaces)
}

// PrintKind is Print with the table in kubectl get's columns for the resource's kind
// (internal/read/columns: pods READY, STATUS, RESTARTS, AGE, NODE, IMAGE; …; AGE and
// LABELS for a kind without its own), AGE at that moment and moved second, after NAME,
// where this table has always had it; then RESOURCEVERSION.
func PrintKind(w io.Writer, group, resource string, objs []store.AsOfObject, at time.Time, output string, namespaces bool) error {
	return printAs(w, &kindOf{group, resource}, objs, at, output, namespaces)
}

type kindOf struct{ group, resource string }

// age is the index of AGE among the kind's columns.
func (k kindOf) age() int { return slices.Index(columns.For(k.group, k.resource), "AGE") }

// ageFirst moves the AGE column (at index age) first. The command's table has always
// read NAME, AGE, …: scripts that read its first columns keep working, and the kind's
// other columns follow in kubectl's order.
func ageFirst(cols []string, age int) []string {
	if age <= 0 {
		return cols
	}
	out := append([]string{cols[age]}, cols[:age]...)
	return append(out, cols[age+1:]...)
}

func printAs(w io.Writer, kind *kindOf, objs []store.AsOfObject, at time.Time, output string, namespaces bool) error {
	switch output {
	case "table":
		return printTable(w, kind, objs, at, namespaces)
	case "json", "yaml":
		items := make([]json.RawMessage, len(objs))
		for i, o := range objs {
			items[i] = o.Object
		}
		list := struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   map[string]string `json:"metadata"`
			Items      []json.RawMessage `json:"items"`
		}{"v1", "List", map[string]string{"resourceVersion": ""}, items}
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return fmt.Errorf("encode the list: %w", err)
		}
		if output == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return fmt.Errorf("encode the list as YAML: %w", err)
			}
		} else {
			b = append(b, '\n')
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("-o %q: want table, yaml or json", output)
}

func printTable(w io.Writer, kind *kindOf, objs []store.AsOfObject, at time.Time, namespaces bool) error {
	if len(objs) == 0 {
		_, err := fmt.Fprintf(w, "No resources found as of %s.\n", at.UTC().Format(time.RFC3339Nano))
		return err
	}
	namespaced := false
	for _, o := range objs {
		namespaced = namespaced || o.Namespace != ""
	}
	namespaces = namespaces && namespaced
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	if namespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	if kind == nil {
		fmt.Fprintln(tw, "NAME\tAGE\tRESOURCEVERSION")
	} else {
		fmt.Fprintf(tw, "NAME\t%s\tRESOURCEVERSION\n", strings.Join(ageFirst(columns.For(kind.group, kind.resource), kind.age()), "\t"))
	}
	for _, o := range objs {
		if namespaces {
			fmt.Fprintf(tw, "%s\t", o.Namespace)
		}
		if kind == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Name, age(o.Object, at), o.RV)
			continue
		}
		row, err := columns.Of(kind.group, kind.resource, o.Object, at)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", o.Namespace, o.Name, err)
		}
		cells := make([]string, len(row.Cells))
		for i, c := range row.Cells {
			// A tab or newline in a value would break the table's alignment.
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c.Text)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Name, strings.Join(ageFirst(cells, kind.age()), "\t"), o.RV)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// age is kubectl's AGE of the object at the moment at; <unknown> without a
// creationTimestamp.
func age(object json.RawMessage, at time.Time) string {
	var meta struct {
		Metadata struct {
			CreationTimestamp time.Time `json:"creationTimestamp"`
		} `json:"metadata"`
	}
	if json.Unmarshal(object, &meta) != nil || meta.Metadata.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(at.Sub(meta.Metadata.CreationTimestamp))
}
