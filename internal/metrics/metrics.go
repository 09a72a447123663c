package metrics

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

const namespace = "kube_cdc"

// Error classes of SinkError, as decided by internal/retry.
const (
	ClassRetryable = "retryable"
	ClassTerminal  = "terminal"
)

// Metrics holds every kube-cdc series on its own registry. The zero of *Metrics (nil) is
// a valid no-op.
type Metrics struct {
	reg *prometheus.Registry

	changes       *prometheus.CounterVec
	batchSize     *prometheus.HistogramVec
	writeSeconds  *prometheus.HistogramVec
	lag           *prometheus.HistogramVec
	relists       *prometheus.CounterVec
	gone          *prometheus.CounterVec
	watchRestarts *prometheus.CounterVec
	sinkErrors    *prometheus.CounterVec
	checkpointRV  *prometheus.GaugeVec
	checkpointTS  *prometheus.GaugeVec
	keyIndexSize  *prometheus.GaugeVec
	quarantined   *prometheus.CounterVec
	timeTravels   *prometheus.CounterVec
	drift         *prometheus.CounterVec
	writers       *prometheus.GaugeVec
	degraded      *prometheus.GaugeVec
	degradedCount prometheus.Gauge
	accessDenied  *prometheus.GaugeVec
	signalsDenied *prometheus.GaugeVec
	relistCauses  *prometheus.CounterVec
	relistListed  *prometheus.GaugeVec
	streamingG    prometheus.Gauge
	audit         auditSeries // the audit receiver's (audit.go)

	// historySkipped counts the versions a PostgreSQL sink left out of changes as noise
	// (resources[].history.ignorePaths).
	historySkipped *prometheus.CounterVec

	mu         sync.Mutex
	degradedBy map[[2]string]Degradation  // by resource and scope
	deniedBy   map[[2]string]AccessDenial // by resource and scope
	signals    *SignalsDenial             // nil: resnapshot requests are answered (or not served here)
	streaming  bool                       // the pipeline runs: this process leads, or needs no lease

	// perSink caches the series of each (sink, resource), so that a batch's bookkeeping
	// (written once or twice per change at a steady rate) does not hash and look up its
	// label values again each time.
	perSink sync.Map // [2]string → *sinkSeries

	checkpointFiles sync.Map // sink name → CheckpointFile (checkpoints.go)
}

// sinkSeries are the children of one (sink, resource) that every batch updates.
type sinkSeries struct {
	batchSize, writeSeconds, lag prometheus.Observer
	checkpointRV, checkpointTS   prometheus.Gauge
	// changes by op (create, update, delete), made on first use: a series appears only
	// once its op was counted.
	changes [3]atomic.Pointer[prometheus.Counter]
}

// series returns the cached children of (sink, resource).
func (m *Metrics) series(sink, resource string) *sinkSeries {
	k := [2]string{sink, resource}
	if v, ok := m.perSink.Load(k); ok {
		return v.(*sinkSeries)
	}
	v, _ := m.perSink.LoadOrStore(k, &sinkSeries{
		batchSize:    m.batchSize.WithLabelValues(sink, resource),
		writeSeconds: m.writeSeconds.WithLabelValues(sink, resource),
		lag:          m.lag.WithLabelValues(sink, resource),
		checkpointRV: m.checkpointRV.WithLabelValues(sink, resource),
		checkpointTS: m.checkpointTS.WithLabelValues(sink, resource),
	})
	return v.(*sinkSeries)
}

// Degradation is a resource (one scope of it) that does not stream, and why: what
// /resources serves and `kube-cdc status` shows.
type Degradation struct {
	Resource string    `json:"resource"`
	Scope    string    `json:"scope,omitempty"`
	Reason   string    `json:"reason"` // "forbidden", "not served", …
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
}

// AccessDenial is a resource (one scope of it) that streams but may no longer be listed
// or watched where it is read: its next re-watch or relist will fail. What /resources
// serves and `kube-cdc status` shows.
type AccessDenial struct {
	Resource string    `json:"resource"`
	Scope    string    `json:"scope,omitempty"`
	Denied   []string  `json:"denied"` // the verbs denied: list, watch
	Error    string    `json:"error"`  // what is denied, where, and what follows
	Since    time.Time `json:"since"`
}

// SignalsDenial is the signal ConfigMap the leader may not read or write, so resnapshot
// requests go unanswered (internal/signal's Server). What /resources serves and `kube-cdc
// status` shows.
type SignalsDenial struct {
	ConfigMap string    `json:"configMap"` // namespace/name
	Denied    []string  `json:"denied"`    // the verbs denied, of get, list, watch, update
	Error     string    `json:"error"`     // what is denied, where, what it disables and the grant
	Since     time.Time `json:"since"`
}

