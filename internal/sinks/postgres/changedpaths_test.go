package postgres

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/migrations"
)

// randomValue is a random JSON value of at most depth levels, with keys that need
// escaping in a JSON Pointer ('~', '/'), the empty key, and the types mixed.
func randomValue(r *rand.Rand, depth int) any {
	kinds := 6
	if depth == 0 {
		kinds = 4
	}
	switch r.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return r.IntN(3) == 0
	case 2:
		return r.IntN(5)
	case 3:
		return []string{"", "a", "b", "x/y", "é"}[r.IntN(5)]
	case 4:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth-1)
		}
		return a
	default:
		o := map[string]any{}
		for range r.IntN(5) {
			o[randomKey(r)] = randomValue(r, depth-1)
		}
		return o
	}
}

func randomKey(r *rand.Rand) string {
	return []string{"", "a", "b", "c", "a/b", "~", "~1", "0", "1", "metadata", "Ä"}[r.IntN(11)]
}

// mutate returns v with some of its parts changed, added or removed, and the rest shared.
func mutate(r *rand.Rand, v any, depth int) any {
	if r.IntN(6) == 0 {
		return randomValue(r, depth)
	}
	switch v := v.(type) {
	case map[string]any:
		o := map[string]any{}
		for k, x := range v {
			switch r.IntN(6) {
			case 0: // removed
			case 1:
				o[k] = mutate(r, x, depth-1)
			default:
				o[k] = x
			}
		}
		if r.IntN(3) == 0 {
			o[randomKey(r)] = randomValue(r, depth-1)
		}
		return o
	case []any:
		a := make([]any, 0, len(v)+1)
		for _, x := range v {
			if r.IntN(4) == 0 {
				x = mutate(r, x, depth-1)
			}
			a = append(a, x)
		}
		switch r.IntN(4) {
		case 0:
			a = append(a, randomValue(r, depth-1))
		case 1:
			if len(a) > 0 {
				a = a[:len(a)-1]
			}
		}
		return a
	}
	return v
}

// Migration 016 redefines changed_paths in PL/pgSQL for speed: on random pairs of
// documents (one a mutation of the other, so they share subtrees) it returns exactly what
// migration 005's recursive CTE returns, SQL NULLs and JSON nulls included.
func TestChangedPathsReturnsWhatMigration005sDefinitionReturnsOnRandomDocuments(t *testing.T) {
	t.Parallel()
	_, dsn := newSink(t, Options{})
	conn := connect(t, dsn)
	src, err := migrations.FS.ReadFile("005_history.sql")
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`(?s)CREATE FUNCTION changed_paths\(.*?\n\$\$;`).Find(src)
	if old == nil {
		t.Fatal("005_history.sql: no CREATE FUNCTION changed_paths")
	}
	if _, err := conn.Exec(testCtx(t), strings.Replace(string(old), "FUNCTION changed_paths(", "FUNCTION pg_temp.changed_paths_005(", 1)); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(22, 16))
	var from, to []*string
	add := func(a, b any) {
		enc := func(v any) *string {
			if v == nil && r.IntN(2) == 0 {
				return nil // SQL NULL, not JSON null
			}
			j, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			s := string(j)
			return &s
		}
		from, to = append(from, enc(a)), append(to, enc(b))
	}
	for i := range 3000 {
		var a any
		if i%10 == 0 {
			a = randomValue(r, 4) // a scalar or an array too, now and then
		} else { // mostly documents: objects of a few keys, nested
			o := map[string]any{}
			for range 2 + r.IntN(5) {
				o[randomKey(r)] = randomValue(r, 3)
			}
			a = o
		}
		add(a, mutate(r, mutate(r, a, 4), 4))
	}
	add(nil, nil)
	add(map[string]any{}, []any{})
	add(1, 2)
	var n int
	var diffs []string
	rows, err := conn.Query(testCtx(t), `SELECT i, f, t, pg_temp.changed_paths_005(f, t)::text, kube_cdc.changed_paths(f, t)::text
		FROM unnest($1::jsonb[], $2::jsonb[]) WITH ORDINALITY AS p(f, t, i)
		WHERE pg_temp.changed_paths_005(f, t) IS DISTINCT FROM kube_cdc.changed_paths(f, t)`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var i int
		var f, to, want, got *string
		if err := rows.Scan(&i, &f, &to, &want, &got); err != nil {
			t.Fatal(err)
		}
		if len(diffs) < 5 {
			diffs = append(diffs, fmt.Sprintf("pair %d: %v → %v: 005 %v, now %v", i, sqlText(f), sqlText(to), sqlText(want), sqlText(got)))
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Fatalf("%d of %d pairs differ:\n%s", n, len(from), strings.Join(diffs, "\n"))
	}
	var changed int
	if err := conn.QueryRow(testCtx(t), `SELECT count(*) FROM unnest($1::jsonb[], $2::jsonb[]) AS p(f, t)
		WHERE cardinality(kube_cdc.changed_paths(f, t)) > 1`, from, to).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if changed < len(from)/3 {
		t.Fatalf("only %d of %d pairs have two paths or more: the documents are too alike to test the sort", changed, len(from))
	}
}

// sqlText shows a nullable text as psql does, NULL for NULL.
func sqlText(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
