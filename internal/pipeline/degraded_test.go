package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Fault isolation (design §1.8): a resource whose stream fails with a Fault is degraded
// alone and streamed again later; these tests drive the retries on a fake clock.

var widgets = change.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true}

// testFault is a Fault, as source.Fault is; the tests mark it retry.Terminal as the
// source does, so a pipeline that does not know faults would stop on it.
type testFault struct{ reason string }

func (f testFault) Error() string       { return "resource widgets.example.com: " + f.reason }
func (f testFault) FaultReason() string { return f.reason }

func faultErr(reason string) error {
	return retry.Terminal(fmt.Errorf("stream: %w", testFault{reason}))
}

// byResource is a Sink keeping a memSink per resource, so that each resource has its own
// checkpoint and log.
type byResource struct {
	name string
	mu   sync.Mutex
	by   map[string]*memSink
}

func newByResource(name string) *byResource {
	return &byResource{name: name, by: map[string]*memSink{}}
}

func (s *byResource) of(res change.Resource) *memSink {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.by[res.ID()]
	if m == nil {
		m = newMemSink(s.name)
		s.by[res.ID()] = m
	}
	return m
}

func (s *byResource) Name() string { return s.name }
func (s *byResource) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	return s.of(res).Checkpoint(ctx, res)
}
func (s *byResource) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	return s.of(res).KeyIndex(ctx, res, fn)
}
func (s *byResource) Write(ctx context.Context, b change.Batch) error {
	return s.of(b.Resource).Write(ctx, b)
}
func (s *byResource) Close() error { return nil }

// rvs lists the RVs of res's changes in the order the sink got them.
func (s *byResource) rvs(res change.Resource) []change.RV {
	log, _ := s.of(res).snapshot()
	var out []change.RV
	for _, c := range log {
		out = append(out, c.RV)
	}
	return out
}

// attempts are scripted streams of one target, one per attempt: the n-th stream runs
// runs[n] (the last one for every attempt after the last).
type attempts struct {
	runs []func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error

	mu      sync.Mutex
	froms   []change.RV
	started chan int // each attempt's number (from 1), as it starts
}

func newAttempts(runs ...func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error) *attempts {
	return &attempts{runs: runs, started: make(chan int, 100)}
}

func (a *attempts) NewStream() Streamer {
	return streamFunc(func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
		a.mu.Lock()
		a.froms = append(a.froms, from)
		n := len(a.froms)
		a.mu.Unlock()
		a.started <- n
		return a.runs[min(n, len(a.runs))-1](ctx, from, emit)
	})
}

func (a *attempts) from() []change.RV {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.froms)
}

// await waits for attempt n to start.
func (a *attempts) await(t *testing.T, n int) {
	t.Helper()
	for {
		select {
		case got := <-a.started:
			if got >= n {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d did not start within 10s (attempts so far: %d)", n, len(a.from()))
		}
	}
}

type streamFunc func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error

func (f streamFunc) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	return f(ctx, from, emit)
}

// emitThen emits evs, then returns err (or, with a nil err, says the stream is
// established and waits for ctx).
func emitThen(err error, evs ...change.Event) func(context.Context, change.RV, func(context.Context, change.Event) error) error {
	return func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
		for _, ev := range evs {
			if emit(ctx, ev) != nil {
				return nil
			}
		}
		if err != nil {
			return err
		}
		if emit(ctx, change.Event{Type: change.Established, RV: from}) != nil {
			return nil
		}
		<-ctx.Done()
		return nil
	}
}

func widget(name string, rv change.RV) change.Change {
	c := obj(name, "u-"+name, rv)
	c.Resource = widgets
	return c
}

// degradedLog records Metrics.Degraded calls.
type degradedLog struct {
	nopMetrics
	mu    sync.Mutex
	calls []string
}

func (m *degradedLog) Degraded(resource, scope, reason, detail string, _ time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, resource+"="+reason)
}

func (m *degradedLog) got() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// backoffWaits learns when the pipeline waits out a degraded resource's backoff: it asks
// for Options.Nudge once the backoff's timer is set, so the test steps the clock then
// (not when any timer is set: a cursor sets and stops timers of its own).
type backoffWaits chan struct{}

