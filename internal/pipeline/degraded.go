package pipeline

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Fault is an error of one resource that time may heal: permissions granted again, a CRD
// created or recreated, a server fixed (docs/architecture.md, "Failing resources"). The
// pipeline degrades that resource alone — the others stream on — names it in Ready and
// Metrics.Degraded, and streams it again after a capped backoff (Options.DegradedBackoff),
// from its sinks' checkpoints. An error of a stream or of Target.Resolve is a Fault when
// it, or an error it wraps, has this method (source.Fault does).
type Fault interface {
	error
	// FaultReason is short and stable: "forbidden", "not served", …
	FaultReason() string
}

func faultOf(err error) (Fault, bool) {
	var f Fault
	ok := errors.As(err, &f)
	return f, ok
}

// resourceState is one target's place in the pipeline: the cursors of its current
// attempt, and whether it is degraded.
type resourceState struct {
	t   Target
	res change.Resource // t's, as resolved at start: its name
	log *slog.Logger

	accepted atomic.Bool // the current attempt streams: an event came, or a request was accepted

	mu         sync.Mutex
	cursors    []*cursor // of the current attempt; fewer than the sinks while it starts
	reason     string    // the Fault's reason while degraded, else ""
	detail     string    // the Fault's error
	since      time.Time // degraded since
	acceptedAt time.Time // when the current attempt began to stream
}

// name is the resource's ID, with its scope when it has one.
func (st *resourceState) name() string {
	if st.res.Scope == "" {
		return st.res.ID()
	}
	return st.res.ID() + " (scope " + st.res.Scope + ")"
}

// begin starts an attempt: nothing streams yet.
func (st *resourceState) begin() {
	st.mu.Lock()
	st.cursors = nil
	st.acceptedAt = time.Time{}
	st.mu.Unlock()
	st.accepted.Store(false)
}

func (st *resourceState) setCursors(cs []*cursor) {
	st.mu.Lock()
	st.cursors = cs
	st.mu.Unlock()
}

// streaming records that the current attempt streams; a degraded resource has recovered.
// It is called for every event, so it costs an atomic load once the attempt streams.
func (st *resourceState) streaming(p *Pipeline) {
	if st.accepted.Load() || st.accepted.Swap(true) {
		return
	}
	now := p.opts.Clock.Now()
	st.mu.Lock()
	st.acceptedAt = now
	reason, since := st.reason, st.since
	st.reason, st.detail, st.since = "", "", time.Time{}
	st.mu.Unlock()
	if reason == "" {
		return
	}
	st.log.Info("resource recovered: streaming again", "scope", st.res.Scope, "was", reason,
		"degradedFor", now.Sub(since).Round(time.Second).String())
	p.opts.Metrics.Degraded(st.res.ID(), st.res.Scope, "", "", time.Time{})
}

// streamedFor is how long the attempt that just ended streamed (0 if it never did).
func (st *resourceState) streamedFor(clk clock.PassiveClock) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.acceptedAt.IsZero() {
		return 0
	}
	return clk.Since(st.acceptedAt)
}

// degrade records f as the reason the resource does not stream; it is tried again in
// retryIn. The first failure, and every change of reason, is a warning; a retry that
// fails the same way is logged at debug level only.
func (p *Pipeline) degrade(st *resourceState, f Fault, retryIn time.Duration) {
	now := p.opts.Clock.Now()
	reason, detail := f.FaultReason(), f.Error()
	st.mu.Lock()
	same := st.reason == reason
	st.reason, st.detail = reason, detail
	if st.since.IsZero() {
		st.since = now
	}
	since := st.since
	st.mu.Unlock()
	args := []any{"scope", st.res.Scope, "reason", reason, "retryIn", retryIn.Round(time.Millisecond).String(), "error", detail}
	if same {
		st.log.Debug("resource still degraded", args...)
		return
	}
	st.log.Warn("resource degraded: it does not stream until this heals; the other resources stream on", args...)
	p.opts.Metrics.Degraded(st.res.ID(), st.res.Scope, reason, detail, since)
}
