package metrics

import "github.com/prometheus/client_golang/prometheus"

// auditSeries are the audit receiver's series (internal/audit).
type auditSeries struct {
	requests *prometheus.CounterVec
	events   *prometheus.CounterVec
	join     *prometheus.GaugeVec
}

func newAuditSeries(reg *prometheus.Registry) auditSeries {
	a := auditSeries{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "audit_requests_total",
			Help: "Requests to the audit receiver, by outcome: stored (answered 200), unauthenticated (401), malformed (400), too_large (413: over audit.webhook.maxBodyBytes; the apiserver retries, then drops the batch), busy (503 with Retry-After: audit.webhook.maxInFlight requests under way; sent again), store_failed (503: the apiserver sends the batch again).",
		}, []string{"outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "audit_events_total",
			Help: "Audit events in the batches the receiver accepted, by what became of them: kept (a completed write, stored), refused (a write answered non-2xx: it changed nothing), dry_run, not_write (another stage or verb).",
		}, []string{"result"}),
		join: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "audit_join",
			Help: "The actor join over the last audit.statsWindow, counted every audit.statsInterval: events (received), changes (observed, not snapshots or inferred), exact, nearest, unmatched_changes, unmatched_events.",
		}, []string{"count"}),
	}
	reg.MustRegister(a.requests, a.events, a.join)
	return a
}

// AuditRequest counts one request to the audit receiver by outcome and, once accepted,
// its events by result (kept, refused, dry_run, not_write).
func (m *Metrics) AuditRequest(outcome string, events map[string]int) {
	if m == nil {
		return
	}
	m.audit.requests.WithLabelValues(outcome).Inc()
	for result, n := range events {
		m.audit.events.WithLabelValues(result).Add(float64(n))
	}
}

// AuditJoin sets the join's counts over the last window (see the help of audit_join).
func (m *Metrics) AuditJoin(counts map[string]int64) {
	if m == nil {
		return
	}
	for k, v := range counts {
		m.audit.join.WithLabelValues(k).Set(float64(v))
	}
}