func newBackoffWaits() backoffWaits { return make(backoffWaits, 100) }

// nudge is an Options.Nudge that tells w, and returns ch.
func (w backoffWaits) nudge(ch chan struct{}) func() <-chan struct{} {
	return func() <-chan struct{} {
		w <- struct{}{}
		return ch
	}
}

func (w backoffWaits) await(t *testing.T) {
	t.Helper()
	select {
	case <-w:
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline did not wait out a backoff within 10s")
	}
}

// readyErr is p.Ready()'s message, "" when ready.
func readyErr(p *Pipeline) string {
	if err := p.Ready(); err != nil {
		return err.Error()
	}
	return ""
}

func TestAFaultOfOneResourceDegradesItAloneAndItResumesFromItsCheckpointLosingNothing(t *testing.T) {
	s := newByResource("pg")
	s.of(cms).ckpt, s.of(widgets).ckpt = 5, 5
	clk := clocktesting.NewFakeClock(time.Now())
	m := &degradedLog{}
	// Widgets: 6 and 7 arrive, then the watch is forbidden; the first retry is forbidden
	// too; the second streams 8.
	ws := newAttempts(
		emitThen(faultErr("forbidden"), watched(change.OpCreate, widget("w", 6)), watched(change.OpUpdate, widget("w", 7))),
		emitThen(faultErr("forbidden")),
		emitThen(nil, watched(change.OpUpdate, widget("w", 8))),
	)
	// ConfigMaps stream whatever the test sends, all along.
	cmEvents := make(chan change.Event)
	cmStream := func() Streamer {
		return streamFunc(func(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
			if emit(ctx, change.Event{Type: change.Established, RV: from}) != nil {
				return nil
			}
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev := <-cmEvents:
					if emit(ctx, ev) != nil {
						return nil
					}
				}
			}
		})
	}
	waits := newBackoffWaits()
	p := newP(Options{BatchSize: 1, Clock: clk, Metrics: m, DegradedBackoff: retry.Backoff{Initial: time.Minute, Max: time.Hour},
		Nudge: waits.nudge(nil)},
		[]Sink{s}, []Fixture{{Resource: cms, NewStream: cmStream}, {Resource: widgets, NewStream: ws.NewStream}})
	stop := startRun(p)

	waitFor(t, func() bool { return strings.Contains(readyErr(p), "resource widgets.example.com degraded (forbidden)") })
	// Nothing stops for it: configmaps stream on while widgets waits out its backoff.
	for rv := change.RV(6); rv <= 8; rv++ {
		cmEvents <- watched(change.OpCreate, obj(fmt.Sprint("cm", rv), "u", rv))
	}
	waitFor(t, func() bool { return len(s.rvs(cms)) == 3 })
	if got := s.rvs(widgets); !slices.Equal(got, []change.RV{6, 7}) {
		t.Fatalf("widgets written before the fault: %v, want [6 7] (what the stream delivered is written)", got)
	}
	if n := len(ws.from()); n != 1 {
		t.Fatalf("%d widget attempts before the backoff passed on the clock, want 1", n)
	}

	waits.await(t)
	clk.Step(time.Minute) // the first backoff is 30 s to 1 min
	ws.await(t, 2)
	waits.await(t) // degraded again, for up to 2 minutes
	if got := readyErr(p); !strings.Contains(got, "degraded (forbidden)") {
		t.Errorf("Ready after the second fault: %q, want widgets still degraded", got)
	}
	clk.Step(2 * time.Minute)
	ws.await(t, 3)
	waitFor(t, func() bool { return readyErr(p) == "" })
	waitFor(t, func() bool { return len(s.rvs(widgets)) == 3 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got := s.rvs(widgets); !slices.Equal(got, []change.RV{6, 7, 8}) {
		t.Errorf("widgets written: %v, want [6 7 8]: each once, none lost", got)
	}
	if got := ws.from(); !slices.Equal(got, []change.RV{5, 7, 7}) {
		t.Errorf("widget streams started from %v, want 5 then the checkpoint 7 each retry", got)
	}
	if got := m.got(); !slices.Equal(got, []string{"widgets.example.com=forbidden", "widgets.example.com="}) {
		t.Errorf("Degraded calls %v, want one when it degraded (not again for the same reason) and one when it recovered", got)
	}
}

// The waits between attempts double from Initial and stay at Max: each lies in [d/2, d]
// for d = 1, 2, 4, 4, 4 s here.
func TestADegradedResourceIsRetriedWithABackoffCappedAtItsMax(t *testing.T) {
	s := newMemSink("pg")
	clk := clocktesting.NewFakeClock(time.Now())
	ws := newAttempts(emitThen(faultErr("not served")))
	waits := newBackoffWaits()
	p := newP(Options{Clock: clk, DegradedBackoff: retry.Backoff{Initial: time.Second, Max: 4 * time.Second},
		Nudge: waits.nudge(nil)},
		[]Sink{s}, []Fixture{{Resource: widgets, NewStream: ws.NewStream}})
	stop := startRun(p)
	defer stop()
	ws.await(t, 1)
	for n, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
		waits.await(t)
		clk.Step(d/2 - time.Millisecond)
		if !clk.HasWaiters() {
			t.Fatalf("retry %d came before %v (half its backoff of %v)", n+1, d/2, d)
		}
		clk.Step(d/2 + time.Millisecond)
		ws.await(t, n+2)
	}
}

