package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
)

const exampleFile = "../../config.example.yaml"

func writeFile(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, yaml string, environ ...string) (*Config, error) {
	t.Helper()
	opts := LoadOptions{Environ: append([]string{}, environ...)}
	if yaml != "" {
		opts.File = writeFile(t, yaml)
	}
	return Load(opts)
}

func mustLoad(t *testing.T, yaml string, environ ...string) *Config {
	t.Helper()
	c, err := load(t, yaml, environ...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNoConfigStreamsTheDefaultResourcesToStdout(t *testing.T) {
	c := mustLoad(t, "")
	if !reflect.DeepEqual(c.Resources, DefaultResources()) {
		t.Errorf("resources %v", c.Resources)
	}
	if len(c.Sinks) != 1 || c.Sinks[0].Name != "stdout" || c.Sinks[0].Type != SinkStdout || c.Sinks[0].Checkpoint.Type != "none" {
		t.Errorf("sinks %+v", c.Sinks)
	}
	want := Config{
		Cluster:    "default",
		Kubernetes: Kubernetes{QPS: 50, Burst: 100, PageSize: 500, ListMode: "auto", RelistJitter: 5 * time.Second, AccessCheckInterval: time.Minute},
		Transforms: Transforms{RedactSecrets: true},
		Pipeline:   Pipeline{BatchSize: 5000, BatchBytes: 4 << 20, MaxWait: 0, Buffer: 256, DetachAfter: 10 * time.Second},
		Metrics:    Metrics{Address: "127.0.0.1:9464"},
		Log:        Log{Level: "info", Format: "text", ProgressInterval: 5 * time.Second},
		LeaderElection: LeaderElection{Namespace: "default", Name: "kube-cdc", Identity: c.LeaderElection.Identity,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		Audit: Audit{StatsInterval: time.Minute, StatsWindow: 5 * time.Minute, LogFile: AuditLogFile{PollInterval: time.Second},
			ActorsTopic: "kube.{cluster}.actors", Webhook: AuditWebhook{MaxBodyBytes: 32 << 20, MaxInFlight: 4}},
	}
	got := *c
	got.Resources, got.Sinks = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if host, _ := os.Hostname(); c.LeaderElection.Identity != host {
		t.Errorf("identity %q, want the hostname %q", c.LeaderElection.Identity, host)
	}
}

func TestSinkDefaultsAreFilledPerType(t *testing.T) {
	c := mustLoad(t, `
sinks:
  - {name: pg, type: postgres, postgres: {dsn: "postgres://u:p@localhost/db"}}
  - {name: k, type: kafka, kafka: {brokers: ["localhost:9092"]}}
  - {name: out, type: stdout}
`)
	pg := c.Sinks[0].Postgres
	if pg.Schema != "kube_cdc" || !pg.Migrate || pg.MaxConns != 4 || pg.HardDelete || c.Sinks[0].Checkpoint.Type != "" {
		t.Errorf("postgres %+v checkpoint %+v", pg, c.Sinks[0].Checkpoint)
	}
	k := c.Sinks[1].Kafka
	if k.Topic != "kube.{cluster}.{group}.{resource}" || k.Partitions != 6 || k.ReplicationFactor != 1 ||
		k.Compression != "none" || k.BatchTimeout != 5*time.Millisecond || k.WriteTimeout != 10*time.Second {
		t.Errorf("kafka %+v", k)
	}
	if cp := c.Sinks[1].Checkpoint; cp.Type != "file" || cp.Path != "kube-cdc-state.db" || cp.FlushInterval != checkpoint.DefaultFlushInterval {
		t.Errorf("kafka checkpoint %+v", cp)
	}
	if c.Sinks[2].Stdout == nil || c.Sinks[2].Checkpoint.Type != "none" || c.Sinks[2].Checkpoint.FlushInterval != 0 {
		t.Errorf("stdout %+v", c.Sinks[2])
	}
	if !reflect.DeepEqual(c.Resources, DefaultResources()) {
		t.Errorf("resources %v", c.Resources)
	}
}

func TestDefaultTrueBoolsCanBeSetFalse(t *testing.T) {
	c := mustLoad(t, `
transforms: {redactSecrets: false}
sinks:
  - {name: pg, type: postgres, postgres: {dsn: "host=localhost user=u", migrate: false}}
`)
	if c.Transforms.RedactSecrets || c.Sinks[0].Postgres.Migrate {
		t.Errorf("redactSecrets %v migrate %v", c.Transforms.RedactSecrets, c.Sinks[0].Postgres.Migrate)
	}
}

func TestEmptyKeysKeepTheirDefaults(t *testing.T) {
	c := mustLoad(t, "kubernetes:\nlog:\n")
	if c.Kubernetes.QPS != 50 || c.Log.Level != "info" {
		t.Errorf("%+v %+v", c.Kubernetes, c.Log)
	}
}

func TestLayersOverrideInOrder(t *testing.T) {
	file := writeFile(t, `
cluster: from-file
kubernetes: {context: file-ctx, qps: 10}
log: {level: warn}
metrics: {address: ":1000"}
sinks:
  - {name: pg, type: postgres, postgres: {dsn: "postgres://u@localhost/db"}}
`)
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	RegisterFlags(fs)
	fs.StringP("config", "c", "", "config file")
	if err := fs.Parse([]string{"--context", "flag-ctx", "--log-level=debug", "-c", file}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{File: file, Flags: fs, Environ: []string{
		"KUBE_CDC_CLUSTER=from-env",
		"KUBE_CDC_KUBERNETES__CONTEXT=env-ctx",
		"KUBE_CDC_KUBERNETES__QPS=20.5",
		"KUBE_CDC_LOG__LEVEL=error",
		"KUBE_CDC_PIPELINE__MAXWAIT=50ms",
		"KUBE_CDC_TRANSFORMS__DROP=status, metadata.ownerReferences",
		"KUBE_CDC_LEADERELECTION__ENABLED=true",
		"KUBE_CDC_SINKS__0__POSTGRES__DSN=postgres://u:secret@db/prod",
		"KUBE_CDC_TESTBIN=/somewhere", // another tool's variable: ignored
		"HOME=/root",
	}})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key       string
		got, want any
	}{
		{"cluster (env over file)", c.Cluster, "from-env"},
		{"kubernetes.context (flag over env)", c.Kubernetes.Context, "flag-ctx"},
		{"kubernetes.qps (env)", c.Kubernetes.QPS, float32(20.5)},
		{"log.level (flag)", c.Log.Level, "debug"},
		{"metrics.address (file, flag unset)", c.Metrics.Address, ":1000"},
		{"pipeline.maxWait (env)", c.Pipeline.MaxWait, 50 * time.Millisecond},
		{"transforms.drop (env list)", c.Transforms.Drop, []string{"status", "metadata.ownerReferences"}},
		{"leaderElection.enabled (env)", c.LeaderElection.Enabled, true},
		{"sinks[0].postgres.dsn (env by index)", c.Sinks[0].Postgres.DSN, "postgres://u:secret@db/prod"},
		{"sinks[0].postgres.schema (default kept)", c.Sinks[0].Postgres.Schema, "kube_cdc"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.key, ch.got, ch.want)
		}
	}
}

func TestExampleConfigValidates(t *testing.T) {
	c, err := Load(LoadOptions{File: exampleFile, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sinks) != 3 || len(c.Resources) == 0 {
		t.Errorf("example config loads %d sinks, %d resources", len(c.Sinks), len(c.Resources))
	}
}

func TestAResourcesHistoryKeepsItsDefaultIgnorePathsUnlessTurnedOff(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte("resources:\n  - name: nodes\n  - {name: leases.coordination.k8s.io, history: {defaultIgnorePaths: false, ignorePaths: [\"/spec/x\"]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{File: p, Environ: []string{"KUBE_CDC_RESOURCES__0__HISTORY__DEFAULTIGNOREPATHS=false"}})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Resources[0].History; h.DefaultIgnorePaths || len(h.IgnorePaths) != 0 {
		t.Errorf("nodes' history, turned off from the environment: %+v", h)
	}
	if h := c.Resources[1].History; h.DefaultIgnorePaths || !slices.Equal(h.IgnorePaths, []string{"/spec/x"}) {
		t.Errorf("leases' history: %+v", h)
	}
	c, err = Load(LoadOptions{File: p, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Resources[0].History; !h.DefaultIgnorePaths {
		t.Errorf("nodes' history by default: %+v", h)
	}
	c, err = Load(LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range c.Resources {
		if !r.History.DefaultIgnorePaths {
			t.Errorf("default resources[%d] (%s): defaultIgnorePaths false", i, r.Name)
		}
	}
}

// Every key of Config must be documented in config.example.yaml.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	keys := leafKeys()
	for _, k := range keys {
		path := k.path
		segs := strings.Split(path, ".")
		leaf := segs[len(segs)-1]
		// Each leaf name must appear as a key ("name:" or "{name:" / ", name:") in the file.
		if !strings.Contains(text, leaf+":") {
			t.Errorf("key %s is not in %s", path, exampleFile)
		}
		for _, s := range segs[:len(segs)-1] {
			if s != "[]" && !strings.Contains(text, s+":") {
				t.Errorf("parent %s of key %s is not in %s", s, path, exampleFile)
			}
		}
	}
	if len(keys) < 50 {
		t.Errorf("only %d keys found by reflection: %v", len(keys), keys)
	}
}

func TestErrorsNameTheKeyOnOneLine(t *testing.T) {
	const pg = `{name: pg, type: postgres, postgres: {dsn: "postgres://u@localhost/db"}}`
	tests := []struct {
		name    string
		yaml    string
		environ []string
		key     string // must appear in the message
		want    string // must appear in the message too
	}{
		{"unknown top-level key", "sinkz: []", nil, `unknown key "sinkz"`, ""},
		{"unknown nested key", "kubernetes: {contxt: x}", nil, `unknown key "kubernetes.contxt"`, ""},
		{"unknown key in a list element", "sinks:\n  - {name: a, type: stdout, colour: red}", nil, `unknown key "sinks[0].colour"`, ""},
		{"unknown key in sink options", "sinks:\n  - {name: a, type: kafka, kafka: {brokers: [\"k:1\"], brokerz: 1}}", nil, `unknown key "sinks[0].kafka.brokerz"`, ""},
		{"key in the wrong case", "leaderelection: {enabled: true}", nil, `unknown key "leaderelection"`, `did you mean "leaderElection"`},
		{"wrong type: string for number", "pipeline: {batchSize: lots}", nil, "pipeline.batchSize", `expected a number, got "lots"`},
		{"wrong type: map for string", "cluster: {a: b}", nil, "cluster", "expected a string, got a map"},
		{"wrong type: bool", "kubernetes: {compression: maybe}", nil, "kubernetes.compression", `expected true or false, got "maybe"`},
		{"wrong type: duration", "pipeline: {maxWait: soon}", nil, "pipeline.maxWait", `expected a duration like "10s", got "soon"`},
		{"wrong type: list", "resources: configmaps", nil, "resources", "expected a list"},
		{"wrong type from env", "", []string{"KUBE_CDC_PIPELINE__BATCHSIZE=lots"}, "pipeline.batchSize", `got "lots"`},
		{"unknown env key", "", []string{"KUBE_CDC_KUBERNETES__CONTXT=x"}, "KUBE_CDC_KUBERNETES__CONTXT", `unknown key "kubernetes.contxt"`},
		{"env index past the list", "", []string{"KUBE_CDC_SINKS__3__POSTGRES__DSN=x"}, "KUBE_CDC_SINKS__3__POSTGRES__DSN", "no element 3"},
		{"env sets a whole list", "", []string{"KUBE_CDC_SINKS=x"}, "KUBE_CDC_SINKS", "map or list"},
		{"invalid YAML", "cluster: a\nsinks:\n  - name: [\n", nil, "config.yaml: yaml:", "line"},
		{"empty resources", "resources: []", nil, "resources: empty list", ""},
		{"empty sinks", "sinks: []", nil, "sinks: empty list", ""},
		{"resource without name", "resources:\n  - namespaces: [a]", nil, "resources[0].name", "required"},
		{"bad label selector", "resources:\n  - {name: pods, labelSelector: \"a in (\"}", nil, "resources[0].labelSelector", ""},
		{"duplicate resource", "resources: [{name: pods}, {name: pods}]", nil, "resources[1]", "duplicate of resources[0]"},
		{"ignore path without a slash", "resources:\n  - {name: nodes, history: {ignorePaths: [\"/status/x\", \"status/y\"]}}", nil,
			"resources[0].history.ignorePaths[1]", `does not start with "/"`},
		{"ignore path with a partial wildcard", "resources:\n  - {name: nodes, history: {ignorePaths: [\"/status/cond*\"]}}", nil,
			"resources[0].history.ignorePaths[0]", "whole segment"},
		{"ignore path of the whole object", "resources:\n  - {name: nodes, history: {ignorePaths: [\"/\"]}}", nil,
			"resources[0].history.ignorePaths[0]", "whole object"},
		{"defaultIgnorePaths not a bool", "resources:\n  - {name: nodes, history: {defaultIgnorePaths: maybe}}", nil,
			"resources[0].history.defaultIgnorePaths", "true or false"},
		{"unknown sink type", "sinks:\n  - " + pg + "\n  - {name: es, type: elastic}", nil,
			"sinks[1].type", `unknown sink type "elastic" (want postgres, kafka or stdout)`},
		{"sink without type", "sinks:\n  - {name: x}", nil, "sinks[0].type", "required"},
		{"ui address without a port", "ui: {address: localhost}", nil, "ui.address", "want host:port"},
		{"ui without a postgres sink", "ui: {address: \"127.0.0.1:9465\"}", nil, "ui.address", "no sink is of type postgres"},
		{"ui sink of another type", "sinks:\n  - " + pg + "\n  - {name: out, type: stdout}\nui: {sink: out}", nil, "ui.sink", "sink out is a stdout sink"},
		{"ui sink unknown", "sinks:\n  - " + pg + "\nui: {sink: nope}", nil, "ui.sink", "no sink named nope"},
		{"duplicate sink names", "sinks:\n  - {name: a, type: stdout}\n  - {name: a, type: stdout}", nil, "sinks[1].name", `duplicate sink name "a"`},
		{"two sinks sharing a state file", "sinks:\n  - {name: a, type: stdout, checkpoint: {type: file, path: s.db}}\n  - {name: b, type: kafka, kafka: {brokers: [\"127.0.0.1:9092\"]}, checkpoint: {type: file, path: s.db}}", nil, "sinks[1].checkpoint.path", `already the state file of sinks[0]`},
		{"options of another type", "sinks:\n  - {name: a, type: stdout, kafka: {brokers: [\"k:1\"]}}", nil, "sinks[0].kafka", "set on a stdout sink"},
		{"postgres without dsn", "sinks:\n  - {name: a, type: postgres}", nil, "sinks[0].postgres.dsn", "required"},
		{"malformed dsn", "sinks:\n  - {name: a, type: postgres, postgres: {dsn: \"postgres://u:hunter2@db:notaport/x\"}}", nil,
			"sinks[0].postgres.dsn", "malformed DSN"},
		{"bad schema", "sinks:\n  - {name: a, type: postgres, postgres: {dsn: \"host=db\", schema: \"x;drop\"}}", nil, "sinks[0].postgres.schema", ""},
		{"kafka without brokers", "sinks:\n  - {name: k, type: kafka}", nil, "sinks[0].kafka.brokers", "required"},
		{"kafka broker without port", "sinks:\n  - {name: k, type: kafka, kafka: {brokers: [localhost]}}", nil, "sinks[0].kafka.brokers[0]", "host:port"},
		{"unknown compression", "sinks:\n  - {name: k, type: kafka, kafka: {brokers: [\"k:1\"], compression: brotli}}", nil,
			"sinks[0].kafka.compression", `unknown compression "brotli"`},
		{"unknown topic placeholder", "sinks:\n  - {name: k, type: kafka, kafka: {brokers: [\"k:1\"], topic: \"t.{kind}\"}}", nil,
			"sinks[0].kafka.topic", "{kind}"},
		{"unknown sasl mechanism", "sinks:\n  - {name: k, type: kafka, kafka: {brokers: [\"k:1\"], sasl: {mechanism: GSSAPI}}}", nil,
			"sinks[0].kafka.sasl.mechanism", "GSSAPI"},
		{"unknown checkpoint type", "sinks:\n  - {name: k, type: stdout, checkpoint: {type: redis}}", nil, "sinks[0].checkpoint.type", `"redis"`},
		{"kafka checkpoint on stdout", "sinks:\n  - {name: k, type: stdout, checkpoint: {type: kafka}}", nil, "sinks[0].checkpoint.type", "kafka sink"},
		{"negative flush interval", "sinks:\n  - {name: k, type: kafka, kafka: {brokers: [\"k:1\"]}, checkpoint: {flushInterval: -1s}}", nil, "sinks[0].checkpoint.flushInterval", "negative"},
		{"flush interval on stdout", "sinks:\n  - {name: k, type: stdout, checkpoint: {type: file, flushInterval: 100ms}}", nil, "sinks[0].checkpoint.flushInterval", "kafka sinks"},
		{"checkpoint on postgres", "sinks:\n  - {name: pg, type: postgres, postgres: {dsn: \"host=db\"}, checkpoint: {type: file}}", nil, "sinks[0].checkpoint.type", ""},
		{"bad metrics address", "metrics: {address: \"9090\"}", nil, "metrics.address", "host:port"},
		{"bad metrics port", "metrics: {address: \":http\"}", nil, "metrics.address", "port"},
		{"unknown log level", "log: {level: verbose}", nil, "log.level", `unknown log level "verbose"`},
		{"unknown log format", "log: {format: xml}", nil, "log.format", `"xml"`},
		{"zero qps", "kubernetes: {qps: 0}", nil, "kubernetes.qps", "greater than 0"},
		{"negative access check interval", "kubernetes: {accessCheckInterval: -1s}", nil, "kubernetes.accessCheckInterval", "negative"},
		{"negative batch size", "pipeline: {batchSize: -1}", nil, "pipeline.batchSize", "greater than 0"},
		{"bad drop path", "transforms: {drop: [\"metadata..x\"]}", nil, "transforms.drop[0]", ""},
		{"leader election timing", "leaderElection: {enabled: true, leaseDuration: 5s}", nil, "leaderElection.leaseDuration", "renewDeadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, tt.environ...)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: ") {
				t.Errorf("%q does not start with \"config: \"", msg)
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("%q is more than one line", msg)
			}
			if !strings.Contains(msg, tt.key) || !strings.Contains(msg, tt.want) {
				t.Errorf("%q does not contain %q and %q", msg, tt.key, tt.want)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("%q shows the password", msg)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("%T is not *Error", err)
			}
		})
	}
}

func TestAMissingFileIsNamed(t *testing.T) {
	_, err := Load(LoadOptions{File: "/nonexistent/kube-cdc.yaml", Environ: []string{}})
	if err == nil || err.Error() != "config: /nonexistent/kube-cdc.yaml: no such file" {
		t.Errorf("got %v", err)
	}
}

func TestMalformedDSNNeverShowsThePassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://user:hunter2@db:notaport/x",
		"postgres://user:hunter2@db/x?sslmode=bogus",
		"host=db password=hunter2 sslmode=bogus",
		"host=db password='hunter2' port=x",
	} {
		_, err := load(t, "sinks:\n  - {name: a, type: postgres, postgres: {dsn: \""+dsn+"\"}}")
		if err == nil {
			t.Errorf("%s: no error", dsn)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "sinks[0].postgres.dsn: malformed DSN") {
			t.Errorf("%s: %v", dsn, err)
		}
	}
}

