package resolved

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Op is the "op" of a resolved record or line, beside the envelope's c, u, d and r.
const Op = "resolved"

// Watermark says that a sink holds every change of Resource (its Scope) up to RV in Epoch.
type Watermark struct {
	Cluster  string
	Sink     string
	Resource change.Resource
	RV       change.RV
	Epoch    int
	// Time is when the sink committed the watermark: at Time, the sink held every change
	// up to RV. It is not the time the cluster made the change at RV.
	Time time.Time
}

// Key names the watermark's stream, unique across clusters, sinks and scopes:
// "cluster/sink/resource" with the resource's ID ("deployments.apps"), and "/scope" when
// the resource is configured in scopes. It is the Kafka record key, so compaction keeps
// the newest watermark of each.
func (w Watermark) Key() string {
	k := w.Cluster + "/" + w.Sink + "/" + w.Resource.ID()
	if w.Resource.Scope != "" {
		k += "/" + w.Resource.Scope
	}
	return k
}

// Append appends w's JSON (see the package documentation) to dst. resolvedRV is a string,
// as the envelope's source.resourceVersion, so consumers with 53-bit numbers compare it
// exactly; time is RFC 3339 in UTC with milliseconds.
func Append(dst []byte, w Watermark) []byte {
	dst = append(dst, `{"op":"`+Op+`","cluster":`...)
	dst = appendString(dst, w.Cluster)
	dst = append(dst, `,"sink":`...)
	dst = appendString(dst, w.Sink)
	dst = append(dst, `,"group":`...)
	dst = appendString(dst, w.Resource.Group)
	dst = append(dst, `,"resource":`...)
	dst = appendString(dst, w.Resource.Resource)
	dst = append(dst, `,"scope":`...)
	dst = appendString(dst, w.Resource.Scope)
	dst = append(dst, `,"resolvedRV":"`...)
	dst = strconv.AppendUint(dst, uint64(w.RV), 10)
	dst = append(dst, `","epoch":`...)
	dst = strconv.AppendInt(dst, int64(w.Epoch), 10)
	dst = append(dst, `,"time":"`...)
	dst = w.Time.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	return append(dst, `"}`...)
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// Emitter keeps one sink's watermarks and emits those that moved, once per Interval.
// Its methods are safe for concurrent use: the pipeline's writes call Committed while
// Run emits.
type Emitter struct {
	Cluster, Sink string
	// Interval is the time between emissions; Run does nothing when it is 0 or less.
	Interval time.Duration
	// Emit writes watermarks durably (acknowledged, printed), in order; on error none of
	// them counts as emitted, and they are emitted again (or newer ones) at the next tick.
	Emit  func(ctx context.Context, ws []Watermark) error
	Log   *slog.Logger     // default: discard
	Clock clock.WithTicker // default: the real clock

	mu    sync.Mutex
	marks map[string]*mark
	// failing is set while emissions fail, so that a broker down logs once, not at every tick.
	failing bool
}

type mark struct {
	committed Watermark
	emitted   Watermark // the last one emitted; zero when none
}

func (e *Emitter) clock() clock.WithTicker {
	if e.Clock == nil {
		return clock.RealClock{}
	}
	return e.Clock
}

// Committed records b's checkpoint as its resource's watermark. Call it only once b is
// durable and its checkpoint committed. A checkpoint at or below the watermark held, in
// (epoch, RV) order, is ignored (a replayed batch); a later epoch replaces a higher RV.
func (e *Emitter) Committed(b change.Batch) {
	w := Watermark{Cluster: e.Cluster, Sink: e.Sink, Resource: b.Resource, RV: b.Checkpoint, Epoch: b.Epoch, Time: e.clock().Now()}
	key := w.Key()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.marks == nil {
		e.marks = map[string]*mark{}
	}
	m, ok := e.marks[key]
	switch {
	case !ok:
		e.marks[key] = &mark{committed: w}
	case w.Version().Compare(m.committed.Version()) > 0:
		m.committed = w
	case w.Version() == m.committed.Version():
		m.committed.Time = w.Time // still true, and known later
	}
}

// Version is the watermark's position: (Epoch, RV).
func (w Watermark) Version() change.Version { return change.Version{Epoch: w.Epoch, RV: w.RV} }

// Due returns the watermarks that moved since they were last emitted, ordered by key.
func (e *Emitter) Due() []Watermark {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Watermark
	for _, m := range e.marks {
		if m.committed.RV > 0 && m.committed.Version().Compare(m.emitted.Version()) > 0 {
			out = append(out, m.committed)
		}
	}
	slices.SortFunc(out, func(a, b Watermark) int {
		switch ka, kb := a.Key(), b.Key(); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return out
}

// Flush emits what is due now.
func (e *Emitter) Flush(ctx context.Context) error {
	ws := e.Due()
	if len(ws) == 0 {
		return nil
	}
	if err := e.Emit(ctx, ws); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range ws {
		if m := e.marks[w.Key()]; m != nil && w.Version().Compare(m.emitted.Version()) > 0 {
			m.emitted = w
		}
	}
	return nil
}

// Run flushes every Interval until ctx ends. A failed emission is logged at warn (once
// until one succeeds again) and tried again at the next tick.
func (e *Emitter) Run(ctx context.Context) {
	if e.Interval <= 0 {
		return
	}
	log := e.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := e.clock().NewTicker(e.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		err := e.Flush(ctx)
		e.mu.Lock()
		was := e.failing
		e.failing = err != nil
		e.mu.Unlock()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !was:
			log.Warn("cannot emit resolved watermarks; trying again at every interval", "sink", e.Sink, "interval", e.Interval.String(), "error", err)
		case err == nil && was:
			log.Info("resolved watermarks are emitted again", "sink", e.Sink)
		}
	}
}

// Start runs the emitter in a goroutine of its own and returns its stop: stop ends Run,
// waits for it, and flushes the watermarks of the last batches within ctx, so that a
// clean shutdown leaves them current; it returns that flush's error.
func (e *Emitter) Start() (stop func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	return func(fctx context.Context) error {
		cancel()
		<-done
		return e.Flush(fctx)
	}
}
