package source_test

// The stream tests run against one etcd and kube-apiserver, started on first use and
// stopped after all tests. Each test works in namespaces of its own. Tests do not run in
// parallel: some restart the apiserver (ExpireHistory) or compact etcd, which would break
// another test's watch.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// podtemplates bypass the watch cache, so etcd compaction alone (no apiserver restart)
// expires their continue tokens and their watches' history. Only these tests use them.
var kubeOptions = testenv.KubeOptions{WatchCacheSizes: []string{"podtemplates#0"}}

var shared struct {
	once sync.Once
	kube *testenv.Kube
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.kube != nil {
		shared.kube.Stop()
	}
	os.Exit(code)
}

// env is one test's view of the shared apiserver: a namespace, admin clients whose every
// request is logged, and defaults for the streams it starts.
type env struct {
	t        *testing.T
	ctx      context.Context
	kube     *testenv.Kube
	ns       string
	requests *requestLog
	clients  *source.Clients
}

// newEnv starts (once) the shared Kube and gives the test a namespace and a deadline.
func newEnv(t *testing.T, timeout time.Duration) *env {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.kube, shared.err = testenv.StartKube(ctx, kubeOptions)
	})
	if shared.err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", shared.err)
	}
	k := shared.kube
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", testenv.Tail(k.LogPath(), 30))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, kube: k, requests: &requestLog{}}
	e.ns = e.namespace()
	e.clients = e.clientsFor(k.Config, e.requests)
	return e
}