func TestResourceNamesTakeEveryFormTheResolverKnows(t *testing.T) {
	for _, name := range []string{"configmaps", "deployments.apps", "v1/configmaps", "apps/v1/deployments"} {
		c := mustLoad(t, "resources: [{name: \""+name+"\"}]\n")
		if c.Resources[0].Name != name {
			t.Errorf("name %q loaded as %q", name, c.Resources[0].Name)
		}
	}
	_, err := load(t, "resources: [{name: a/b/c/d}]\n")
	if err == nil || !strings.Contains(err.Error(), "resources[0].name") {
		t.Errorf("a/b/c/d: error %v, want one naming resources[0].name", err)
	}
}

func TestAnEmptyCheckpointTypeMeansTheSinkTypesDefaultLikeAnUnsetOne(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`sinks: [{name: s, type: stdout, checkpoint: {type: ""}}]`, "none"},
		{`sinks: [{name: s, type: stdout}]`, "none"},
		{`sinks: [{name: k, type: kafka, kafka: {brokers: ["b:9092"]}, checkpoint: {type: ""}}]`, "file"},
		{`sinks: [{name: k, type: kafka, kafka: {brokers: ["b:9092"]}}]`, "file"},
	} {
		c := mustLoad(t, tc.yaml+"\n")
		if got := c.Sinks[0].Checkpoint.Type; got != tc.want {
			t.Errorf("%s: checkpoint type %q, want %q", tc.yaml, got, tc.want)
		}
	}
}

