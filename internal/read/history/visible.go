package history

import (
	"fmt"
	"strings"
	"unicode"
)

// Visible returns s with every character that is invisible or changes how the text around
// it is ordered written as a marker, ⟨U+202E⟩: the Unicode format characters (category Cf:
// the bidirectional controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F and U+061C, the
// zero-width U+200B–U+200D, U+2060 and U+FEFF, the soft hyphen, tag characters…), the line
// and paragraph separators U+2028 and U+2029, and control characters but the newline and
// the tab. A value in a ConfigMap that holds U+202E would otherwise show its text reversed
// in a diff, so that one line could pass for another; with markers every character of it
// is seen, in the order it is stored. The text is otherwise unchanged (a string without
// such characters is returned as it is). History's text and the UI's object page show
// their diffs through it; -o json keeps the values exact.
func Visible(s string) string {
	i := strings.IndexFunc(s, hidden)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if hidden(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hidden reports whether r is shown as a marker by Visible.
func hidden(r rune) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case r == '\u2028', r == '\u2029':
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r)
}
