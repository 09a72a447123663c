package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"syscall"
	"time"
)

// shutdownTimeout bounds the graceful shutdown; scrapes are short, so a stuck one is not
// worth holding SIGTERM for.
const shutdownTimeout = 5 * time.Second

// Mux returns the handler Serve serves: /metrics, /healthz (200 "ok" while the process
// runs), /readyz (503 with ready's error until it returns nil, then 200 "ok"; a nil
// ready is always ready), /resources (JSON: the resources that do not stream now and
// why, those whose access was revoked under an open watch, and a signal ConfigMap the leader may not use, as ResourcesAnswer; what `kube-cdc status` asks a running daemon)
// and /checkpoints/{sink} (a copy of the sink's checkpoint file, to this machine only:
// ServeCheckpointFile). With profiling
// on (config metrics.pprof), also Go's /debug/pprof/ endpoints.
func Mux(m *Metrics, ready func() error, profiling bool) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /resources", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		a := ResourcesAnswer{Streaming: m.IsStreaming(), Degraded: m.Degradations(), AccessDenied: m.AccessDenials(),
			SignalsDenied: m.SignalsDenials()}
		if a.Degraded == nil {
			a.Degraded = []Degradation{}
		}
		if a.AccessDenied == nil {
			a.AccessDenied = []AccessDenial{}
		}
		json.NewEncoder(w).Encode(a)
	})
	mux.HandleFunc("GET /checkpoints/{sink}", m.serveCheckpointFile)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		io.WriteString(w, "ok\n")
	})
	return mux
}

// ResourcesAnswer is the body of /resources.
type ResourcesAnswer struct {
	// Streaming is false while the process does not run the pipeline (a standby waiting
	// for the lease, or still starting): then Degraded is empty because nothing streams
	// here, not because every resource does; the leader's endpoint knows.
	Streaming bool          `json:"streaming"`
	Degraded  []Degradation `json:"degraded"` // never null: empty when every resource streams
	// AccessDenied are the resources that stream but may no longer be listed or watched
	// (the periodic access review): their next re-watch or relist will fail. Never null.
	AccessDenied []AccessDenial `json:"accessDenied"`
	// SignalsDenied is the signal ConfigMap the leader may not read or write: resnapshot
	// requests are not answered. Null when they are.
	SignalsDenied *SignalsDenial `json:"signalsDenied"`
}

// Serve serves Mux(m, ready, profiling) on addr until ctx ends, then shuts down gracefully and
// returns nil. An addr of "" disables the endpoint: Serve then only waits for ctx, so it
// keeps the blocking Start(ctx) shape either way. A listener that cannot be opened is an
// error at once.
func Serve(ctx context.Context, addr string, m *Metrics, ready func() error, profiling bool, log *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := Listen(ctx, addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, m, ready, profiling, log)
}

// Listen opens the endpoint's listener on addr, for a caller that binds it apart from
// serving it (`kube-cdc run` binds an address another process holds only once it may
// stream). An address in use is an error that wraps syscall.EADDRINUSE.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeListener is Serve on a listener already open (Listen); it closes ln.
func ServeListener(ctx context.Context, ln net.Listener, m *Metrics, ready func() error, profiling bool, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr := ln.Addr().String()
	srv := &http.Server{
		Handler:           Mux(m, ready, profiling),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving /metrics, /healthz and /readyz", "address", addr)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		log.Warn("metrics endpoint did not shut down cleanly", "err", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve on %s: %w", addr, err)
	}
	return nil
}

// ListenWithin is Listen, trying again while addr is in use for up to grace (a process
// that took over from another binds the address its predecessor may still hold); an
// address still in use is InUse's error.
func ListenWithin(ctx context.Context, addr string, grace time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(grace)
	for {
		ln, err := Listen(ctx, addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !time.Now().Before(deadline) {
			return ln, InUse(err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// InUse names the fix for a metrics address another process holds (syscall.EADDRINUSE);
// other errors, and nil, it returns as they are.
func InUse(err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf(`%w; another process serves this address (another kube-cdc on this host?): give each process its own metrics.address (--metrics-address, KUBE_CDC_METRICS__ADDRESS), or "" to serve none`, err)
}

// TakeoverGrace is how long a process that took over (a writer lock, a lease) tries to
// bind the metrics address its predecessor may still hold.
const TakeoverGrace = 10 * time.Second

// ListenOrLater binds the endpoint before anything else, so that a standby (a
// leader-election standby, one with --wait) answers /healthz and /readyz while it waits,
// unless a kube-cdc answers at addr already (isKubeCDC): most likely the one this one
// would stand by for, on the same host with the same config. Failing on that would end a
// standby before it reaches the writer lock or the lease (and refuse a second run for the
// address rather than for the writer lock), so it returns later instead, which binds the
// address (ListenWithin grace) once this process may stream, when the other has let go of
// both. A holder that stops lets go of its address before its writer lock or its lease;
// one killed lets go of both at once: grace covers the latter. An address held by
// anything else is InUse's error, as it would fail the takeover.
func ListenOrLater(ctx context.Context, addr string, isKubeCDC func(context.Context, string) bool, grace time.Duration, log *slog.Logger) (now net.Listener, later func(context.Context) (net.Listener, error), err error) {
	ln, err := Listen(ctx, addr)
	switch {
	case err == nil:
		return ln, nil, nil
	case errors.Is(err, syscall.EADDRINUSE) && isKubeCDC(ctx, addr):
		log.Info("metrics address in use by a kube-cdc, perhaps the one this one stands by for; serving /metrics, /healthz and /readyz there once this process streams",
			"address", addr)
		return nil, func(ctx context.Context) (net.Listener, error) { return ListenWithin(ctx, addr, grace) }, nil
	}
	return nil, nil, InUse(err)
}