const testDigestKey = "k3y-0123456789abcdef-hunter2"

func TestStreamingSecretsRedactedRequiresADigestKey(t *testing.T) {
	for _, name := range []string{"secrets", "secret", "Secret", "v1/secrets", "/v1/secrets", " Secrets "} {
		_, err := load(t, "resources: [{name: configmaps}, {name: \""+name+"\", namespaces: [a]}]\n")
		if err == nil {
			t.Errorf("%q without a digest key: no error", name)
			continue
		}
		msg := err.Error()
		for _, want := range []string{"config: transforms.digestKey: required", "resources[1]", "KUBE_CDC_TRANSFORMS__DIGESTKEY", "digestKeyFile"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q: %q does not contain %q", name, msg, want)
			}
		}
		if e, ok := err.(*Error); !ok || e.Key != "transforms.digestKey" {
			t.Errorf("%q: %#v is not an *Error about transforms.digestKey", name, err)
		}
	}
	// No key is needed where no Secret is redacted: the default resources (no Secrets),
	// other resources, a CRD called secrets, or redaction turned off.
	for _, yaml := range []string{
		"",
		"resources: [{name: configmaps}, {name: pods}]\n",
		"resources: [{name: secrets.example.com}, {name: example.com/v1/secrets}]\n",
		"transforms: {redactSecrets: false}\nresources: [{name: secrets}]\n",
	} {
		if _, err := load(t, yaml); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}

