package config

import (
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// Config is the whole configuration. config.example.yaml at the repository root documents
// every key; the defaults below are filled by Load.
type Config struct {
	// Cluster is recorded with every change, so several clusters can share one database.
	// Default "default".
	Cluster        string         `koanf:"cluster"`
	Kubernetes     Kubernetes     `koanf:"kubernetes"`
	Resources      []Resource     `koanf:"resources"` // default DefaultResources()
	Transforms     Transforms     `koanf:"transforms"`
	Pipeline       Pipeline       `koanf:"pipeline"`
	Sinks          []Sink         `koanf:"sinks"` // default one stdout sink named "stdout"
	Metrics        Metrics        `koanf:"metrics"`
	Log            Log            `koanf:"log"`
	LeaderElection LeaderElection `koanf:"leaderElection"`
	UI             UI             `koanf:"ui"`
	Audit          Audit          `koanf:"audit"` // the audit receiver (audit.go); off by default

	// origins says which layer set a key outside the lists, by its path
	// ("transforms.digestKey"): the file's name or an environment variable's. Load fills
	// it for messages about keys that conflict (named), whose keys no flag sets; nil when
	// neither layer set any.
	origins map[string]string
}

// named is key as a message about a conflict names it: with the layer that set it, as
// "transforms.digestKey (from KUBE_CDC_TRANSFORMS__DIGESTKEY)", when Load knows it.
func (c *Config) named(key string) string {
	if o, ok := c.origins[key]; ok {
		return key + " (from " + o + ")"
	}
	return key
}

// Kubernetes says how to reach the apiserver.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file. Default "": in-cluster, then $KUBECONFIG, then
	// ~/.kube/config.
	Kubeconfig string `koanf:"kubeconfig"`
	// Context in the kubeconfig. Default "": its current context.
	Context string  `koanf:"context"`
	QPS     float32 `koanf:"qps"`   // client-side rate limit, default 50
	Burst   int     `koanf:"burst"` // default 100
	// Compression asks the apiserver for gzip. Default false: gzip costs more CPU than it
	// saves on a fast network (docs/contract.md, "Performance notes").
	Compression bool `koanf:"compression"`
	// PageSize is the LIST page size (limit). Default 500.
	PageSize int64 `koanf:"pageSize"`
	// ListMode says how a relist reads a collection: auto (a streaming list where the
	// server supports it, found out once per resource, else a paged LIST), stream
	// (WatchList only; a server without it is an error) or paged. Default auto, as
	// client-go's reflector: no copy of the collection held by the apiserver, no more CPU
	// than paged (docs/benchmarks.md, "Issue 24: streaming lists by default").
	ListMode string `koanf:"listMode"`
	// RelistJitter: after 410 Gone (or a time travel) each resource waits a random delay
	// up to this long before it relists, so that an apiserver restart does not make every
	// resource LIST at once. Default 5s; 0 relists at once.
	RelistJitter time.Duration `koanf:"relistJitter"`
	// AccessCheckInterval: this often the daemon asks the apiserver (two
	// SelfSubjectAccessReviews per resource and scope) whether it may still list and
	// watch each resource it streams. The apiserver asks RBAC only when a watch opens, so
	// a revoked permission shows otherwise only at the next re-watch (5–10 minutes later),
	// when the resource degrades. The leader asks as often whether it may use the signal
	// ConfigMap (internal/signal). Default 1m; 0 turns the check off.
	AccessCheckInterval time.Duration `koanf:"accessCheckInterval"`
}

// Resource is one resource to stream.
type Resource struct {
	// Name is a plural ("configmaps"), plural.group ("deployments.apps") or
	// group/version/resource; CRDs too.
	Name string `koanf:"name"`
	// Namespaces limits the stream to these namespaces. Default empty: all of them.
	Namespaces    []string `koanf:"namespaces"`
	LabelSelector string   `koanf:"labelSelector"`
	FieldSelector string   `koanf:"fieldSelector"`
	// Resync overrides pipeline.resync for this resource ("0s" turns it off here). Unset
	// (nil): pipeline.resync.
	Resync *time.Duration `koanf:"resync"`
	// History says which changes of the resource are noise to a PostgreSQL sink's
	// changes table (internal/ignorepaths).
	History History `koanf:"history"`
}