// New builds the series and registers them, with the Go runtime and process collectors,
// on a fresh registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	d := declare{m.reg}
	m.changes = d.counters("changes_total", []string{"sink", "resource", "op"},
		"Changes a sink acknowledged, by sink, resource and op (create, update, delete).")
	m.batchSize = d.histograms("batch_size", []string{"sink", "resource"},
		prometheus.ExponentialBuckets(1, 4, 8), // 1 … 16384
		"Changes per batch written to a sink.")
	m.writeSeconds = d.histograms("sink_write_seconds", []string{"sink", "resource"},
		prometheus.ExponentialBuckets(0.001, 2.5, 12), // 1ms … ~24s
		"Time a sink took to write and acknowledge one batch.")
	// 1ms … 60s: sub-10ms is normal for a healthy Postgres, tens of seconds means a
	// sink outage or a backlog.
	m.lag = d.histograms("lag_seconds", []string{"sink", "resource"},
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		"Time from kube-cdc receiving an event to the sink acknowledging it.")
	m.relists = d.counters("relists_total", []string{"resource"},
		"Full LISTs of a resource (at start without a checkpoint, after 410 Gone).")
	m.gone = d.counters("gone_total", []string{"resource"},
		"Watches answered 410 Gone (resource version too old), each forcing a relist.")
	m.watchRestarts = d.counters("watch_restarts_total", []string{"resource"},
		"Watches reopened from the last resource version (closed by the server, network errors).")
	m.sinkErrors = d.counters("sink_errors_total", []string{"sink", "class"},
		"Failed sink writes by class: retryable (written again after a backoff) or terminal (the sink stops).")
	m.checkpointRV = d.gauges("checkpoint_resource_version", []string{"sink", "resource"},
		"Resource version up to which the sink durably holds every change of the resource.")
	m.checkpointTS = d.gauges("checkpoint_timestamp_seconds", []string{"sink", "resource"},
		"Unix time the checkpoint last advanced; checkpoint age is time() - this. Bookmarks advance it on a quiet resource.")
	m.keyIndexSize = d.gauges("key_index_size", []string{"sink", "resource"},
		"Live objects in the key index the reconcile diff compares a relist against.")

	m.historySkipped = d.counters("history_skipped_total", []string{"sink", "resource"},
		"Changes a PostgreSQL sink wrote to objects but not to changes: only ignored paths (resources[].history.ignorePaths) changed.")
	m.quarantined = d.counters("quarantined_total", []string{"sink", "resource"},
		"Changes a sink could not store (e.g. JSON PostgreSQL rejects) and put in quarantine instead; the stream went on.")

	m.timeTravels = d.counters("time_travels_total", []string{"sink", "resource", "reason"},
		"Relists that found the cluster behind what the sink holds (an etcd restore, a cluster rebuilt under the same name) and started a new epoch, by reason (list-below-checkpoint, object-went-back).")

	m.drift = d.counters("drift_total", []string{"sink", "resource", "kind"},
		"Objects a relist (a resync, a resnapshot, a restart) found the sink holding otherwise than the cluster, beyond what changed since the sink's checkpoint, and repaired, by kind: missing (the sink lacked it), extra (the sink held a deleted object; resync and resnapshot only), stale (an older version), edited (a row changed behind kube-cdc's back).")

	m.writers = d.gauges("concurrent_writers", []string{"sink"},
		"Other kube-cdc processes holding or waiting for the PostgreSQL sink's writer lock (database, schema, cluster and sink name): a --wait standby, or an old leader's lingering session.")

	m.degraded = d.gauges("resource_degraded", []string{"resource", "scope", "reason"},
		"1 while a resource (one scope of it) does not stream, with the reason (forbidden, unauthorized, not served, invalid resource version, discovery failed); the series goes away when it streams again. The other resources stream on.")
	m.degradedCount = d.gauge("degraded_resources",
		"Resources (scopes of them) that do not stream now; kube_cdc_resource_degraded names them.")
	m.degradedBy = map[[2]string]Degradation{}

	m.accessDenied = d.gauges("resource_access_denied", []string{"resource", "scope", "verb"},
		"1 while the periodic access review (kubernetes.accessCheckInterval) finds a verb a resource (one scope of it) is read with (list, watch) denied: it streams on until its watch is re-opened, which will then fail. The series goes away when the verb is allowed again.")
	m.deniedBy = map[[2]string]AccessDenial{}

	m.signalsDenied = d.gauges("signals_access_denied", []string{"configmap", "verb"},
		"1 while the leader may not use a verb (get, list, watch, update) on the signal ConfigMap (<leaderElection.name>-signals), by verb: resnapshot requests are not answered. Asked at start and every kubernetes.accessCheckInterval; the series goes away when the verb is allowed again.")

	m.relistCauses = d.counters("relist_reasons_total", []string{"resource", "reason", "mode"},
		"Relists by reason (start: no checkpoint; gone: 410 Gone, after a random delay up to kubernetes.relistJitter; time-travel) and how they read the collection (stream or paged).")
	m.relistListed = d.gauges("relist_listed_objects", []string{"resource"},
		"Objects the relist under way (or the last one) of a resource has listed so far.")

	m.streamingG = d.gauge("streaming",
		"1 while this process streams (it holds the lease, or runs without leader election), 0 while it starts or waits for the lease as a standby: across the replicas of one deployment, exactly one should be 1.")

	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.audit = newAuditSeries(m.reg)
	return m
}