func TestTheDigestKeyComesFromTheEnvironmentOrAFile(t *testing.T) {
	c := mustLoad(t, "resources: [{name: secrets}]\n", "KUBE_CDC_TRANSFORMS__DIGESTKEY="+testDigestKey)
	if got := string(c.Transforms.Key()); got != testDigestKey {
		t.Errorf("key from the environment %q", got)
	}
	file := filepath.Join(t.TempDir(), "digest-key")
	if err := os.WriteFile(file, []byte(testDigestKey+"\n"), 0o600); err != nil { // as `echo key > file` writes it
		t.Fatal(err)
	}
	c = mustLoad(t, "resources: [{name: secrets}]\ntransforms: {digestKeyFile: "+file+"}\n")
	if got := string(c.Transforms.Key()); got != testDigestKey {
		t.Errorf("key from %s: %q, want it without the newline", file, got)
	}
	if c := mustLoad(t, ""); c.Transforms.Key() != nil {
		t.Errorf("key %q with none configured", c.Transforms.Key())
	}
}

func TestDigestKeyErrorsNameTheKeyAndNeverShowIt(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := "KUBE_CDC_TRANSFORMS__DIGESTKEY=" + testDigestKey
	for _, tc := range []struct {
		name, yaml, env, want string
	}{
		{"too short", "", "KUBE_CDC_TRANSFORMS__DIGESTKEY=hunter2", "transforms.digestKey: the digest key is 7 bytes, want at least 16"},
		{"too short in a file", "transforms: {digestKeyFile: " + short + "}", "", "transforms.digestKeyFile: the digest key is 7 bytes"},
		{"both", "transforms: {digestKeyFile: " + empty + "}", env, "transforms.digestKeyFile: set transforms.digestKey (from KUBE_CDC_TRANSFORMS__DIGESTKEY) or transforms.digestKeyFile (from "},
		{"missing file", "transforms: {digestKeyFile: " + filepath.Join(dir, "nope") + "}", "", "transforms.digestKeyFile: " + filepath.Join(dir, "nope") + ": no such file"},
		{"empty file", "transforms: {digestKeyFile: " + empty + "}", "", "holds no key"},
		{"a list", "transforms: {digestKey: [" + testDigestKey + "]}", "", "transforms.digestKey: expected a string, got a list"},
		// A message that quotes a value (here a key pasted in the wrong place) is scrubbed.
		{"quoted elsewhere", "metrics: {address: \"" + testDigestKey + "\"}", env, "metrics.address: want host:port or :port, got \"xxxxx\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var environ []string
			if tc.env != "" {
				environ = append(environ, tc.env)
			}
			_, err := load(t, tc.yaml, environ...)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("%q does not contain %q", msg, tc.want)
			}
			if strings.Contains(msg, "hunter2") || strings.ContainsAny(msg, "\r\n") {
				t.Errorf("%q shows the key or is more than one line", msg)
			}
		})
	}
}