// A Nudge (a CRD of the resource was created) ends the wait at once.
func TestANudgeRetriesADegradedResourceWithoutWaitingOutItsBackoff(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 5
	clk := clocktesting.NewFakeClock(time.Now())
	nudge := make(chan struct{})
	ws := newAttempts(emitThen(faultErr("not served")), emitThen(nil, watched(change.OpCreate, widget("w", 6))))
	waits := newBackoffWaits()
	p := newP(Options{Clock: clk, BatchSize: 1, DegradedBackoff: retry.Backoff{Initial: time.Hour, Max: time.Hour},
		Nudge: waits.nudge(nudge)},
		[]Sink{s}, []Fixture{{Resource: widgets, NewStream: ws.NewStream}})
	stop := startRun(p)
	defer stop()
	waits.await(t)
	if got := readyErr(p); !strings.Contains(got, "degraded (not served)") {
		t.Errorf("Ready: %q, want widgets degraded (not served)", got)
	}
	close(nudge)
	ws.await(t, 2)
	waitFor(t, func() bool { log, _ := s.snapshot(); return len(log) == 1 })
	waitFor(t, func() bool { return readyErr(p) == "" })
}

// A resource not served at start (its CRD not created yet) waits, named in Ready; once
// Resolve finds it, it is streamed, and its batches carry the resource as served then.
func TestAResourceNotServedAtStartWaitsAndIsStreamedAsServedOnceItIs(t *testing.T) {
	s := newByResource("pg")
	s.of(cms).ckpt = 5
	clk := clocktesting.NewFakeClock(time.Now())
	m := &degradedLog{}
	var mu sync.Mutex
	served := false
	waiting := change.Resource{Group: widgets.Group, Resource: widgets.Resource} // what the name tells
	resolve := func(context.Context) (change.Resource, error) {
		mu.Lock()
		defer mu.Unlock()
		if !served {
			return waiting, faultErr("not served")
		}
		r := widgets
		r.Version = "v2"
		return r, nil
	}
	ws := newAttempts(emitThen(nil, change.Event{Type: change.RelistBegin}, listed(widget("w", 9)), change.Event{Type: change.RelistEnd, RV: 10}))
	done := make(chan struct{})
	waits := newBackoffWaits()
	p := newP(Options{Clock: clk, BatchSize: 1, Metrics: m, DegradedBackoff: retry.Backoff{Initial: time.Second, Max: time.Second},
		Nudge: waits.nudge(nil)},
		[]Sink{s}, []Fixture{
			{Resource: cms, NewStream: func() Streamer {
				return &script{done: done, events: func(change.RV) []change.Event {
					return []change.Event{watched(change.OpCreate, obj("a", "u", 6))}
				}}
			}},
			{Resource: waiting, Resolve: resolve, NewStream: ws.NewStream},
		})
	stop := startRun(p)
	defer stop()
	<-done
	waitFor(t, func() bool { return len(s.rvs(cms)) == 1 })
	if got := readyErr(p); !strings.Contains(got, "resource widgets.example.com degraded (not served)") {
		t.Errorf("Ready: %q, want widgets named as not served", got)
	}
	// Retries while it is not served resolve again and stream nothing.
	for range 3 {
		waits.await(t)
		clk.Step(time.Second)
	}
	waits.await(t) // the third retry failed too
	if n := len(ws.from()); n != 0 {
		t.Fatalf("%d streams of a resource not served, want none", n)
	}
	mu.Lock()
	served = true // its CRD is created
	mu.Unlock()
	clk.Step(time.Second)
	ws.await(t, 1)
	waitFor(t, func() bool { return readyErr(p) == "" })
	w := s.of(widgets)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.batches) == 0 || w.batches[0].Resource.Version != "v2" || w.batches[0].Changes[0].Key.Name != "w" {
		t.Fatalf("widget batches %+v, want w in the resource as served (v2)", w.batches)
	}
	if got := m.got(); !slices.Equal(got, []string{"widgets.example.com=not served", "widgets.example.com="}) {
		t.Errorf("Degraded calls %v, want not served once, then recovered", got)
	}
}

