package config

import (
	"strconv"
	"strings"
)

// envKey resolves an environment variable name (without the value) to a key, or a zero
// keyInfo when it names none.
func envKey(name string) keyInfo {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	if !ok {
		return keyInfo{}
	}
	return keys[strings.ToLower(strings.ReplaceAll(rest, "__", "."))]
}

type indexedEnv struct {
	name  string   // the variable, for errors
	segs  []string // canonical path segments, list indexes as numbers
	value string
}

// parseEnv splits the KUBE_CDC_ variables into plain key paths (for koanf's env
// provider) and paths through list elements, which koanf cannot merge into a list.
// Variables under a known top-level key that name no key are errors (a typo would
// otherwise be silently ignored); others, like KUBE_CDC_TESTBIN, belong to other tools.
func parseEnv(environ []string) (scalars []string, indexed []indexedEnv, _ error) {
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		lower := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		if _, known := keys[lower[0]]; !known {
			continue
		}
		pattern := make([]string, len(lower))
		hasIndex := false
		for i, s := range lower {
			if _, err := strconv.Atoi(s); err == nil {
				pattern[i], hasIndex = "[]", true
			} else {
				pattern[i] = s
			}
		}
		k, ok := keys[strings.Join(pattern, ".")]
		if !ok {
			return nil, nil, errorf("%s: unknown key %q", name, strings.Join(lower, "."))
		}
		if k.typ == nil {
			return nil, nil, errorf("%s: %s is a map or list; the environment sets only the keys inside it (like KUBE_CDC_SINKS__0__NAME)", name, k.path)
		}
		if !hasIndex {
			scalars = append(scalars, kv)
			continue
		}
		segs := strings.Split(k.path, ".")
		for i, s := range segs {
			if s == "[]" {
				segs[i] = lower[i]
			}
		}
		indexed = append(indexed, indexedEnv{name: name, segs: segs, value: value})
	}
	return scalars, indexed, nil
}

func (e indexedEnv) apply(raw map[string]any) error {
	var cur any = raw
	for i, seg := range e.segs {
		last := i == len(e.segs)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[seg] = e.value
				return nil
			}
			next, ok := c[seg]
			if !ok || next == nil {
				if _, err := strconv.Atoi(e.segs[i+1]); err == nil {
					return errorf("%s: %s has no element %s (lists cannot be built from the environment)", e.name, strings.Join(e.segs[:i+1], "."), e.segs[i+1])
				}
				next = map[string]any{}
				c[seg] = next
			}
			cur = next
		case []any:
			n, _ := strconv.Atoi(seg)
			if n >= len(c) {
				return errorf("%s: %s has no element %d (lists cannot be built from the environment)", e.name, strings.Join(e.segs[:i], "."), n)
			}
			cur = c[n]
		default:
			return errorf("%s: %s is not a map", e.name, strings.Join(e.segs[:i], "."))
		}
	}
	return nil
}