// Issue 24: a digest key in the environment and a key file in the file conflict, and the
// file alone does not show why; the message names the layer that set each.
func TestConflictingDigestKeysAreNamedWithTheLayerThatSetEach(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "digest-key")
	if err := os.WriteFile(keyFile, []byte(testDigestKey), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       func(file string) string
	}{
		{"key in the environment, file in the file", "transforms: {digestKeyFile: " + keyFile + "}\n",
			[]string{"KUBE_CDC_TRANSFORMS__DIGESTKEY=" + testDigestKey},
			func(file string) string {
				return "config: transforms.digestKeyFile: set transforms.digestKey (from KUBE_CDC_TRANSFORMS__DIGESTKEY) or transforms.digestKeyFile (from " + file + "), not both"
			}},
		{"both in the file", "transforms: {digestKey: " + testDigestKey + ", digestKeyFile: " + keyFile + "}\n", nil,
			func(file string) string {
				return "config: transforms.digestKeyFile: set transforms.digestKey (from " + file + ") or transforms.digestKeyFile (from " + file + "), not both"
			}},
		{"the environment overrides the file's key file", "transforms: {digestKey: " + testDigestKey + ", digestKeyFile: /nowhere}\n",
			[]string{"KUBE_CDC_TRANSFORMS__DIGESTKEYFILE=" + keyFile},
			func(file string) string {
				return "config: transforms.digestKeyFile: set transforms.digestKey (from " + file + ") or transforms.digestKeyFile (from KUBE_CDC_TRANSFORMS__DIGESTKEYFILE), not both"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, tc.yaml)
			_, err := Load(LoadOptions{File: file, Environ: append([]string{}, tc.env...)})
			if err == nil || err.Error() != tc.want(file) {
				t.Errorf("got  %v\nwant %s", err, tc.want(file))
			}
		})
	}
	// With no layer above the defaults to name (a Config validated as a program built it),
	// the message names the keys alone.
	c := mustLoad(t, "")
	c.Transforms.DigestKey, c.Transforms.DigestKeyFile = testDigestKey, keyFile
	if err := c.Validate(); err == nil || err.Error() != "config: transforms.digestKeyFile: set transforms.digestKey or transforms.digestKeyFile, not both" {
		t.Errorf("validating a config without layers: %v", err)
	}
}

