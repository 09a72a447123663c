package ignorepaths

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// EqualSQL is a PostgreSQL boolean expression that is true when the jsonb expressions a
// and b differ only under paths (which Validate accepted): StripSQL(paths, a) =
// StripSQL(paths, b), computed without building the stripped documents. It walks the
// paths, not the documents: at each step the two values are compared whole but for the
// keys the paths go into, which are compared one level down. a and b are expected non-NULL.
// "" for no paths.
func EqualSQL(paths []string, a, b string) string {
	if len(paths) == 0 {
		return ""
	}
	root := buildTrie(paths)
	var eb equalBuilder
	return eb.equal(a, b, root)
}

func buildTrie(paths []string) *trie {
	root := &trie{}
	for _, p := range paths {
		n := root
		for _, seg := range strings.Split(p[1:], "/") {
			n = n.child(unescape(seg))
			if n.ignored {
				break // a path above this one ignores it all
			}
		}
		n.ignored, n.kids, n.order = true, nil, nil
	}
	return root
}

type equalBuilder struct{ n int }

func (b *equalBuilder) alias() string {
	b.n++
	return "q" + strconv.Itoa(b.n)
}

// equal compares a and b (SQL jsonb expressions, either possibly NULL below the root)
// but for what t ignores.
func (eb *equalBuilder) equal(a, b string, t *trie) string {
	if t.ignored {
		return "true"
	}
	if len(t.kids) == 0 {
		return fmt.Sprintf("(%s IS NOT DISTINCT FROM %s)", a, b)
	}
	w, wild := t.kids["*"]
	if wild && len(t.kids) > 1 {
		// A wildcard beside literal keys: the rare case, by the stripped documents.
		var sb stripBuilder
		sb.n = 1000 * (eb.n + 1) // aliases apart from any other strip of the statement
		eb.n++
		return fmt.Sprintf("(%s IS NOT DISTINCT FROM %s)", sb.strip(a, t), sb.strip(b, t))
	}
	if wild && w.ignored {
		return fmt.Sprintf(`(CASE WHEN jsonb_typeof(%[1]s) IN ('object', 'array') THEN jsonb_typeof(%[1]s) IS NOT DISTINCT FROM jsonb_typeof(%[2]s)
			ELSE %[1]s IS NOT DISTINCT FROM %[2]s END)`, a, b)
	}
	var object, array string
	if wild {
		k, v, i := eb.alias(), eb.alias(), eb.alias()
		object = fmt.Sprintf(`(SELECT array_agg(%[3]s ORDER BY %[3]s) FROM jsonb_object_keys(%[1]s) AS %[3]s_(%[3]s)) IS NOT DISTINCT FROM
			(SELECT array_agg(%[3]s ORDER BY %[3]s) FROM jsonb_object_keys(%[2]s) AS %[3]s_(%[3]s))
			AND NOT EXISTS (SELECT 1 FROM jsonb_each(%[1]s) AS %[4]s_(%[3]s, %[4]s) WHERE %[5]s IS NOT TRUE)`,
			a, b, k, v, eb.equal(v, fmt.Sprintf("(%s -> %s)", b, k), w))
		array = fmt.Sprintf(`jsonb_array_length(%[1]s) = jsonb_array_length(%[2]s)
			AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(%[1]s) WITH ORDINALITY AS %[3]s_(%[3]s, %[4]s) WHERE %[5]s IS NOT TRUE)`,
			a, b, v, i, eb.equal(v, fmt.Sprintf("(%s -> (%s - 1)::int)", b, i), w))
	} else {
		keys := make([]string, len(t.order))
		for i, k := range t.order {
			keys[i] = quote(k)
		}
		list := "ARRAY[" + strings.Join(keys, ", ") + "]::text[]"
		conds := []string{fmt.Sprintf("(%s - %s) = (%s - %s)", a, list, b, list)}
		v, i := eb.alias(), eb.alias()
		var cases []string
		for _, k := range t.order {
			c := t.kids[k]
			if !c.ignored {
				conds = append(conds, eb.equal(fmt.Sprintf("(%s -> %s)", a, quote(k)), fmt.Sprintf("(%s -> %s)", b, quote(k)), c))
			}
			if n, err := strconv.Atoi(k); err == nil && n >= 0 {
				cases = append(cases, fmt.Sprintf("WHEN %d THEN %s", n, eb.equal(v, fmt.Sprintf("(%s -> %d)", b, n), c)))
			}
		}
		object = strings.Join(conds, " AND ")
		if len(cases) == 0 {
			array = fmt.Sprintf("%s IS NOT DISTINCT FROM %s", a, b)
		} else {
			slices.Sort(cases)
			array = fmt.Sprintf(`jsonb_array_length(%[1]s) = jsonb_array_length(%[2]s)
				AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(%[1]s) WITH ORDINALITY AS %[3]s_(%[3]s, %[4]s)
				                 WHERE (CASE (%[4]s - 1)::int %[5]s ELSE %[3]s IS NOT DISTINCT FROM (%[2]s -> (%[4]s - 1)::int) END) IS NOT TRUE)`,
				a, b, v, i, strings.Join(cases, " "))
		}
	}
	return fmt.Sprintf(`(CASE WHEN jsonb_typeof(%[1]s) IS DISTINCT FROM jsonb_typeof(%[2]s) THEN false
		WHEN jsonb_typeof(%[1]s) = 'object' THEN %[3]s
		WHEN jsonb_typeof(%[1]s) = 'array' THEN %[4]s
		ELSE %[1]s IS NOT DISTINCT FROM %[2]s END)`, a, b, object, array)
}
