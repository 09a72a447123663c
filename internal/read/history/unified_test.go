package history

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
)

// The classed lines Show makes are difflib's unified diff line for line, and each line's
// class is what its first character says: the web UI highlights them without reading the
// text back.
func TestTheDiffLinesAreDifflibsUnifiedDiffLineForLine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a: 1\n", "b: 2\n", "c: 3\n", "- x\n", "+ y\n", "--- z\n", "@@ w\n", "  d: 4\n"}
	doc := func() []string {
		out := make([]string, r.IntN(12))
		for i := range out {
			out[i] = words[r.IntN(len(words))]
		}
		return out
	}
	for i := range 2000 {
		a, b := doc(), doc()
		if i%3 == 0 {
			b = append(append([]string{}, a[:len(a)/2]...), b...) // a shared head: context lines
		}
		want, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: a, B: b, Context: 3})
		if err != nil {
			t.Fatal(err)
		}
		lines := unified(a, b)
		if got := text(lines); got != want {
			t.Fatalf("a %q\nb %q\nunified:\n%s\ndifflib:\n%s", a, b, got, want)
		}
		hunks := 0
		for _, l := range lines {
			want := map[byte]string{'+': "add", '-': "del", ' ': "", '@': "hunk"}[l.Text[0]]
			if l.Class == "hunk" {
				hunks++
			}
			if l.Class != want || l.Class == "hunk" && !strings.HasPrefix(l.Text, "@@ -") {
				t.Fatalf("line %q classed %q, want %q", l.Text, l.Class, want)
			}
		}
		if hunks != strings.Count(want, "\n@@ -")+strings.Count(want[:min(len(want), 4)], "@@ -") {
			t.Fatalf("%d hunk lines in\n%s", hunks, want)
		}
	}
}
