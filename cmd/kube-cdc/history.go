package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// historyOptions are the flags of `kube-cdc history`.
type historyOptions struct {
	namespace string // "" with the flag unset: the one namespace the name has changes in
	since     string // a duration back from now, or an RFC 3339 time; "": everything
	output    string // text | json
	sink      string // a PostgreSQL sink's name; "": the first PostgreSQL sink
}

func newHistoryCmd() *cobra.Command {
	var opts historyOptions
	cmd := configCommand("history RESOURCE NAME",
		"Show every recorded version of one object, who changed it and what changed, from a PostgreSQL sink",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			return runHistory(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1], cmd.Flags().Changed("namespace"), opts)
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = `Show every version of one object in a PostgreSQL sink's changes table (the configured
cluster's), in the order they were written: when kube-cdc observed it, the op, the
resourceVersion, who changed it (field manager/operation) and, for a delete, whether it
was observed or inferred and why; then what changed against the version before, as a
unified diff of the YAML (metadata.resourceVersion is left out: the header has it). The
first version is shown whole, and so is the first after a delete or of a new uid. -o json
prints a JSON array, one element per version, with the change as an RFC 6902 JSON Patch
(resourceVersion included): applied in order to {}, the patches rebuild every version
exactly.

RESOURCE is named as in the config's resources (a plural, plural.group,
group/version/resource, or a kind) and matched against the resources the sink records,
so history needs no access to the cluster.`
	fs := cmd.Flags()
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "the object's namespace (default: the only namespace in which the name has history; \"\" for a cluster-scoped object)")
	fs.StringVar(&opts.since, "since", "", "only versions observed since then: a duration back from now (90m, 48h) or an RFC 3339 time")
	fs.StringVarP(&opts.output, "output", "o", "text", "text or json")
	fs.StringVar(&opts.sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}