func TestKafkaRecordLimitAndDeadLetterTopic(t *testing.T) {
	sink := func(opts string) string {
		return `sinks: [{name: k, type: kafka, kafka: {brokers: ["k:1"]` + opts + `}}]`
	}
	k := mustLoad(t, sink("")).Sinks[0].Kafka
	if k.MaxMessageBytes != 0 || k.DeadLetterTopic != "{topic}.quarantine" {
		t.Errorf("defaults: maxMessageBytes %d, deadLetterTopic %q; want 0 (what the brokers accept) and {topic}.quarantine", k.MaxMessageBytes, k.DeadLetterTopic)
	}
	k = mustLoad(t, sink(""), "KUBE_CDC_SINKS__0__KAFKA__MAXMESSAGEBYTES=2097152").Sinks[0].Kafka
	if k.MaxMessageBytes != 2<<20 {
		t.Errorf("maxMessageBytes from the environment: %d", k.MaxMessageBytes)
	}
	for _, tt := range []struct{ opts, key, want string }{
		{", maxMessageBytes: 100", "sinks[0].kafka.maxMessageBytes", "4096"},
		{", maxMessageBytes: -1", "sinks[0].kafka.maxMessageBytes", "got -1"},
		{", maxMessageBytes: lots", "sinks[0].kafka.maxMessageBytes", "expected a number"},
		{`, deadLetterTopic: "dlq.{kind}"`, "sinks[0].kafka.deadLetterTopic", "{kind}"},
		{`, deadLetterTopic: "{topic}"`, "sinks[0].kafka.deadLetterTopic", "data topic"},
	} {
		_, err := load(t, sink(tt.opts))
		if err == nil || !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error naming %s with %q", tt.opts, err, tt.key, tt.want)
		}
	}
}