// declare makes the series of one registry, each registered as it is made, under the
// kube_cdc_ prefix: the one place a series' options are written.
type declare struct{ reg *prometheus.Registry }

func (d declare) counters(name string, labels []string, help string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	d.reg.MustRegister(c)
	return c
}

func (d declare) gauges(name string, labels []string, help string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	d.reg.MustRegister(g)
	return g
}

func (d declare) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	d.reg.MustRegister(g)
	return g
}

func (d declare) histograms(name string, labels []string, buckets []float64, help string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	d.reg.MustRegister(h)
	return h
}

// Registry is the registry the series live on, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Changes counts n acknowledged changes of one op.
func (m *Metrics) Changes(sink, resource, op string, n int) {
	if m == nil || n <= 0 {
		return
	}
	i := slices.Index([]change.Op{change.OpCreate, change.OpUpdate, change.OpDelete}, change.Op(op))
	if i < 0 {
		m.changes.WithLabelValues(sink, resource, op).Add(float64(n))
		return
	}
	p := &m.series(sink, resource).changes[i]
	c := p.Load()
	if c == nil {
		cc := m.changes.WithLabelValues(sink, resource, op)
		c = &cc
		p.Store(c)
	}
	(*c).Add(float64(n))
}

// BatchWritten records one batch a sink acknowledged: its size and how long the write took.
func (m *Metrics) BatchWritten(sink, resource string, size int, d time.Duration) {
	if m == nil {
		return
	}
	ss := m.series(sink, resource)
	ss.batchSize.Observe(float64(size))
	ss.writeSeconds.Observe(d.Seconds())
}

// Lag records the time from receiving one event to the sink acknowledging it.
func (m *Metrics) Lag(sink, resource string, d time.Duration) {
	if m == nil {
		return
	}
	m.series(sink, resource).lag.Observe(d.Seconds())
}

// Relist counts one full LIST of resource.
func (m *Metrics) Relist(resource string) {
	if m == nil {
		return
	}
	m.relists.WithLabelValues(resource).Inc()
}

// RelistStarted counts one relist of resource by reason and mode
// (source.RelistObserver).
func (m *Metrics) RelistStarted(resource, reason, mode string) {
	if m == nil {
		return
	}
	m.relistCauses.WithLabelValues(resource, reason, mode).Inc()
}

// RelistListed records how many objects the relist under way of resource has listed.
func (m *Metrics) RelistListed(resource string, n int) {
	if m == nil {
		return
	}
	m.relistListed.WithLabelValues(resource).Set(float64(n))
}

// Gone counts one watch answered 410 Gone.
func (m *Metrics) Gone(resource string) {
	if m == nil {
		return
	}
	m.gone.WithLabelValues(resource).Inc()
}

// WatchRestart counts one watch reopened from the last resource version.
func (m *Metrics) WatchRestart(resource string) {
	if m == nil {
		return
	}
	m.watchRestarts.WithLabelValues(resource).Inc()
}

// SinkError counts one failed write; class is ClassRetryable or ClassTerminal.
func (m *Metrics) SinkError(sink, class string) {
	if m == nil {
		return
	}
	m.sinkErrors.WithLabelValues(sink, class).Inc()
}

// Checkpoint records that sink's checkpoint for resource advanced to rv at the given time.
func (m *Metrics) Checkpoint(sink, resource string, rv change.RV, at time.Time) {
	if m == nil {
		return
	}
	ss := m.series(sink, resource)
	ss.checkpointRV.Set(float64(rv))
	ss.checkpointTS.Set(float64(at.UnixNano()) / 1e9)
}

// KeyIndexSize records how many live objects the key index holds.
func (m *Metrics) KeyIndexSize(sink, resource string, n int) {
	if m == nil {
		return
	}
	m.keyIndexSize.WithLabelValues(sink, resource).Set(float64(n))
}

// Quarantined counts n changes of resource that sink put in quarantine.
func (m *Metrics) Quarantined(sink, resource string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.quarantined.WithLabelValues(sink, resource).Add(float64(n))
}

// HistorySkipped counts n changes of resource that sink left out of its history as noise.
func (m *Metrics) HistorySkipped(sink, resource string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.historySkipped.WithLabelValues(sink, resource).Add(float64(n))
}

