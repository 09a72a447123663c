package source_test

// The stream reads its watches itself (watchstream.go), in its own goroutine: these tests
// check what client-go's RetryWatcher and StreamWatcher used to do for it.

import (
	"bufio"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

func TestWatchesTheServerEndsByTheirTimeoutAreReopenedFromTheLastRVLosingAndRepeatingNothing(t *testing.T) {
	e := newEnv(t, 90*time.Second)
	for _, name := range []string{"a", "b", "c"} {
		e.configMap("", name, nil)
	}
	s := e.stream(e.configMaps())
	s.WatchTimeout = time.Second
	// A fake clock: a clean end taken for a failure would wait a backoff on it, forever.
	clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	s.Clock = clk
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))

	// Write one change at a time, each once the last was delivered, until the server has
	// ended four watches: changes land just before and just after each re-open.
	var written []change.RV
	ended := func() int {
		n := 0
		for _, w := range e.requests.watches("configmaps") {
			if w.closedCleanly() {
				n++
			}
		}
		return n
	}
	for i := 0; ended() < 4; i++ {
		rv := e.touch("", []string{"a", "b", "c"}[i%3], strconv.Itoa(i+1)) // each created with "0"
		written = append(written, rv)
		r.waitFor(e, "the change just written", func(evs []change.Event) bool {
			c, ok := last(evs, change.Changed)
			return ok && c.Change.RV == rv
		})
	}

	evs := r.snapshot()
	var delivered []change.RV
	for _, ev := range evs {
		if ev.Type == change.Changed {
			delivered = append(delivered, ev.Change.RV)
		}
	}
	if !slices.Equal(delivered, written) {
		t.Errorf("delivered %d changes %v, want the %d written %v, each once, in order", len(delivered), delivered, len(written), written)
	}
	if got := count(evs, change.RelistBegin); got != 1 {
		t.Errorf("%d relists, want only the first", got)
	}
	if clk.HasWaiters() {
		t.Error("the stream waits on its clock, as after a failure")
	}
	// One restart per re-open. The stream tells the observer as it re-opens, before it
	// paces the next request (up to a second), and the server ends a watch every second
	// or so: the count of watch requests may be one behind, so compare with the watches
	// that ended, once the observer has caught up (a double count never does).
	e.eventually("the observer to be told of each ended watch once", func() bool {
		return s.Observer.(*observer).restarts() == ended()
	})
	t.Logf("%d changes over %d watches", len(written), len(e.requests.watches("configmaps")))
}