// resources[].resync overrides pipeline.resync for its resource: unset takes the global
// interval, "0s" turns resyncs of that resource off while others keep theirs, and a
// negative or malformed interval names the key.
func TestAResourcesResyncOverridesTheGlobalOneAndZeroTurnsItOffForThatResourceOnly(t *testing.T) {
	c := mustLoad(t, `pipeline: {resync: 10m}
resources:
  - name: configmaps
  - {name: deployments, resync: 30s}
  - {name: pods, resync: 0s}
`)
	for i, want := range []time.Duration{10 * time.Minute, 30 * time.Second, 0} {
		if got := c.ResyncOf(i); got != want {
			t.Errorf("ResyncOf(%d) (%s) = %v, want %v", i, c.Resources[i].Name, got, want)
		}
	}
	c = mustLoad(t, "resources: [{name: configmaps}, {name: deployments, resync: 1h}]")
	if got := c.ResyncOf(0); got != 0 {
		t.Errorf("without pipeline.resync, a resource without its own resyncs every %v, want never (0)", got)
	}
	if got := c.ResyncOf(1); got != time.Hour {
		t.Errorf("without pipeline.resync, resources[1].resync 1h gives %v", got)
	}
	c = mustLoad(t, "resources: [{name: configmaps}]", "KUBE_CDC_RESOURCES__0__RESYNC=2m")
	if got := c.ResyncOf(0); got != 2*time.Minute {
		t.Errorf("resources[0].resync from the environment: %v, want 2m", got)
	}
	for _, tt := range []struct{ yaml, key, want string }{
		{"resources: [{name: configmaps}, {name: deployments, resync: -1s}]", "resources[1].resync", "must not be negative"},
		{"resources: [{name: configmaps, resync: often}]", "resources[0].resync", `expected a duration like "10s", got "often"`},
		{"pipeline: {resync: -5m}", "pipeline.resync", "must not be negative"},
	} {
		if _, err := load(t, tt.yaml); err == nil || !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error naming %s with %q", tt.yaml, err, tt.key, tt.want)
		}
	}
}