// History is a resource's noise control: a change whose differences from the previous
// version all lie under ignored paths adds no changes row (objects, Kafka and stdout
// still get every version).
type History struct {
	// IgnorePaths are JSON pointers, "*" standing for one key or array index
	// ("/status/conditions/*/lastHeartbeatTime"), each covering what is below it. They
	// add to the resource's defaults (ignorepaths.Defaults: nodes, leases). Default [].
	IgnorePaths []string `koanf:"ignorePaths"`
	// DefaultIgnorePaths keeps the resource's default ignore paths; false turns them off.
	// Default true.
	DefaultIgnorePaths bool `koanf:"defaultIgnorePaths"`
}

// ResyncOf is resource i's resync interval: its own, else pipeline.resync; 0 for none.
func (c *Config) ResyncOf(i int) time.Duration {
	if r := c.Resources[i].Resync; r != nil {
		return *r
	}
	return c.Pipeline.Resync
}

// Transforms are applied to every object before any sink sees it.
type Transforms struct {
	// RedactSecrets replaces Secrets' data/stringData and the last-applied-configuration
	// annotation with keyed digests, "hmac-sha256:<hex>" (HMAC-SHA256 under the digest
	// key). Default true.
	RedactSecrets bool `koanf:"redactSecrets"`
	// DigestKey keys the Secret digests: the same key gives the same digests across
	// restarts and replicas, and without it a weak value cannot be found from its digest.
	// At least 16 bytes. Required while RedactSecrets is on and a resource is Secrets;
	// set it through KUBE_CDC_TRANSFORMS__DIGESTKEY, never in the file. Never logged nor
	// shown in errors. Default "".
	DigestKey string `koanf:"digestKey"`
	// DigestKeyFile is a file holding the digest key instead (a mounted Kubernetes
	// Secret); trailing newlines are not part of the key. Read by Validate. Default "".
	DigestKeyFile string `koanf:"digestKeyFile"`
	// Drop removes these JSON paths ("status", "metadata.annotations.foo") from every object.
	Drop []string `koanf:"drop"`

	fileKey []byte // DigestKeyFile's key, read by Validate
}

// MinDigestKeyBytes is the shortest digest key accepted.
const MinDigestKeyBytes = 16

// Key returns the digest key: DigestKey, or the key Validate read from DigestKeyFile;
// nil when there is none.
func (t *Transforms) Key() []byte {
	if t.DigestKey != "" {
		return []byte(t.DigestKey)
	}
	return t.fileKey
}

// Pipeline sizes the batches handed to the sinks.
type Pipeline struct {
	BatchSize  int           `koanf:"batchSize"`  // changes per batch, default 5000 (batchBytes usually cuts relist batches first)
	BatchBytes int           `koanf:"batchBytes"` // object bytes per batch, default 4 MiB
	MaxWait    time.Duration `koanf:"maxWait"`    // how long a batch waits to fill while the sink is idle, default 0 (adaptive: written at once)
	Buffer     int           `koanf:"buffer"`     // events queued between source and sinks, default 256 (writes are double-buffered, so a short queue suffices)
	// DetachAfter: with several sinks, one whose queue stays full this long is detached
	// from the shared stream and catches up later from its own checkpoint. Default 10s.
	DetachAfter time.Duration `koanf:"detachAfter"`
	// Resync relists every resource about this often (±15%) in the background: the
	// reconcile diff repairs drift (rows edited or deleted behind kube-cdc's back, missed
	// events), logs it at warn and counts it (kube_cdc_drift_total); an unchanged resource
	// writes nothing. resources[].resync overrides it. Default 0: off.
	Resync time.Duration `koanf:"resync"`
}

// Sink types.
const (
	SinkPostgres = "postgres"
	SinkKafka    = "kafka"
	SinkStdout   = "stdout"
)

// Sink is one configured sink. Exactly the options block of its Type may be set.
type Sink struct {
	Name     string            `koanf:"name"`
	Type     string            `koanf:"type"` // postgres | kafka | stdout
	Postgres *postgres.Options `koanf:"postgres"`
	Kafka    *kafka.Options    `koanf:"kafka"`
	Stdout   *StdoutOptions    `koanf:"stdout"`
	// Checkpoint is where a kafka or stdout sink keeps its checkpoints; PostgreSQL sinks
	// keep theirs in their own database. Default file (kube-cdc-state.db) for kafka, none
	// for stdout.
	Checkpoint checkpoint.Options `koanf:"checkpoint"`
}

