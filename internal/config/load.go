package config

import (
	"errors"
	"io/fs"
	"os"
	"strings"

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
	fs.String("metrics-address", "", `address of /metrics, /healthz and /readyz (key metrics.address, default "`+DefaultMetricsAddress+`"; "" disables)`)
}

// Load reads the layers of opts over the defaults, fills per-sink defaults, decodes and
// validates. Every error is an *Error, and none shows the digest key.
func Load(opts LoadOptions) (*Config, error) {
	var digestKeys []string
	cfg, err := loadLayers(opts, &digestKeys)
	if err != nil {
		return nil, scrub(err, digestKeys)
	}
	return cfg, nil
}

// digestKeyEnv is the variable that should carry transforms.digestKey.
const digestKeyEnv = EnvPrefix + "TRANSFORMS__DIGESTKEY"

// scrub replaces the digest keys in err's message, as postgres.ScrubPassword does passwords: no
// message is meant to show one, and this keeps it so should a parser quote a value.
func scrub(err error, secrets []string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	for _, s := range secrets {
		if len(s) >= 4 {
			e.Msg = strings.ReplaceAll(e.Msg, s, "xxxxx")
		}
	}
	return e
}

func loadLayers(opts LoadOptions, digestKeys *[]string) (*Config, error) {
	var origins map[string]string // see Config.origins
	setBy := func(key, layer string) {
		if origins == nil {
			origins = map[string]string{}
		}
		origins[key] = layer
	}
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
		file := koanf.New(".")
		if err := file.Load(confmap.Provider(m, ""), nil); err == nil {
			for _, key := range file.Keys() {
				setBy(key, opts.File)
			}
		}
	}

	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, digestKeyEnv+"="); ok {
			*digestKeys = append(*digestKeys, v)
		}
	}
	if v, ok := k.Get("transforms.digestKey").(string); ok {
		*digestKeys = append(*digestKeys, v)
	}
	scalars, indexed, err := parseEnv(environ)
	if err != nil {
		return nil, err
	}
	for _, kv := range scalars {
		name, _, _ := strings.Cut(kv, "=")
		setBy(envKey(name).path, name)
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
	cfg.origins = origins
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

func flagKey(name string) string {
	if k, ok := FlagKeys[name]; ok {
		return k
	}
	if k, ok := keys[strings.ToLower(name)]; ok && k.typ != nil && !strings.Contains(k.path, "[]") {
		return k.path
	}
	return ""
}

// fillListDefaults fills resources and sinks when the file has none, each resource's
// defaults, and each sink's defaults for its type.
func fillListDefaults(raw map[string]any) error {
	if v, ok := raw["resources"]; !ok || v == nil {
		var rs []any
		for _, r := range DefaultResources() {
			rs = append(rs, map[string]any{"name": r.Name})
		}
		raw["resources"] = rs
	}
	if rs, ok := raw["resources"].([]any); ok {
		for _, r := range rs {
			if m, ok := r.(map[string]any); ok {
				fillDefaults(m, resourceDefaults())
			}
		}
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
		if cp, ok := m["checkpoint"].(map[string]any); ok && cp["type"] == "" {
			delete(cp, "type") // "" means the sink type's default, as when unset
		}
		if def := sinkDefaults(typ); def != nil {
			fillDefaults(m, def)
		}
	}
	return nil
}