func TestCancellingTheContextMidWatchReturnsAtOnceClosesTheResponseAndLeavesNoGoroutine(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.configMap("", "a", nil)
	bodies := &bodyLog{}
	cfg := rest.CopyConfig(e.kube.Config)
	cfg.Wrap(bodies.wrap)
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(cfg, e.requests)
	s.WatchTimeout = 10 * time.Minute // only the cancel can end this watch within the test

	r, cancel := e.start(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	e.configMap("", "b", nil)
	r.waitFor(e, "b from the watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })
	if n := bodies.open(); n != 1 {
		t.Fatalf("%d watch responses open, want 1", n)
	}

	cancel()
	if err := r.wait(e); err != nil {
		t.Errorf("Run returned %v after its context was cancelled, want nil", err)
	}
	if n := bodies.open(); n != 0 {
		t.Errorf("%d watch responses left open after Run returned", n)
	}
	// Whatever the stream started is gone: the HTTP transport keeps only its idle
	// connection's goroutines.
	var left string
	e.eventually("the stream's goroutines to end", func() bool {
		left = streamGoroutines()
		return left == ""
	})
	if left != "" {
		t.Errorf("goroutines left behind:\n%s", left)
	}
}

// The watch re-opens from the RV of the last event it delivered; whether it first waits a
// backoff depends on how the response ended.
func TestABrokenWatchResponseIsReopenedFromTheLastDeliveredRV(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tail    string // what the response carries after its first event, before it ends
		backoff bool
	}{
		{"an ERROR event that is not 410, after a backoff",
			`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected","reason":"InternalError","code":500}}` + "\n", true},
		{"bytes that are no JSON between events, after a backoff", "x\n", true},
		{"a stream cut inside an event, at once", `{"type":"MODIFIED","object":{"da`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 30*time.Second)
			tamper := &bodyLog{tail: tc.tail}
			cfg := rest.CopyConfig(e.kube.Config)
			cfg.Wrap(tamper.wrap)
			s := e.stream(e.configMaps())
			s.Clients = e.clientsFor(cfg, e.requests)
			s.WatchTimeout = 10 * time.Minute // no bookmark before the test's own event
			clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
			s.Clock = clk
			r := e.run(s, 0, nil)
			r.waitFor(e, "the relist", relistEnded(1))
			e.eventually("the watch to be accepted", func() bool {
				w := e.requests.watches("configmaps")
				return len(w) == 1 && w[0].Status() == http.StatusOK
			})
			x := e.configMap("", "x", nil)
			r.waitFor(e, "x from the first watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "x") })

			if tc.backoff {
				e.eventually("the stream to wait a backoff on its clock", clk.HasWaiters)
				if n := len(e.requests.watches("configmaps")); n != 1 {
					t.Fatalf("%d watch requests before the backoff ended, want 1", n)
				}
				clk.Step(s.Backoff.Max)
			}
			e.eventually("the watch to be re-opened", func() bool {
				w := e.requests.watches("configmaps")
				return len(w) == 2 && w[1].Status() == http.StatusOK
			})
			if got := e.requests.watches("configmaps")[1].Query.Get("resourceVersion"); got != x.ResourceVersion {
				t.Errorf("re-opened from RV %s, want x's %s, the last delivered", got, x.ResourceVersion)
			}
			e.touch("", "x", "1")
			evs := r.waitFor(e, "x's update", func(evs []change.Event) bool { return has(evs, change.OpUpdate, "x") })
			if got := keysOps(evs); !slices.Equal(got, []string{"create x", "update x"}) {
				t.Errorf("delivered %q, want x's create and update once each", got)
			}
			if got := s.Observer.(*observer).restarts(); got != 1 {
				t.Errorf("observer told of %d watch restarts, want 1", got)
			}
			if got := count(evs, change.RelistBegin); got != 1 {
				t.Errorf("%d relists, want only the first", got)
			}
		})
	}
}

func TestAWatchAnsweredWithAServerErrorIsRetriedAfterABackoffAndThenStreams(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	log := &requestLog{}
	log.fail = func(r *request) int {
		if r.isWatch("configmaps") && len(log.watches("configmaps")) <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(e.kube.Config, log)
	clk := testingclock.NewFakeClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	s.Clock = clk
	s.Backoff = retry.Backoff{Initial: time.Hour, Max: 4 * time.Hour}
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))

	// Two refusals: the second wait is the doubled one (1–2 h after 30–60 min).
	e.eventually("the first backoff", clk.HasWaiters)
	clk.Step(time.Hour)
	e.eventually("the second backoff", func() bool { return len(log.watches("configmaps")) == 2 && clk.HasWaiters() })
	clk.Step(59 * time.Minute)
	if !clk.HasWaiters() || len(log.watches("configmaps")) != 2 {
		t.Fatalf("the second backoff ended before an hour; %d watch requests", len(log.watches("configmaps")))
	}
	clk.Step(61 * time.Minute)
	e.eventually("the third watch to be accepted", func() bool {
		w := log.watches("configmaps")
		return len(w) == 3 && w[2].Status() == http.StatusOK
	})
	e.configMap("", "y", nil)
	r.waitFor(e, "y from the watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "y") })
	if got := s.Observer.(*observer).restarts(); got != 2 {
		t.Errorf("observer told of %d watch restarts, want 2", got)
	}
	// The refused requests carried the same RV (nothing was delivered in between).
	w := log.watches("configmaps")
	if w[0].Query.Get("resourceVersion") != w[2].Query.Get("resourceVersion") {
		t.Errorf("watches from RVs %s then %s, want the same", w[0].Query.Get("resourceVersion"), w[2].Query.Get("resourceVersion"))
	}
}