// StdoutOptions configures the stdout sink.
type StdoutOptions struct {
	// ResolvedInterval is how often the sink prints a resolved line for each resource whose
	// watermark moved (docs/guarantees.md, "Resolved watermarks"). Default 0: none.
	ResolvedInterval time.Duration `koanf:"resolvedInterval"`
}

// DefaultMetricsAddress is metrics.address's default: loopback, so that a kube-cdc run on
// a workstation serves nothing to the network, on 9464, the port OpenTelemetry assigns to
// an application's own Prometheus endpoint. 9090 is Prometheus's own, 9091 and 9093 its
// Pushgateway's and Alertmanager's, 9092 Kafka's, and the exporters' registry fills
// 9100–9999.
const DefaultMetricsAddress = "127.0.0.1:9464"

// Metrics configures the /metrics, /healthz and /readyz endpoint.
type Metrics struct {
	// Address to listen on. Default DefaultMetricsAddress (this machine only); in a
	// container, ":9464" (every interface) for probes and scrapes. "" disables the endpoint.
	Address string `koanf:"address"`
	// Pprof also serves Go's /debug/pprof/ profiles on that address. Default false.
	Pprof bool `koanf:"pprof"`
}

// Log configures logging.
type Log struct {
	Level  string `koanf:"level"`  // debug | info | warn | error, default info
	Format string `koanf:"format"` // text | json, default text
	// ProgressInterval spaces the "relisting" lines each relist logs at info (objects
	// listed and written, rate, time left); default 5s.
	ProgressInterval time.Duration `koanf:"progressInterval"`
}

// LeaderElection lets standby replicas take over through a coordination.k8s.io Lease.
type LeaderElection struct {
	Enabled       bool          `koanf:"enabled"`       // default false
	Namespace     string        `koanf:"namespace"`     // of the Lease, default "default"
	Name          string        `koanf:"name"`          // of the Lease, default "kube-cdc"
	Identity      string        `koanf:"identity"`      // default the hostname
	LeaseDuration time.Duration `koanf:"leaseDuration"` // default 15s
	RenewDeadline time.Duration `koanf:"renewDeadline"` // default 10s
	RetryPeriod   time.Duration `koanf:"retryPeriod"`   // default 2s
}

// DefaultResources is what kube-cdc streams when no resources are configured: the
// workloads and the objects a CMDB usually wants. Not Secrets: those need a digest key.
func DefaultResources() []Resource {
	names := []string{
		"namespaces", "nodes", "pods", "services", "configmaps",
		"deployments.apps", "statefulsets.apps", "daemonsets.apps", "replicasets.apps",
		"jobs.batch", "cronjobs.batch", "ingresses.networking.k8s.io",
	}
	rs := make([]Resource, len(names))
	for i, n := range names {
		rs[i] = Resource{Name: n, History: History{IgnorePaths: []string{}, DefaultIgnorePaths: true}}
	}
	return rs
}

// NamesSecrets reports whether a resources[].name resolves to core/v1 Secrets, in any of
// the forms the resolver accepts: "secrets", "secret", "Secret", "v1/secrets",
// "/v1/secrets". Validate requires a digest key for those.
func NamesSecrets(name string) bool {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(name)), "/")
	switch len(parts) {
	case 1:
		return parts[0] == "secrets" || parts[0] == "secret"
	case 2: // version/resource in the core group
		return parts[1] == "secrets"
	case 3: // group/version/resource
		return parts[0] == "" && parts[2] == "secrets"
	}
	return false
}

// UI configures the read-only web timeline over a PostgreSQL sink (internal/read/ui), served
// by `kube-cdc ui` and, when Address is set, inside `run`.
type UI struct {
	// Address run serves the UI on. Default "" (off); `kube-cdc ui` listens on it too,
	// unless --listen says otherwise (default 127.0.0.1:9465).
	Address string `koanf:"address"`
	// Sink is the PostgreSQL sink whose schema the UI reads. Default: the first one.
	Sink string `koanf:"sink"`
	// Token, when set, is demanded of every request (bearer, or basic auth's password).
	// Better from the environment: KUBE_CDC_UI__TOKEN.
	Token string `koanf:"token"`
	// TrustedHeader names a header an authenticating proxy sets to the user; requests
	// without it are refused. Default "" (none).
	TrustedHeader string `koanf:"trustedHeader"`
}
