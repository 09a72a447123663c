package pgtext

import (
	"strings"
	"unicode/utf8"
)

// Valid is s as PostgreSQL text can hold it: NUL bytes and invalid UTF-8 replaced by U+FFFD.
func Valid(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ValidAll is ss as a PostgreSQL text[] can hold it (Valid of each), never nil.
func ValidAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Valid(s)
	}
	return out
}
