package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// Decode decodes JSON and keeps numbers as written (json.Number): int64 values stay exact.
func Decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// DiffLine is one line of a version's diff, classed as it was made (never parsed back
// from the text).
type DiffLine struct {
	// Class is "add" or "del" for a line the version added or removed, "hunk" for a hunk's
	// header (@@ -a,b +c,d @@), "" for context and notes.
	Class string
	// Text is the line as history prints it, its prefix (+, -, space) included, without
	// the newline; characters that are invisible or reorder text are shown as markers
	// (Visible).
	Text string
}

// yamlDiff is the text of the unified diff (3 lines of context) of the objects' YAML
// without metadata.resourceVersion, which changes every time and is in the header; from
// nil shows to whole, as added lines. Show diffs the same way from objects it decoded
// once (document).
func yamlDiff(from, to any) (string, error) {
	a, err := diffYAML(from)
	if err != nil {
		return "", err
	}
	b, err := diffYAML(to)
	if err != nil {
		return "", err
	}
	return text(unified(a, b)), nil
}

// text is lines as history prints them, each ending in a newline.
func text(lines []DiffLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// unified is the unified diff of a and b (lines ending in a newline) with 3 lines of
// context, as difflib.WriteUnifiedDiff writes it without file names.
func unified(a, b []string) []DiffLine {
	var out []DiffLine
	add := func(class, prefix, line string) {
		out = append(out, DiffLine{Class: class, Text: Visible(prefix + strings.TrimSuffix(line, "\n"))})
	}
	for _, g := range difflib.NewMatcher(a, b).GetGroupedOpCodes(3) {
		first, last := g[0], g[len(g)-1]
		out = append(out, DiffLine{Class: "hunk", Text: fmt.Sprintf("@@ -%s +%s @@", unifiedRange(first.I1, last.I2), unifiedRange(first.J1, last.J2))})
		for _, c := range g {
			if c.Tag == 'e' {
				for _, l := range a[c.I1:c.I2] {
					add("", " ", l)
				}
				continue
			}
			if c.Tag == 'r' || c.Tag == 'd' {
				for _, l := range a[c.I1:c.I2] {
					add("del", "-", l)
				}
			}
			if c.Tag == 'r' || c.Tag == 'i' {
				for _, l := range b[c.J1:c.J2] {
					add("add", "+", l)
				}
			}
		}
	}
	return out
}

// unifiedRange is a hunk's range as the unified format writes it ("3,4", "3", "2,0").
func unifiedRange(start, stop int) string {
	beginning, length := start+1, stop-start
	switch length {
	case 1:
		return fmt.Sprintf("%d", beginning)
	case 0:
		beginning--
	}
	return fmt.Sprintf("%d,%d", beginning, length)
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

// PatchOp is one RFC 6902 operation; Value is absent for remove.
type PatchOp struct {
	Op    string          `json:"op"` // add | remove | replace
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// JSONPatch returns the RFC 6902 patch that turns from into to; from nil (nothing to
// compare with) gives one replace of the whole document (path ""), which applies to any
// document. Otherwise it walks both documents together: object keys are added, removed
// or walked into; arrays are walked index by index over their common length, then grow
// by adds at the end or shrink by removes from the end; any other difference is a
// replace. The paths are the ones the SQL function changed_paths
// (migrations/005_history.sql) lists.
func JSONPatch(from, to any) []PatchOp {
	if from == nil {
		return []PatchOp{{Op: "replace", Path: "", Value: mustJSON(to)}}
	}
	ops := []PatchOp{}
	diffJSON("", from, to, &ops)
	return ops
}

func diffJSON(path string, from, to any, ops *[]PatchOp) {
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
					*ops = append(*ops, PatchOp{Op: "remove", Path: p})
				case !inA:
					*ops = append(*ops, PatchOp{Op: "add", Path: p, Value: mustJSON(bv)})
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
				*ops = append(*ops, PatchOp{Op: "add", Path: fmt.Sprintf("%s/%d", path, i), Value: mustJSON(b[i])})
			}
			for i := len(a) - 1; i >= n; i-- {
				*ops = append(*ops, PatchOp{Op: "remove", Path: fmt.Sprintf("%s/%d", path, i)})
			}
			return
		}
	}
	if !equalJSON(from, to) {
		*ops = append(*ops, PatchOp{Op: "replace", Path: path, Value: mustJSON(to)})
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

// mustJSON encodes a value Decode produced, which cannot fail.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