// TimeTravel counts a time travel sink found in resource (pipeline.TimeTravelObserver).
func (m *Metrics) TimeTravel(sink, resource, reason string) {
	if m == nil {
		return
	}
	m.timeTravels.WithLabelValues(sink, resource, reason).Inc()
}

// Drift counts n objects of resource in which a relist found sink drifted, by kind
// (pipeline.DriftObserver).
func (m *Metrics) Drift(sink, resource, kind string, n int) {
	if m == nil {
		return
	}
	m.drift.WithLabelValues(sink, resource, kind).Add(float64(n))
}

// ConcurrentWriters records how many other processes hold or wait for sink's writer lock:
// 0 when this one is alone.
func (m *Metrics) ConcurrentWriters(sink string, others int) {
	if m == nil {
		return
	}
	m.writers.WithLabelValues(sink).Set(float64(others))
}

// Degraded records that resource (one scope of it) does not stream since `since`, for
// reason, with the error that says why; an empty reason records that it streams again.
func (m *Metrics) Degraded(resource, scope, reason, detail string, since time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{resource, scope}
	if old, ok := m.degradedBy[key]; ok {
		m.degraded.DeleteLabelValues(resource, scope, old.Reason)
		delete(m.degradedBy, key)
	}
	if reason != "" {
		m.degradedBy[key] = Degradation{Resource: resource, Scope: scope, Reason: reason, Error: detail, Since: since}
		m.degraded.WithLabelValues(resource, scope, reason).Set(1)
	}
	m.degradedCount.Set(float64(len(m.degradedBy)))
}

// AccessDenied records that the verbs denied may no longer be used on resource (one scope
// of it) since `since`, with the message that says so; no verbs records that every verb
// is allowed again. It is source.AccessCheck's Observer.
func (m *Metrics) AccessDenied(resource, scope string, denied []string, detail string, since time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{resource, scope}
	if old, ok := m.deniedBy[key]; ok {
		for _, verb := range old.Denied {
			m.accessDenied.DeleteLabelValues(resource, scope, verb)
		}
		delete(m.deniedBy, key)
	}
	if len(denied) == 0 {
		return
	}
	m.deniedBy[key] = AccessDenial{Resource: resource, Scope: scope, Denied: slices.Clone(denied), Error: detail, Since: since}
	for _, verb := range denied {
		m.accessDenied.WithLabelValues(resource, scope, verb).Set(1)
	}
}

// SignalsDenied records that the verbs denied may not be used on the signal ConfigMap
// (namespace/name) since `since`, with the message that says so; no verbs records that
// resnapshot requests are answered again. It is signal.Server's Observer.
func (m *Metrics) SignalsDenied(configMap string, denied []string, detail string, since time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.signals; old != nil {
		for _, verb := range old.Denied {
			m.signalsDenied.DeleteLabelValues(old.ConfigMap, verb)
		}
		m.signals = nil
	}
	if len(denied) == 0 {
		return
	}
	m.signals = &SignalsDenial{ConfigMap: configMap, Denied: slices.Clone(denied), Error: detail, Since: since}
	for _, verb := range denied {
		m.signalsDenied.WithLabelValues(configMap, verb).Set(1)
	}
}

// SignalsDenials is what SignalsDenied last recorded: nil when resnapshot requests are
// answered (or this process does not serve them).
func (m *Metrics) SignalsDenials() *SignalsDenial {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.signals == nil {
		return nil
	}
	d := *m.signals
	return &d
}

// AccessDenials are the resources that stream but whose next re-watch or relist will
// fail, by resource and scope. A resource that no longer streams is not among them: its
// Degradation says more.
func (m *Metrics) AccessDenials() []AccessDenial {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]AccessDenial, 0, len(m.deniedBy))
	for k, d := range m.deniedBy {
		if _, degraded := m.degradedBy[k]; !degraded {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b AccessDenial) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Scope, b.Scope))
	})
	return out
}

// Streaming records whether this process runs the pipeline now: a standby waiting for
// the lease, or a process still starting, does not, and so knows of no degraded
// resource (/resources says which it is).
func (m *Metrics) Streaming(on bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.streaming = on
	if on {
		m.streamingG.Set(1)
	} else {
		m.streamingG.Set(0)
	}
}

// IsStreaming reports what Streaming last recorded (false on a nil Metrics).
func (m *Metrics) IsStreaming() bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.streaming
}

// Degradations are the resources that do not stream now, by resource and scope.
func (m *Metrics) Degradations() []Degradation {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Degradation, 0, len(m.degradedBy))
	for _, d := range m.degradedBy {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Degradation) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Scope, b.Scope))
	})
	return out
}

// Handler serves the registry in the Prometheus exposition format. On a nil *Metrics it
// serves an empty page.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