func TestTheAuditReceiverNeedsTLSAnAuthenticationAndAPostgresSink(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.pem")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	pg := "sinks: [{name: warehouse, type: postgres, postgres: {dsn: 'postgres://x@localhost/db'}}]\n"
	for _, tc := range []struct{ yaml, key string }{
		{pg + "audit: {webhook: {listen: ':8443'}}", "audit.webhook.tlsCertFile"},
		{pg + "audit: {webhook: {listen: ':8443', tlsCertFile: " + f + ", tlsKeyFile: " + f + "}}", "audit.webhook.clientCAFile"},
		{pg + "audit: {webhook: {listen: 'nohost', tlsCertFile: " + f + ", tlsKeyFile: " + f + ", tokenFile: " + f + "}}", "audit.webhook.listen"},
		{"audit: {webhook: {listen: ':8443', tlsCertFile: " + f + ", tlsKeyFile: " + f + ", tokenFile: " + f + "}}", "audit.sink"},
		{pg + "audit: {sink: other, webhook: {listen: ':8443', tlsCertFile: " + f + ", tlsKeyFile: " + f + ", tokenFile: " + f + "}}", "audit.sink"},
		{"sinks: [{name: out, type: stdout}, {name: warehouse, type: postgres, postgres: {dsn: 'postgres://x@localhost/db'}}]\n" +
			"audit: {sink: out, webhook: {listen: ':8443', tlsCertFile: " + f + ", tlsKeyFile: " + f + ", tokenFile: " + f + "}}", "audit.sink"},
		{pg + "audit: {sink: other, logFile: {path: " + f + "}}", "audit.sink"},
		{pg + "audit: {webhook: {maxBodyBytes: 0}}", "audit.webhook.maxBodyBytes"},
		{pg + "audit: {webhook: {maxInFlight: -1}}", "audit.webhook.maxInFlight"},
	} {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(LoadOptions{File: path, Environ: []string{}})
		var e *Error
		if !errors.As(err, &e) || e.Key != tc.key {
			t.Errorf("%s\n  error %v, want one about %s", tc.yaml, err, tc.key)
		}
	}
	path := filepath.Join(dir, "ok.yaml")
	ok := pg + "audit: {webhook: {listen: ':8443', tlsCertFile: " + f + ", tlsKeyFile: " + f + ", clientCAFile: " + f + "}}"
	if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(LoadOptions{File: path, Environ: []string{}}); err != nil {
		t.Errorf("a complete receiver config: %v", err)
	}
	c, err := Load(LoadOptions{File: path, Environ: []string{"KUBE_CDC_AUDIT__WEBHOOK__MAXBODYBYTES=10485760", "KUBE_CDC_AUDIT__WEBHOOK__MAXINFLIGHT=16"}})
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Audit.Webhook; w.MaxBodyBytes != 10<<20 || w.MaxInFlight != 16 {
		t.Errorf("maxBodyBytes and maxInFlight from the environment: %d, %d; want 10485760, 16", w.MaxBodyBytes, w.MaxInFlight)
	}
}

// sinks[].postgres.changedPaths is "write" unless set; "read" is taken; anything else
// names the key and the two values.
func TestPostgresChangedPathsIsWriteByDefaultAndAnythingButWriteOrReadIsRefused(t *testing.T) {
	sink := func(opts string) string {
		return `sinks: [{name: p, type: postgres, postgres: {dsn: 'postgres://x@localhost/db'` + opts + `}}]`
	}
	if got := mustLoad(t, sink("")).Sinks[0].Postgres.ChangedPaths; got != "write" {
		t.Errorf("default changedPaths %q, want write", got)
	}
	if got := mustLoad(t, sink(", changedPaths: read")).Sinks[0].Postgres.ChangedPaths; got != "read" {
		t.Errorf("changedPaths: read gave %q", got)
	}
	_, err := load(t, sink(", changedPaths: never"))
	if err == nil || !strings.Contains(err.Error(), "sinks[0].postgres.changedPaths") || !strings.Contains(err.Error(), `must be "write" or "read", got "never"`) {
		t.Errorf("changedPaths: never: %v", err)
	}
}

// sinks[].postgres.events stores events in their table for a day unless set; a negative
// retention names the key.
func TestPostgresEventsGoToTheirTableForADayByDefaultAndANegativeRetentionIsRefused(t *testing.T) {
	sink := func(opts string) string {
		return `sinks: [{name: p, type: postgres, postgres: {dsn: 'postgres://x@localhost/db'` + opts + `}}]`
	}
	if got := mustLoad(t, sink("")).Sinks[0].Postgres.Events; !got.Table || got.Retention != 24*time.Hour {
		t.Errorf("default events %+v, want table true, retention 24h", got)
	}
	if got := mustLoad(t, sink(", events: {table: false, retention: 0}")).Sinks[0].Postgres.Events; got.Table || got.Retention != 0 {
		t.Errorf("events: {table: false, retention: 0} gave %+v", got)
	}
	_, err := load(t, sink(", events: {retention: -1h}"))
	if err == nil || !strings.Contains(err.Error(), "sinks[0].postgres.events.retention") || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("events.retention: -1h: %v", err)
	}
}
