package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// Error is a configuration error: "config: <key>: <reason>", always one line.
type Error struct {
	// Key is the key path the error is about ("sinks[1].type"), or "" when there is none
	// (an unreadable file).
	Key string
	// Msg is the whole message after "config: ".
	Msg string
}

func (e *Error) Error() string { return "config: " + e.Msg }

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}

// keyErrorf reports a problem with key.
func keyErrorf(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: oneLine(key + ": " + fmt.Sprintf(format, args...))}
}

// errorf reports a problem that is not about one key.
func errorf(format string, args ...any) *Error {
	return &Error{Msg: oneLine(fmt.Sprintf(format, args...))}
}

type decodeLeaf struct {
	name string
	err  error
}

func decodeLeaves(err error, out *[]decodeLeaf) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			decodeLeaves(e, out)
		}
		return
	}
	if de, ok := err.(*mapstructure.DecodeError); ok {
		inner := de.Unwrap()
		var nested *mapstructure.DecodeError
		if _, isJoin := inner.(interface{ Unwrap() []error }); isJoin || errors.As(inner, &nested) {
			decodeLeaves(inner, out)
			return
		}
		*out = append(*out, decodeLeaf{name: de.Name(), err: inner})
		return
	}
	if w, ok := err.(interface{ Unwrap() error }); ok && w.Unwrap() != nil {
		// Decode wraps several errors in "decoding failed due to the following error(s)".
		decodeLeaves(w.Unwrap(), out)
		return
	}
	*out = append(*out, decodeLeaf{err: err})
}

// decodeError turns mapstructure's (joined, nested) errors into one line about the first.
func decodeError(err error) *Error {
	var leaves []decodeLeaf
	decodeLeaves(err, &leaves)
	if len(leaves) == 0 {
		return errorf("%v", err)
	}
	e := leafError(leaves[0])
	if n := len(leaves) - 1; n > 0 {
		e.Msg += fmt.Sprintf(" (and %d more %s)", n, plural(n, "error", "errors"))
	}
	return e
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func leafError(l decodeLeaf) *Error {
	msg := l.err.Error()
	if rest, ok := strings.CutPrefix(msg, "has invalid keys: "); ok {
		var full []string
		for _, k := range strings.Split(rest, ", ") {
			if l.name != "" {
				k = l.name + "." + k
			}
			full = append(full, k)
		}
		if len(full) == 1 {
			return &Error{Key: full[0], Msg: oneLine(fmt.Sprintf("unknown key %q%s", full[0], didYouMean(full[0])))}
		}
		return &Error{Key: full[0], Msg: oneLine(fmt.Sprintf("unknown keys %s", quoteAll(full)))}
	}
	var ute *mapstructure.UnconvertibleTypeError
	if errors.As(l.err, &ute) {
		return keyErrorf(l.name, "expected %s, got %s", describeType(ute.Expected.Type()), describeValue(ute.Value))
	}
	return keyErrorf(l.name, "%s", msg)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// didYouMean suggests the key an unknown key differs from only in case.
func didYouMean(key string) string {
	lower := strings.ToLower(listIndex.ReplaceAllString(key, ".[]"))
	if k, ok := keys[lower]; ok {
		segs := strings.Split(k.path, ".")
		return fmt.Sprintf(" (did you mean %q?)", segs[len(segs)-1])
	}
	return ""
}

func describeType(t reflect.Type) string {
	if t == durationType {
		return `a duration like "10s"`
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a map"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return t.String()
}

func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a map"
	}
	return fmt.Sprintf("%v", v)
}