// namespace creates a namespace for the test. It is never deleted: without a namespace
// controller it would stay Terminating, and the Kube goes away after the tests.
func (e *env) namespace() string {
	e.t.Helper()
	ns, err := e.kube.Clientset().CoreV1().Namespaces().Create(e.ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "src-"}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// clientsFor builds source clients for cfg whose requests go through log.
func (e *env) clientsFor(cfg *rest.Config, log *requestLog) *source.Clients {
	e.t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(log.wrap)
	c, err := source.NewClients(cfg, source.ClientOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// target resolves one spec through discovery, as the daemon does.
func (e *env) target(spec source.Spec) source.Target {
	e.t.Helper()
	targets, err := source.Resolve(e.clients.Discovery, []source.Spec{spec})
	if err != nil {
		e.t.Fatal(err)
	}
	return targets[0]
}

// configMaps is the target "every configmap in the test's namespace".
func (e *env) configMaps() source.Target {
	return e.target(source.Spec{Name: "configmaps", Namespaces: []string{e.ns}})
}

// stream is a Stream of tg on the test's clients with quick backoffs.
func (e *env) stream(tg source.Target) *source.Stream {
	return &source.Stream{
		Clients:  e.clients,
		Target:   tg,
		Backoff:  retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Log:      slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observer: &observer{},
	}
}

// run starts s.Run from `from` and records what it emits. The run is cancelled, and
// waited for, when the test ends.
func (e *env) run(s *source.Stream, from change.RV, r *recorder) *recorder {
	r, _ = e.start(s, from, r)
	return r
}

// start is run, and also returns the cancel that stops the run before the test ends
// (r.wait then returns what Run returned).
func (e *env) start(s *source.Stream, from change.RV, r *recorder) (*recorder, context.CancelFunc) {
	if r == nil {
		r = &recorder{}
	}
	r.init()
	ctx, cancel := context.WithCancel(e.ctx)
	go func() {
		err := s.Run(ctx, from, r.emit)
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(r.done)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r, cancel
}

// configMap creates a configmap in namespace ns (the test's when empty).
func (e *env) configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	e.t.Helper()
	if ns == "" {
		ns = e.ns
	}
	cm, err := e.kube.Clientset().CoreV1().ConfigMaps(ns).Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Data:       map[string]string{"v": "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

// touch changes configmap ns/name's data to v and returns its new RV.
func (e *env) touch(ns, name, v string) change.RV {
	e.t.Helper()
	if ns == "" {
		ns = e.ns
	}
	cms := e.kube.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	if cm, err = cms.Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("update configmap %s/%s: %v", ns, name, err)
	}
	return parseRV(e.t, cm.ResourceVersion)
}

// listRV is the RV of a LIST of the test's configmaps: a point to start a watch from.
func (e *env) listRV() change.RV {
	e.t.Helper()
	list, err := e.kube.Clientset().CoreV1().ConfigMaps(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return parseRV(e.t, list.ResourceVersion)
}

func parseRV(t *testing.T, s string) change.RV {
	t.Helper()
	rv, err := change.ParseRV(s)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// recorder keeps what a stream emits, for the test to wait on.
type recorder struct {
	// onEmit, when set, is called with each event after it is recorded and before emit
	// returns: a test blocks the stream there to act between two pages of a LIST.
	onEmit func(change.Event)

	mu     sync.Mutex
	events []change.Event // every event but Established
	// established is, for each Established event, the index in events it came before.
	established []int
	err         error         // Run's result, once done is closed
	notify      chan struct{} // a token after every event
	done        chan struct{} // closed when Run returns
}

func (r *recorder) init() {
	r.notify = make(chan struct{}, 1)
	r.done = make(chan struct{})
}

func (r *recorder) emit(_ context.Context, ev change.Event) error {
	r.mu.Lock()
	if ev.Type == change.Established {
		r.established = append(r.established, len(r.events))
	} else {
		r.events = append(r.events, ev)
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	if r.onEmit != nil {
		r.onEmit(ev)
	}
	return nil
}

// waitEstablished waits for the stream's first Established event and returns the index
// of the event it came before.
func (r *recorder) waitEstablished(e *env) int {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		est := slices.Clone(r.established)
		r.mu.Unlock()
		if len(est) > 0 {
			return est[0]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the stream was not established within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *recorder) snapshot() []change.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until cond holds for the events so far and returns them. It fails the
// test when the deadline passes or Run returns first.
func (r *recorder) waitFor(e *env, what string, cond func([]change.Event) bool) []change.Event {
	e.t.Helper()
	for {
		evs := r.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-r.notify:
		case <-r.done:
			if evs := r.snapshot(); cond(evs) {
				return evs
			}
			e.t.Fatalf("waiting for %s: Run returned %v; events: %s", what, r.err, describe(r.snapshot()))
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s: %v; events: %s", what, e.ctx.Err(), describe(r.snapshot()))
		}
	}
}

// wait waits for Run to return and returns its error.
func (r *recorder) wait(e *env) error {
	e.t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-e.ctx.Done():
		e.t.Fatalf("Run did not return: %v; events: %s", e.ctx.Err(), describe(r.snapshot()))
		return nil
	}
}

// count is the number of events of type typ.
func count(evs []change.Event, typ change.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// names lists the object names of the events of type typ, in order.
func names(evs []change.Event, typ change.EventType) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev.Change.Key.Name)
		}
	}
	return out
}

// has reports whether a Changed event with this op and name was emitted.
func has(evs []change.Event, op change.Op, name string) bool {
	for _, ev := range evs {
		if ev.Type == change.Changed && ev.Change.Op == op && ev.Change.Key.Name == name {
			return true
		}
	}
	return false
}

// last returns the last event of type typ, and whether there is one.
func last(evs []change.Event, typ change.EventType) (change.Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i], true
		}
	}
	return change.Event{}, false
}

// relistEnded reports whether the events hold n completed relists.
func relistEnded(n int) func([]change.Event) bool {
	return func(evs []change.Event) bool { return count(evs, change.RelistEnd) >= n }
}

func describe(evs []change.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(ev.Type.String())
		switch ev.Type {
		case change.Changed:
			fmt.Fprintf(&b, " %s %s@%d", ev.Change.Op, ev.Change.Key, ev.Change.RV)
		case change.Listed:
			fmt.Fprintf(&b, " %s@%d", ev.Change.Key, ev.Change.RV)
		case change.RelistEnd, change.Progress:
			fmt.Fprintf(&b, " @%d", ev.RV)
		}
	}
	if len(evs) == 0 {
		return "none"
	}
	return b.String()
}

