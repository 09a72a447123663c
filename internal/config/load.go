package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "KUBE_CDC_"

// LoadOptions says where Load finds the layers above the defaults.
type LoadOptions struct {
	// File is a YAML config file; "" for none. A file that does not exist is an error.
	File string
	// Environ is the environment as "KEY=value" strings; nil reads os.Environ().
	Environ []string
	// Flags are the command line's flags; nil for none. Only flags the user set override,
	// and only those that name a key (see FlagKeys); others (like --config) are ignored.
	Flags *pflag.FlagSet
}

// FlagKeys maps the CLI's flag names to config keys. A flag named like a key path
// ("pipeline.batchSize") also sets that key.
var FlagKeys = map[string]string{
	"cluster":         "cluster",
	"kubeconfig":      "kubernetes.kubeconfig",
	"context":         "kubernetes.context",
	"log-level":       "log.level",
	"log-format":      "log.format",
	"metrics-address": "metrics.address",
}

// RegisterFlags defines the flags of FlagKeys on fs, with empty defaults: an unset flag
// never overrides the file or the environment.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String("cluster", "", `cluster name recorded with every change (key cluster, default "default")`)
	fs.String("kubeconfig", "", "kubeconfig file (key kubernetes.kubeconfig; default in-cluster, $KUBECONFIG, ~/.kube/config)")
	fs.String("context", "", "kubeconfig context (key kubernetes.context; default the current context)")
	fs.String("log-level", "", "debug, info, warn or error (key log.level, default info)")
	fs.String("log-format", "", "text or json (key log.format, default text)")
	fs.String("metrics-address", "", `address of /metrics, /healthz and /readyz (key metrics.address, default ":9090"; "" disables)`)
}

// Load reads the layers of opts over the defaults, fills per-sink defaults, decodes and
// validates. Every error is an *Error.
func Load(opts LoadOptions) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return nil, errorf("defaults: %v", err)
	}

	if opts.File != "" {
		m, err := readFile(opts.File)
		if err != nil {
			return nil, err
		}
		if err := k.Load(confmap.Provider(m, ""), nil); err != nil {
			return nil, errorf("%s: %v", opts.File, err)
		}
	}

	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	scalars, indexed, err := parseEnv(environ)
	if err != nil {
		return nil, err
	}
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return scalars },
		TransformFunc: func(name, value string) (string, any) {
			return envKey(name).path, value
		},
	}), nil); err != nil {
		return nil, errorf("environment: %v", err)
	}

	if opts.Flags != nil {
		fs := opts.Flags
		if err := k.Load(posflag.ProviderWithFlag(fs, ".", nil, func(f *pflag.Flag) (string, any) {
			key := flagKey(f.Name)
			if key == "" {
				return "", nil
			}
			return key, posflag.FlagVal(fs, f)
		}), nil); err != nil {
			return nil, errorf("flags: %v", err)
		}
	}

	raw := k.Raw()
	for _, e := range indexed {
		if err := e.apply(raw); err != nil {
			return nil, err
		}
	}
	if err := fillListDefaults(raw); err != nil {
		return nil, err
	}

	final := koanf.New(".")
	if err := final.Load(confmap.Provider(raw, ""), nil); err != nil {
		return nil, errorf("%v", err)
	}
	var cfg Config
	if err := final.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{
		DecoderConfig: &mapstructure.DecoderConfig{
			TagName:     "koanf",
			DecodeHook:  convert,
			ErrorUnused: true,
			MatchName:   func(mapKey, fieldName string) bool { return mapKey == fieldName },
		},
	}); err != nil {
		return nil, decodeError(err)
	}
	if cfg.LeaderElection.Identity == "" {
		cfg.LeaderElection.Identity, _ = os.Hostname()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func readFile(name string) (map[string]any, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errorf("%s: no such file", name)
	}
	if err != nil {
		return nil, errorf("%s: %v", name, err)
	}
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		return nil, errorf("%s: %v", name, err)
	}
	dropNulls(m)
	return m, nil
}