// streamGoroutines is the stacks of the goroutines that run the stream's code, client-go's
// or apimachinery's watch machinery, or an HTTP/2 request's own goroutine; "" when none.
func streamGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, marker := range []string{"kube-cdc/internal/source.", "k8s.io/client-go/tools/watch.", "k8s.io/apimachinery/pkg/watch.", "clientStream"} {
			if strings.Contains(g, marker) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// bodyLog counts the watch response bodies not yet closed and, with a tail, rewrites
// every watch response: its first line (one event), then tail, then the end.
type bodyLog struct {
	tail string

	mu     sync.Mutex
	opened int
}

func (l *bodyLog) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened
}

func (l *bodyLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || req.URL.Query().Get("watch") != "true" || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		l.mu.Lock()
		l.opened++
		tail := l.tail // only the first watch is rewritten
		l.tail, resp.Body = "", &countedBody{ReadCloser: resp.Body, l: l}
		l.mu.Unlock()
		if tail != "" {
			resp.Body = &firstLineThen{body: resp.Body, br: bufio.NewReader(resp.Body), tail: tail}
		}
		return resp, nil
	})
}

// countedBody tells its bodyLog when it is closed.
type countedBody struct {
	io.ReadCloser
	l    *bodyLog
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() {
		b.l.mu.Lock()
		b.l.opened--
		b.l.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

// firstLineThen reads the first line of body, then tail, then io.EOF.
type firstLineThen struct {
	body io.Closer
	br   *bufio.Reader
	tail string
	rest io.Reader
}

func (f *firstLineThen) Read(p []byte) (int, error) {
	if f.rest == nil {
		line, err := f.br.ReadBytes('\n')
		if err != nil {
			return 0, err
		}
		f.rest = io.MultiReader(strings.NewReader(string(line)), strings.NewReader(f.tail))
	}
	return f.rest.Read(p)
}

func (f *firstLineThen) Close() error { return f.body.Close() }

// Watches are read in the stream's goroutine only over HTTP/1.1 (HTTP/2 reads every frame
// in the transport's own goroutine); LISTs, and so relists, keep HTTP/2.
func TestWatchesSpeakHTTP1WhileListsKeepHTTP2(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.configMap("", "a", nil)
	protos := &protoLog{}
	cfg := rest.CopyConfig(e.kube.Config)
	cfg.Wrap(protos.wrap)
	s := e.stream(e.configMaps())
	s.Clients = e.clientsFor(cfg, e.requests)
	r := e.run(s, 0, nil)
	r.waitFor(e, "the relist", relistEnded(1))
	e.configMap("", "b", nil)
	r.waitFor(e, "b from the watch", func(evs []change.Event) bool { return has(evs, change.OpCreate, "b") })
	got := protos.seen()
	if !slices.Equal(got["watch"], []string{"HTTP/1.1"}) {
		t.Errorf("watches spoke %q, want HTTP/1.1", got["watch"])
	}
	if len(got["list"]) == 0 || slices.ContainsFunc(got["list"], func(p string) bool { return p != "HTTP/2.0" }) {
		t.Errorf("LISTs spoke %q, want HTTP/2.0", got["list"])
	}
}

// protoLog records the protocol of every response, by kind of request.
type protoLog struct {
	mu     sync.Mutex
	protos map[string][]string
}

func (l *protoLog) seen() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, v := range l.protos {
		out[k] = slices.Compact(slices.Clone(v))
	}
	return out
}

func (l *protoLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		kind := "list"
		if req.URL.Query().Get("watch") == "true" {
			kind = "watch"
		}
		l.mu.Lock()
		if l.protos == nil {
			l.protos = map[string][]string{}
		}
		l.protos[kind] = append(l.protos[kind], resp.Proto)
		l.mu.Unlock()
		return resp, nil
	})
}
