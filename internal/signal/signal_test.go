package signal_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// syncBuffer is what client-go logs, written from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type noRelists struct{}

func (noRelists) Relist(context.Context, []string, bool) ([]signal.Outcome, error) { return nil, nil }

// Issue 24 (3.2): a daemon's SIGTERM ends Serve's context. Its reflector's watch request
// used that context too, so the request could end ("context canceled") before the
// reflector was told to stop, and client-go logged "Warning: watch ended with error" on
// a clean shutdown — about one SIGTERM in six to fifteen. Many stops, each once the watch
// is open, must log nothing of the kind.
func TestStoppingServeOnceItsWatchIsOpenLogsNoWatchError(t *testing.T) {
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	opened := make(chan struct{}, 1)
	cfg := rest.CopyConfig(kube.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.URL.Query().Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/configmaps") {
				select {
				case opened <- struct{}{}:
				default:
				}
			}
			return resp, err
		})
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clientGo := &syncBuffer{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(clientGo)))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	const stops = 100
	for i := range stops {
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
		done := make(chan error, 1)
		go func() { done <- signal.Serve(ctx, cs, "default", "kube-cdc-signals-test", "test", noRelists{}, log) }()
		select {
		case <-opened:
		case err := <-done:
			cancel()
			t.Fatalf("stop %d: Serve returned before its watch opened: %v", i, err)
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatalf("stop %d: no watch opened within 30s", i)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("stop %d: Serve: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stop %d: Serve did not return within 30s of its context's end", i)
		}
		if out := clientGo.String(); strings.Contains(out, "watch ended") || strings.Contains(out, "context canceled") {
			t.Fatalf("stop %d of %d: client-go logged a watch error on a clean stop:\n%s", i+1, stops, out)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