// observer counts the stream's own events.
type observer struct {
	mu                           sync.Mutex
	relists, gones, watchRestart int
}

func (o *observer) Relist(string)       { o.mu.Lock(); o.relists++; o.mu.Unlock() }
func (o *observer) Gone(string)         { o.mu.Lock(); o.gones++; o.mu.Unlock() }
func (o *observer) WatchRestart(string) { o.mu.Lock(); o.watchRestart++; o.mu.Unlock() }

func (o *observer) restarts() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.watchRestart
}

func (o *observer) goneCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gones
}

// requestLog records every request the source's clients send, as the server answered it,
// and can answer some itself instead (to inject failures).
type requestLog struct {
	// fail, when set, may answer a request instead of the server: a non-zero status.
	fail func(*request) int

	mu   sync.Mutex
	reqs []*request
}

// request is one logged request.
type request struct {
	Method string
	Path   string
	Query  url.Values

	mu     sync.Mutex
	status int   // the response's status, 0 while there is none
	ended  bool  // the response body was read to its end
	err    error // what ended it: io.EOF when the server closed it cleanly
}

// Status is the response's status code, 0 while there is none.
func (r *request) Status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *request) setStatus(code int) {
	r.mu.Lock()
	r.status = code
	r.mu.Unlock()
}

// isList: a LIST of the resource, not counting the one-object probes before watches
// (isProbe).
func (r *request) isList(resource string) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/"+resource) && r.Query.Get("watch") == "" && !r.isProbe()
}

// isProbe: the LIST of at most one object the stream makes before each watch, to find a
// server behind the RV it would watch from (time travel). No test pages by one.
func (r *request) isProbe() bool {
	return r.Query.Get("watch") == "" && r.Query.Get("limit") == "1" && r.Query.Get("continue") == ""
}

func (r *request) isWatch(resource string) bool {
	return strings.HasSuffix(r.Path, "/"+resource) && r.Query.Get("watch") == "true"
}

// closedCleanly reports whether the server ended the response body with a clean EOF.
func (r *request) closedCleanly() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended && r.err == io.EOF
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r := &request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query()}
		l.mu.Lock()
		l.reqs = append(l.reqs, r)
		fail := l.fail
		l.mu.Unlock()
		if fail != nil {
			if code := fail(r); code != 0 {
				r.setStatus(code)
				body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test","reason":"InternalError","code":%d}`, code)
				return &http.Response{
					StatusCode: code,
					Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
					Header:     http.Header{"Content-Type": []string{"application/json"}},
					Body:       io.NopCloser(strings.NewReader(body)),
					Request:    req,
				}, nil
			}
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		r.setStatus(resp.StatusCode)
		resp.Body = &watchedBody{ReadCloser: resp.Body, r: r}
		return resp, nil
	})
}

// matching returns the logged requests for which f holds, in order.
func (l *requestLog) matching(f func(*request) bool) []*request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*request
	for _, r := range l.reqs {
		if f(r) {
			out = append(out, r)
		}
	}
	return out
}

func (l *requestLog) lists(resource string) []*request {
	return l.matching(func(r *request) bool { return r.isList(resource) })
}

func (l *requestLog) watches(resource string) []*request {
	return l.matching(func(r *request) bool { return r.isWatch(resource) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// watchedBody notes how a response body ended.
type watchedBody struct {
	io.ReadCloser
	r *request
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.r.mu.Lock()
		if !b.r.ended {
			b.r.ended, b.r.err = true, err
		}
		b.r.mu.Unlock()
	}
	return n, err
}

// testWriter sends the stream's log to the test's log, shown when the test fails.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it holds, failing the test at the deadline.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	for !cond() {
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s: %v", what, e.ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