// dropNulls removes keys written without a value ("kubernetes:"), so they keep their
// defaults instead of erasing them.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

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

func flagKey(name string) string {
	if k, ok := FlagKeys[name]; ok {
		return k
	}
	if k, ok := keys[strings.ToLower(name)]; ok && k.typ != nil && !strings.Contains(k.path, "[]") {
		return k.path
	}
	return ""
}

// fillListDefaults fills resources and sinks when the file has none, and each sink's
// defaults for its type.
func fillListDefaults(raw map[string]any) error {
	if v, ok := raw["resources"]; !ok || v == nil {
		var rs []any
		for _, r := range DefaultResources() {
			rs = append(rs, map[string]any{"name": r.Name})
		}
		raw["resources"] = rs
	}
	if v, ok := raw["sinks"]; !ok || v == nil {
		raw["sinks"] = []any{map[string]any{"name": "stdout", "type": SinkStdout}}
	}
	sinks, ok := raw["sinks"].([]any)
	if !ok {
		return nil // the decoder reports the wrong type
	}
	for _, s := range sinks {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		if def := sinkDefaults(typ); def != nil {
			fillDefaults(m, def)
		}
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// convert is the decode hook: it reads strings (from the environment, flags or quoted
// YAML) as the target type, and words every type mismatch for a person.
func convert(from, to reflect.Value) (any, error) {
	if !from.IsValid() {
		return nil, nil
	}
	data := from.Interface()
	t := to.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		switch v := data.(type) {
		case time.Duration:
			return v, nil
		case string:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("expected a duration like \"10s\", got %q", v)
			}
			return d, nil
		case int:
			if v == 0 {
				return time.Duration(0), nil
			}
		}
		return nil, fmt.Errorf("expected a duration like \"10s\", got %s", describeValue(data))
	}
	fk := from.Kind()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch fk {
		case reflect.String:
			n, err := strconv.ParseInt(strings.TrimSpace(data.(string)), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("expected a number, got %q", data)
			}
			return n, nil
		case reflect.Float32, reflect.Float64:
			f := from.Float()
			if f != math.Trunc(f) {
				return nil, fmt.Errorf("expected a whole number, got %v", f)
			}
			return int64(f), nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return data, nil
		}
		return nil, fmt.Errorf("expected a number, got %s", describeValue(data))
	case reflect.Float32, reflect.Float64:
		switch fk {
		case reflect.String:
			f, err := strconv.ParseFloat(strings.TrimSpace(data.(string)), 64)
			if err != nil {
				return nil, fmt.Errorf("expected a number, got %q", data)
			}
			return f, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			return data, nil
		}
		return nil, fmt.Errorf("expected a number, got %s", describeValue(data))
	case reflect.Bool:
		switch fk {
		case reflect.Bool:
			return data, nil
		case reflect.String:
			b, err := strconv.ParseBool(strings.TrimSpace(data.(string)))
			if err != nil {
				return nil, fmt.Errorf("expected true or false, got %q", data)
			}
			return b, nil
		}
		return nil, fmt.Errorf("expected true or false, got %s", describeValue(data))
	case reflect.String:
		switch fk {
		case reflect.String:
			return data, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			return fmt.Sprint(data), nil // name: 2024
		}
		return nil, fmt.Errorf("expected a string, got %s", describeValue(data))
	case reflect.Slice:
		switch fk {
		case reflect.Slice, reflect.Array:
			return data, nil
		case reflect.String:
			if t.Elem().Kind() == reflect.String { // "a,b" from the environment
				var out []any
				for _, s := range strings.Split(data.(string), ",") {
					if s = strings.TrimSpace(s); s != "" {
						out = append(out, s)
					}
				}
				return out, nil
			}
		}
		return nil, fmt.Errorf("expected a list, got %s", describeValue(data))
	case reflect.Struct:
		if fk == reflect.Map || fk == reflect.Struct {
			return data, nil
		}
		return nil, fmt.Errorf("expected a map of keys, got %s", describeValue(data))
	}
	return data, nil
}