// A resource that streams again but where nothing changes is known to have recovered
// when the server accepts its watch (AcceptNotifier).
type acceptingStream struct{ accepted func() }

func (s *acceptingStream) NotifyAccepted(f func()) { s.accepted = f }
func (s *acceptingStream) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	s.accepted()
	if emit(ctx, change.Event{Type: change.Established, RV: from}) != nil {
		return nil
	}
	<-ctx.Done()
	return nil
}

func TestAResourceWhoseWatchIsAcceptedAgainRecoversWithoutAnyChange(t *testing.T) {
	s := newMemSink("pg")
	s.ckpt = 5
	clk := clocktesting.NewFakeClock(time.Now())
	n := 0
	waits := newBackoffWaits()
	p := newP(Options{Clock: clk, DegradedBackoff: retry.Backoff{Initial: time.Second, Max: time.Second}, Nudge: waits.nudge(nil)},
		[]Sink{s}, []Fixture{{Resource: widgets, NewStream: func() Streamer {
			if n++; n == 1 {
				return streamFunc(emitThen(faultErr("forbidden")))
			}
			return &acceptingStream{}
		}}})
	stop := startRun(p)
	defer stop()
	waits.await(t)
	if got := readyErr(p); !strings.Contains(got, "degraded (forbidden)") {
		t.Errorf("Ready: %q, want widgets degraded (forbidden)", got)
	}
	clk.Step(time.Second)
	waitFor(t, func() bool { return readyErr(p) == "" })
}

// Only a Fault is the resource's alone: a stream's other terminal errors (a config error
// such as Secrets without a digest key) still stop kube-cdc.
func TestAStreamErrorThatIsNoFaultStillStopsThePipeline(t *testing.T) {
	errConfig := retry.Terminal(errors.New("no digest key"))
	p := newP(Options{}, []Sink{newMemSink("pg")}, []Fixture{
		{Resource: widgets, NewStream: func() Streamer { return streamFunc(emitThen(errConfig)) }},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Run(ctx); !errors.Is(err, errConfig) {
		t.Fatalf("Run = %v, want the stream's error", err)
	}
}

// A sink's terminal error met while writing what the failed stream had delivered stops
// the pipeline: the Fault does not hide it.
func TestASinkErrorWhileWritingWhatAFailedStreamDeliveredStillStopsThePipeline(t *testing.T) {
	s := &failSink{memSink: newMemSink("pg")}
	p := newP(Options{MaxWait: time.Hour}, []Sink{s}, []Fixture{{Resource: widgets, NewStream: func() Streamer {
		return streamFunc(emitThen(faultErr("forbidden"), watched(change.OpCreate, widget("w", 6))))
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Run(ctx); !errors.Is(err, errAuth) {
		t.Fatalf("Run = %v, want the sink's terminal error", err)
	}
}
