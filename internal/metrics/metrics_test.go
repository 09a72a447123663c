package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestSeriesHaveTheirLabelsAndValues(t *testing.T) {
	m := New()
	m.Changes("pg", "configmaps", "create", 3)
	m.Changes("pg", "configmaps", "create", 2)
	m.Changes("pg", "configmaps", "delete", 1)
	m.Changes("pg", "configmaps", "update", 0) // nothing: no series
	m.BatchWritten("pg", "configmaps", 5, 20*time.Millisecond)
	m.Lag("pg", "configmaps", 3*time.Millisecond)
	m.Lag("pg", "configmaps", 2*time.Minute) // beyond the last bucket: only +Inf
	m.Relist("deployments.apps")
	m.Gone("deployments.apps")
	m.Gone("deployments.apps")
	m.WatchRestart("configmaps")
	m.SinkError("stream", ClassRetryable)
	m.SinkError("stream", ClassTerminal)
	at := time.Unix(1_700_000_000, 500_000_000)
	m.Checkpoint("pg", "configmaps", 123456789, at)
	m.KeyIndexSize("pg", "configmaps", 20000)

	text := scrape(t, m.Handler())
	for _, want := range []string{
		`kube_cdc_changes_total{op="create",resource="configmaps",sink="pg"} 5`,
		`kube_cdc_changes_total{op="delete",resource="configmaps",sink="pg"} 1`,
		`kube_cdc_batch_size_sum{resource="configmaps",sink="pg"} 5`,
		`kube_cdc_batch_size_count{resource="configmaps",sink="pg"} 1`,
		`kube_cdc_sink_write_seconds_sum{resource="configmaps",sink="pg"} 0.02`,
		`kube_cdc_lag_seconds_bucket{resource="configmaps",sink="pg",le="0.001"} 0`,
		`kube_cdc_lag_seconds_bucket{resource="configmaps",sink="pg",le="0.005"} 1`,
		`kube_cdc_lag_seconds_bucket{resource="configmaps",sink="pg",le="60"} 1`,
		`kube_cdc_lag_seconds_bucket{resource="configmaps",sink="pg",le="+Inf"} 2`,
		`kube_cdc_relists_total{resource="deployments.apps"} 1`,
		`kube_cdc_gone_total{resource="deployments.apps"} 2`,
		`kube_cdc_watch_restarts_total{resource="configmaps"} 1`,
		`kube_cdc_sink_errors_total{class="retryable",sink="stream"} 1`,
		`kube_cdc_sink_errors_total{class="terminal",sink="stream"} 1`,
		`kube_cdc_checkpoint_resource_version{resource="configmaps",sink="pg"} 1.23456789e+08`,
		`kube_cdc_checkpoint_timestamp_seconds{resource="configmaps",sink="pg"} 1.7000000005e+09`,
		`kube_cdc_key_index_size{resource="configmaps",sink="pg"} 20000`,
		`# HELP kube_cdc_checkpoint_timestamp_seconds Unix time the checkpoint last advanced; checkpoint age is time() - this.`,
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(text, `op="update"`) {
		t.Error("Changes with n=0 created a series")
	}
	if n := testutil.CollectAndCount(m.changes); n != 2 {
		t.Errorf("%d changes series, want 2", n)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP kube_cdc_gone_total Watches answered 410 Gone (resource version too old), each forcing a relist.
# TYPE kube_cdc_gone_total counter
kube_cdc_gone_total{resource="deployments.apps"} 2
`), "kube_cdc_gone_total"); err != nil {
		t.Error(err)
	}
	if lint, err := testutil.GatherAndLint(m.Registry()); err != nil || len(lint) > 0 {
		t.Errorf("lint: %v %v", err, lint)
	}
}

func TestTheLagBucketsSpanOneMillisecondToOneMinute(t *testing.T) {
	m := New()
	m.Lag("s", "r", time.Second)
	text := scrape(t, m.Handler())
	var les []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "kube_cdc_lag_seconds_bucket{") {
			le := line[strings.Index(line, `le="`)+4:]
			les = append(les, le[:strings.Index(le, `"`)])
		}
	}
	if len(les) < 10 || les[0] != "0.001" || les[len(les)-2] != "60" || les[len(les)-1] != "+Inf" {
		t.Errorf("buckets %v", les)
	}
}

func TestANilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.Changes("s", "r", "create", 1)
	m.BatchWritten("s", "r", 1, time.Second)
	m.Lag("s", "r", time.Second)
	m.Relist("r")
	m.Gone("r")
	m.WatchRestart("r")
	m.SinkError("s", ClassTerminal)
	m.Checkpoint("s", "r", 1, time.Now())
	m.KeyIndexSize("s", "r", 1)
	if m.Registry() != nil {
		t.Error("nil Metrics has a registry")
	}
	if text := scrape(t, m.Handler()); strings.Contains(text, "kube_cdc_") {
		t.Errorf("nil Metrics serves %q", text)
	}
	rec := httptest.NewRecorder()
	Mux(nil, nil, false).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Errorf("/readyz with nil ready: %d", rec.Code)
	}
}

func TestTwoInstancesDoNotShareState(t *testing.T) {
	a, b := New(), New()
	a.Relist("pods")
	if strings.Contains(scrape(t, b.Handler()), "kube_cdc_relists_total{") {
		t.Error("a relist on one Metrics shows on another")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServeHealthzReadyzAndShutdown(t *testing.T) {
	m := New()
	m.Relist("pods")
	var synced atomic.Bool
	ready := func() error {
		if !synced.Load() {
			return errors.New("configmaps: not synced")
		}
		return nil
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, m, ready, false, nil) }()

	base := "http://" + addr
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "configmaps: not synced") {
		t.Errorf("/readyz before sync: %d %q", code, body)
	}
	synced.Store(true)
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz after sync: %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, `kube_cdc_relists_total{resource="pods"} 1`) {
		t.Errorf("/metrics: %d %q", code, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after ctx ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestServeWithoutAnAddressWaitsForTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "", New(), nil, false, nil) }()
	select {
	case err := <-done:
		t.Fatalf("returned %v before ctx ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestServeReportsABusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(t.Context(), ln.Addr().String(), New(), nil, false, nil)
	if err == nil || !strings.Contains(err.Error(), "metrics: listen on") {
		t.Errorf("got %v", err)
	}
	// kube-cdc run tells an address in use from other failures by it.
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("%v does not wrap EADDRINUSE", err)
	}
}

func TestProfilesAreServedOnlyWhenAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		rec := httptest.NewRecorder()
		Mux(New(), nil, on).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/goroutine?debug=1", nil))
		if got := rec.Code == 200 && strings.Contains(rec.Body.String(), "goroutine profile"); got != on {
			t.Errorf("profiling %v: /debug/pprof/goroutine answered %d", on, rec.Code)
		}
	}
}
