package ignorepaths

import (
	"fmt"
	"strconv"
	"strings"
)

// StripSQL is a PostgreSQL expression of the jsonb expression src with everything under
// paths (which Validate accepted) taken out: an ignored object key is removed, an ignored
// array element becomes null (so that the elements after it keep their indexes), and a
// "*" applies to every key of an object and every element of an array. Two versions of
// an object differ only under paths exactly when their StripSQLs are equal, which is what
// changed_paths() and Regexp say too. Building the stripped documents costs about what
// changed_paths() does (docs/benchmarks.md, "Noise control for history"), so EqualSQL
// compares without them and falls back on StripSQL only where a "*" has literal keys
// beside it. src is evaluated once. "" for no paths.
func StripSQL(paths []string, src string) string {
	if len(paths) == 0 {
		return ""
	}
	root := buildTrie(paths)
	var b stripBuilder
	return b.strip(src, root)
}

// trie holds the ignore paths by segment.
type trie struct {
	ignored bool // the whole subtree is ignored
	kids    map[string]*trie
	order   []string // the keys of kids, in the order the paths gave them
}

func (t *trie) child(seg string) *trie {
	if c, ok := t.kids[seg]; ok {
		return c
	}
	if t.kids == nil {
		t.kids = map[string]*trie{}
	}
	c := &trie{}
	t.kids[seg] = c
	t.order = append(t.order, seg)
	return c
}

// unescape turns a JSON pointer segment into the key it stands for (RFC 6901).
func unescape(seg string) string {
	return strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
}

// stripBuilder numbers the aliases of the nested subqueries.
type stripBuilder struct{ n int }

func (b *stripBuilder) alias() string {
	b.n++
	return "s" + strconv.Itoa(b.n)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pathLiteral is the text[] literal of one key, for #> and jsonb_set.
func pathLiteral(key string) string {
	return "ARRAY[" + quote(key) + "]::text[]"
}

// strip is src with t's ignored descendants taken out. Every step binds its input once
// (a subquery over one value, OFFSET 0 keeping the planner from pulling it up and
// writing the input out again at every use), so the expression grows with the paths,
// not with powers of their depth.
func (b *stripBuilder) strip(src string, t *trie) string {
	out := src
	if w, ok := t.kids["*"]; ok {
		v := b.alias()
		if w.ignored {
			out = fmt.Sprintf(`(SELECT CASE jsonb_typeof(%[1]s) WHEN 'object' THEN '{}'::jsonb WHEN 'array' THEN '[]'::jsonb ELSE %[1]s END FROM (SELECT %[2]s OFFSET 0) AS %[1]s_(%[1]s))`, v, out)
		} else {
			e, i, k := b.alias(), b.alias(), b.alias()
			inner := b.strip(e, w)
			out = fmt.Sprintf(`(SELECT CASE jsonb_typeof(%[1]s)
				WHEN 'array' THEN (SELECT coalesce(jsonb_agg(%[2]s ORDER BY %[4]s), '[]'::jsonb) FROM jsonb_array_elements(%[1]s) WITH ORDINALITY AS %[3]s_(%[3]s, %[4]s))
				WHEN 'object' THEN (SELECT coalesce(jsonb_object_agg(%[5]s, %[2]s), '{}'::jsonb) FROM jsonb_each(%[1]s) AS %[3]s_(%[5]s, %[3]s))
				ELSE %[1]s END FROM (SELECT %[6]s OFFSET 0) AS %[1]s_(%[1]s))`, v, inner, e, i, k, out)
		}
	}
	for _, key := range t.order {
		if key == "*" {
			continue
		}
		c := t.kids[key]
		v := b.alias()
		_, err := strconv.Atoi(key)
		index := err == nil // a key that can also be an array index
		var expr string
		switch {
		case c.ignored && index:
			expr = fmt.Sprintf(`CASE jsonb_typeof(%[1]s) WHEN 'object' THEN %[1]s - %[2]s
				WHEN 'array' THEN CASE WHEN %[1]s #> %[3]s IS NOT NULL THEN jsonb_set(%[1]s, %[3]s, 'null'::jsonb) ELSE %[1]s END
				ELSE %[1]s END`, v, quote(key), pathLiteral(key))
		case c.ignored:
			expr = fmt.Sprintf(`CASE jsonb_typeof(%[1]s) WHEN 'object' THEN %[1]s - %[2]s ELSE %[1]s END`, v, quote(key))
		default:
			// The child's value, stripped, in its place; only where it is there, and
			// only in a container that can hold the key (jsonb_set refuses a key that
			// is not an index in an array).
			types := "'object'"
			if index {
				types = "'object', 'array'"
			}
			child := b.strip(fmt.Sprintf("(%s #> %s)", v, pathLiteral(key)), c)
			expr = fmt.Sprintf(`CASE WHEN jsonb_typeof(%[1]s) IN (%[2]s) AND %[1]s #> %[3]s IS NOT NULL THEN jsonb_set(%[1]s, %[3]s, %[4]s) ELSE %[1]s END`,
				v, types, pathLiteral(key), child)
		}
		out = fmt.Sprintf(`(SELECT %s FROM (SELECT %s OFFSET 0) AS %s_(%s))`, expr, out, v, v)
	}
	return out
}