func runHistory(ctx context.Context, w io.Writer, cfg *config.Config, resourceName, name string, nsSet bool, opts historyOptions) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("--output %q: want text or json", opts.output)
	}
	since, err := parseSince(opts.since, time.Now())
	if err != nil {
		return err
	}
	sc, err := historySink(cfg, opts.sink)
	if err != nil {
		return err
	}
	o := *sc.Postgres
	o.Migrate = false // reading only: never change the schema
	s, err := postgres.New(ctx, sc.Name, cfg.Cluster, o, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	where := fmt.Sprintf("in cluster %s (sink %s)", cfg.Cluster, sc.Name)

	recorded, err := s.RecordedResources(ctx)
	if err != nil {
		return fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	res, err := matchRecorded(resourceName, recorded)
	if err != nil {
		return fmt.Errorf("sink %s, cluster %s: %w", sc.Name, cfg.Cluster, err)
	}
	ns := opts.namespace
	if !nsSet {
		nss, err := s.HistoryNamespaces(ctx, res.Group, res.Resource, name)
		if err != nil {
			return fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		switch len(nss) {
		case 0:
			return fmt.Errorf("no history of %s %q %s", res.ID(), name, where)
		case 1:
			ns = nss[0]
		default:
			return fmt.Errorf("%s %q has history in namespaces %s %s: choose one with -n", res.ID(), name, strings.Join(nss, ", "), where)
		}
	}
	key := change.Key{Namespace: ns, Name: name}
	versions, err := s.History(ctx, postgres.HistoryQuery{Group: res.Group, Resource: res.Resource, Namespace: ns, Name: name, Since: since})
	if errors.Is(err, postgres.ErrNoHistory) {
		return fmt.Errorf("no history of %s %s %s", res.ID(), key, where)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	shown, err := showVersions(versions)
	if err != nil {
		return fmt.Errorf("%s %s: %w", res.ID(), key, err)
	}
	if opts.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(shown)
	}
	title := fmt.Sprintf("%s %s %s: %d versions", res.ID(), key, where, len(shown))
	if len(shown) == 1 {
		title = strings.TrimSuffix(title, "s")
	}
	if !since.IsZero() {
		title += " since " + formatTime(since)
	}
	fmt.Fprintln(w, title)
	for _, v := range shown {
		fmt.Fprintln(w)
		fmt.Fprintln(w, v.header())
		fmt.Fprint(w, v.diff)
	}
	return nil
}

// historySink is the sink named name, or the first PostgreSQL sink.
func historySink(cfg *config.Config, name string) (config.Sink, error) {
	for _, sc := range cfg.Sinks {
		if name == "" && sc.Type == config.SinkPostgres {
			return sc, nil
		}
		if name != "" && sc.Name == name {
			if sc.Type != config.SinkPostgres {
				return sc, fmt.Errorf("--sink %s: a %s sink keeps no history; history reads a postgres sink's changes table", name, sc.Type)
			}
			return sc, nil
		}
	}
	if name != "" {
		return config.Sink{}, fmt.Errorf("--sink %s: no sink of that name in the config", name)
	}
	return config.Sink{}, errors.New("history reads a postgres sink's changes table, and the config has no postgres sink")
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a positive duration (90m, 48h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// matchRecorded resolves a resource as the config names one, against the resources the
// sink records rather than the apiserver's discovery: history reads only the database,
// works when the cluster is unreachable or a CRD is gone, and can only show what was
// recorded anyway. A name with its group (plural.group, group/version/resource,
// version/resource for the core group) is taken as it is; a bare plural or a kind must
// match one recorded resource, and the core group wins a tie as with kubectl. Short names
// (cm, deploy) need discovery and are not known here.
func matchRecorded(name string, recorded []change.Resource) (change.Resource, error) {
	name = strings.TrimSpace(name)
	switch parts := strings.Split(name, "/"); len(parts) {
	case 3:
		return change.Resource{Group: parts[0], Resource: parts[2]}, nil
	case 2:
		return change.Resource{Resource: parts[1]}, nil
	case 1:
		if plural, group, ok := strings.Cut(name, "."); ok {
			return change.Resource{Group: group, Resource: plural}, nil
		}
	default:
		return change.Resource{}, fmt.Errorf("resource %q: want a plural, plural.group or group/version/resource", name)
	}
	var found []change.Resource
	for _, r := range recorded {
		if r.Resource == strings.ToLower(name) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		for _, r := range recorded {
			if r.Kind != "" && strings.EqualFold(r.Kind, name) {
				found = append(found, r)
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		ids := make([]string, len(found))
		for i, r := range found {
			if r.Group == "" {
				return r, nil
			}
			ids[i] = r.ID()
		}
		return change.Resource{}, fmt.Errorf("resource %q is ambiguous: %s", name, strings.Join(ids, ", "))
	}
	ids := make([]string, len(recorded))
	for i, r := range recorded {
		ids[i] = r.ID()
	}
	known := "nothing yet"
	if len(ids) > 0 {
		known = strings.Join(ids, ", ")
	}
	return change.Resource{}, fmt.Errorf("resource %q is none of the resources recorded (%s); name it as a plural, plural.group, group/version/resource or kind", name, known)
}

// shownVersion is one version as history prints it; its JSON is one element of -o json.
type shownVersion struct {
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
	// nothing to compare with (see postgres.Version.Previous) it replaces the whole
	// document, so the patches applied in order from {} rebuild every version. Null for an
	// inferred delete, which carries no object (and changes nothing).
	Patch []patchOp `json:"patch"`

	diff string // the text form's body
}

func (v shownVersion) header() string {
	h := fmt.Sprintf("#%d  %s  %s  rv %s", v.ID, formatTime(v.ObservedAt), v.Op, v.ResourceVersion)
	switch {
	case v.Inferred:
		h += "  inferred (" + v.Reason + ")"
	case v.Op == change.OpDelete:
		h += "  observed"
	}
	if v.ChangedBy != "" {
		h += "  by " + v.ChangedBy
	}
	if v.Snapshot {
		h += "  snapshot" // read by a relist: versions between it and the one before were not seen
	}
	return h
}

// formatTime is UTC with microseconds (PostgreSQL's precision), so a time printed by
// history is exact as --since.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

func showVersions(versions []postgres.Version) ([]shownVersion, error) {
	out := make([]shownVersion, 0, len(versions))
	for _, v := range versions {
		sv := shownVersion{ID: v.ID, ObservedAt: v.ObservedAt.UTC(), Op: v.Op, ResourceVersion: v.RV.String(), UID: v.UID,
			ChangedBy: v.ChangedBy, Inferred: v.Inferred, Reason: v.Reason, Snapshot: v.Snapshot}
		if v.Object == nil {
			sv.diff = fmt.Sprintf("(no object: kube-cdc inferred this delete, reason %s; the last state it saw is the version before)\n", v.Reason)
			out = append(out, sv)
			continue
		}
		to, err := decodeJSON(v.Object)
		if err != nil {
			return nil, fmt.Errorf("version %d: %w", v.ID, err)
		}
		var from any // nil: nothing to compare with; shown whole
		if v.Previous != nil {
			if from, err = decodeJSON(v.Previous); err != nil {
				return nil, fmt.Errorf("the version before %d: %w", v.ID, err)
			}
		}
		sv.Patch = jsonPatch(from, to)
		if sv.diff, err = yamlDiff(from, to); err != nil {
			return nil, fmt.Errorf("version %d: %w", v.ID, err)
		}
		if sv.diff == "" {
			sv.diff = "(the object did not change besides its resourceVersion)\n"
		}
		out = append(out, sv)
	}
	return out, nil
}

// decodeJSON keeps numbers as written (json.Number): int64 values stay exact.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// yamlDiff is a unified diff (3 lines of context) of the objects' YAML without
// metadata.resourceVersion, which changes every time and is in the header; from nil
// shows to whole, as added lines.
func yamlDiff(from, to any) (string, error) {
	a, err := diffYAML(from)
	if err != nil {
		return "", err
	}
	b, err := diffYAML(to)
	if err != nil {
		return "", err
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: a, B: b, Context: 3})
}

func diffYAML(obj any) ([]string, error) {
	if obj == nil {
		return nil, nil
	}
	if m, ok := obj.(map[string]any); ok {
		if meta, ok := m["metadata"].(map[string]any); ok {
			if _, ok := meta["resourceVersion"]; ok {
				meta = cloneMap(meta)
				delete(meta, "resourceVersion")
				m = cloneMap(m)
				m["metadata"] = meta
				obj = m
			}
		}
	}
	y, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(y), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, nil
}

func cloneMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// patchOp is one RFC 6902 operation; Value is absent for remove.
type patchOp struct {
	Op    string          `json:"op"` // add | remove | replace
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// jsonPatch returns the RFC 6902 patch that turns from into to; from nil (nothing to
// compare with) gives one replace of the whole document (path ""), which applies to any
// document. Otherwise it walks both documents together: object keys are added, removed
// or walked into; arrays are walked index by index over their common length, then grow
// by adds at the end or shrink by removes from the end; any other difference is a
// replace. The paths are the ones the SQL function changed_paths
// (migrations/005_history.sql) lists.
func jsonPatch(from, to any) []patchOp {
	if from == nil {
		return []patchOp{{Op: "replace", Path: "", Value: mustJSON(to)}}
	}
	ops := []patchOp{}
	diffJSON("", from, to, &ops)
	return ops
}

func diffJSON(path string, from, to any, ops *[]patchOp) {
	switch a := from.(type) {
	case map[string]any:
		if b, ok := to.(map[string]any); ok {
			keys := make([]string, 0, len(a)+len(b))
			for k := range a {
				keys = append(keys, k)
			}
			for k := range b {
				if _, ok := a[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				p := path + "/" + escapePointer(k)
				av, inA := a[k]
				bv, inB := b[k]
				switch {
				case !inB:
					*ops = append(*ops, patchOp{Op: "remove", Path: p})
				case !inA:
					*ops = append(*ops, patchOp{Op: "add", Path: p, Value: mustJSON(bv)})
				default:
					diffJSON(p, av, bv, ops)
				}
			}
			return
		}
	case []any:
		if b, ok := to.([]any); ok {
			n := min(len(a), len(b))
			for i := range n {
				diffJSON(fmt.Sprintf("%s/%d", path, i), a[i], b[i], ops)
			}
			for i := n; i < len(b); i++ {
				*ops = append(*ops, patchOp{Op: "add", Path: fmt.Sprintf("%s/%d", path, i), Value: mustJSON(b[i])})
			}
			for i := len(a) - 1; i >= n; i-- {
				*ops = append(*ops, patchOp{Op: "remove", Path: fmt.Sprintf("%s/%d", path, i)})
			}
			return
		}
	}
	if !equalJSON(from, to) {
		*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: mustJSON(to)})
	}
}

// equalJSON compares decoded JSON; numbers by value, as jsonb does (1.0 equals 1).
func equalJSON(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(x.String())
		ry, oky := new(big.Rat).SetString(y.String())
		if okx && oky {
			return rx.Cmp(ry) == 0
		}
		return x == y
	}
	return reflect.DeepEqual(a, b)
}

func escapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// mustJSON encodes a value decodeJSON produced, which cannot fail.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
