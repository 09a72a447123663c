package audit

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Store makes a batch of events durable: all of them, or an error. Storing an event
// again (same audit ID) must be harmless.
type Store interface {
	Store(ctx context.Context, events []Event) error
}

// Observer counts what the receiver does (internal/metrics implements it).
type Observer interface {
	// AuditRequest counts one request by outcome (Outcome*) and, when it was decoded, its
	// events by result: kept, refused, dry_run, not_write.
	AuditRequest(outcome string, events map[string]int)
}

// Outcomes of a request, as Observer counts them.
const (
	OutcomeStored          = "stored"
	OutcomeUnauthenticated = "unauthenticated"
	OutcomeMalformed       = "malformed"
	OutcomeStoreFailed     = "store_failed"
	// OutcomeTooLarge: a body over MaxBodyBytes, answered 413 unread (or read no further).
	OutcomeTooLarge = "too_large"
	// OutcomeBusy: MaxInFlight requests under way already, answered 503 with Retry-After.
	OutcomeBusy = "busy"
)

// DefaultMaxBodyBytes caps a request body. The apiserver's webhook backend sends up to
// 400 events a batch (--audit-webhook-batch-max-size); with its truncate backend on
// (--audit-webhook-truncate-enabled), a batch is at most 10 MiB plus a few hundred bytes
// and an event at most 100 KiB (--audit-webhook-truncate-max-batch-size and
// -max-event-size; k8s.io/apiserver pkg/server/options/audit.go, NewAuditTruncateOptions).
// Truncation is off by default, and then only the batch's event count bounds it: 32 MiB
// holds 400 events of 80 KiB each at level RequestResponse (objects of about 40 KiB).
const DefaultMaxBodyBytes = 32 << 20

// DefaultMaxInFlight is how many requests the receiver reads and stores at once.
const DefaultMaxInFlight = 4

// DefaultBodyTimeout bounds how long a request may take to send its body once admitted:
// the apiserver gives up on a webhook call after 30 s (k8s.io/apiserver pkg/util/webhook,
// defaultRequestTimeout) and sends the batch again.
const DefaultBodyTimeout = 30 * time.Second

// busyRetryAfter is the Retry-After of a 503 when MaxInFlight requests are under way:
// client-go (the apiserver's webhook client) waits that long and sends the batch again,
// up to 10 times, before its own backoff takes over.
const busyRetryAfter = "1"

// Receiver is the endpoint of the apiserver's audit webhook backend (batch mode): an
// EventList per POST (on any path), answered 200 once Store returned, 401 to a caller
// that is not authenticated, 400 to a body that is not an EventList (the apiserver would
// only send it again), 413 to a body over MaxBodyBytes (refused by its Content-Length
// before a byte of it is read, or once that many bytes have come), 503 when Store failed
// (the apiserver sends it again), and 503 with Retry-After when MaxInFlight requests are
// under way already. A body is decoded as it streams, one event at a time (Decode), so a
// request holds about its largest event in memory plus what is kept of each event (about
// 0.5 KB): the receiver's memory is bounded by MaxInFlight times that, never by the
// bodies' sizes.
type Receiver struct {
	// Addr to listen on (HTTPS).
	Addr string
	// CertFile and KeyFile are the serving certificate and key.
	CertFile, KeyFile string
	// ClientCAFile admits callers with a client certificate it signed; "" admits none.
	ClientCAFile string
	// Token admits callers sending "Authorization: Bearer <Token>"; "" admits none.
	Token string
	Store Store
	// Log: nil discards. Bodies are never logged.
	Log      *slog.Logger
	Observer Observer
	// MaxBodyBytes: default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInFlight: default DefaultMaxInFlight.
	MaxInFlight int
	// BodyTimeout: a request whose body has not all come this long after it was admitted
	// is dropped, freeing its place. Default DefaultBodyTimeout.
	BodyTimeout time.Duration

	slotsOnce sync.Once
	slots     *semaphore.Weighted
}

// TokenFromFile reads a bearer token file: its content without surrounding whitespace.
func TokenFromFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the audit webhook's token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the audit webhook's token file %s is empty", path)
	}
	return tok, nil
}

// TLSConfig loads the serving certificate and the client CA: what Listen serves with.
// `kube-cdc check` calls it to fail where run would.
func (r *Receiver) TLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("audit receiver: load the serving certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
	if r.ClientCAFile != "" {
		pem, err := os.ReadFile(r.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("audit receiver: read the client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("audit receiver: no certificate in the client CA file %s", r.ClientCAFile)
		}
		// A certificate is checked when sent; a caller without one may still bring the token.
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// Listen binds Addr and returns the TLS listener Serve takes.
func (r *Receiver) Listen(ctx context.Context) (net.Listener, error) {
	cfg, err := r.TLSConfig()
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", r.Addr)
	if err != nil {
		return nil, fmt.Errorf("audit receiver: listen on %s: %w", r.Addr, err)
	}
	return tls.NewListener(ln, cfg), nil
}

// Run listens on Addr and serves until ctx ends.
func (r *Receiver) Run(ctx context.Context) error {
	ln, err := r.Listen(ctx)
	if err != nil {
		return err
	}
	return r.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then lets the requests under way finish (up to 10 s:
// a batch not answered is sent again by the apiserver).
func (r *Receiver) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	r.log().Info("audit receiver listening", "address", ln.Addr().String())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("audit receiver: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("audit receiver: %w", err)
	}
	return nil
}

func (r *Receiver) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

func (r *Receiver) observe(outcome string, c *Counts) {
	if r.Observer == nil {
		return
	}
	var events map[string]int
	if c != nil {
		events = map[string]int{"kept": c.Kept, "refused": c.Refused, "dry_run": c.DryRun, "not_write": c.NotWrite}
	}
	r.Observer.AuditRequest(outcome, events)
}

// authenticated says how the caller proved who it is: "" when it did not.
func (r *Receiver) authenticated(req *http.Request) string {
	if r.ClientCAFile != "" && req.TLS != nil && len(req.TLS.VerifiedChains) > 0 {
		return "client certificate"
	}
	if r.Token != "" {
		if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(r.Token)) == 1 {
			return "token"
		}
	}
	return ""
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.authenticated(req) == "" {
		r.observe(OutcomeUnauthenticated, nil)
		r.log().Warn("audit receiver refused an unauthenticated request", "remote", req.RemoteAddr)
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	if req.Method != http.MethodPost {
		http.Error(w, "POST an audit.k8s.io/v1 EventList", http.StatusMethodNotAllowed)
		return
	}
	max := r.MaxBodyBytes
	if max <= 0 {
		max = DefaultMaxBodyBytes
	}
	if req.ContentLength > max {
		r.tooLarge(w, req, max)
		return
	}
	if !r.admit() {
		r.observe(OutcomeBusy, nil)
		r.log().Warn("audit receiver busy: answered 503, the apiserver sends the batch again",
			"remote", req.RemoteAddr, "in_flight", r.maxInFlight(), "retry_after_seconds", busyRetryAfter)
		w.Header().Set("Retry-After", busyRetryAfter)
		http.Error(w, "busy, retry", http.StatusServiceUnavailable)
		return
	}
	defer r.slots.Release(1)
	// A caller that stops sending mid-body frees its slot when the apiserver would have
	// given up anyway. Once the body is read to its end, net/http clears the deadline
	// (its background read, which watches for the caller going away), so a slow Store is
	// not cut short.
	rc := http.NewResponseController(w)
	bodyTimeout := r.BodyTimeout
	if bodyTimeout <= 0 {
		bodyTimeout = DefaultBodyTimeout
	}
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	events, counts, err := Decode(http.MaxBytesReader(w, req.Body, max))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		r.tooLarge(w, req, max)
		return
	}
	if err != nil {
		r.observe(OutcomeMalformed, nil)
		// The error names the JSON problem, never the body's content.
		r.log().Warn("audit receiver refused a malformed batch", "remote", req.RemoteAddr, "error", oneLine(err))
		http.Error(w, "not an audit.k8s.io/v1 EventList", http.StatusBadRequest)
		return
	}
	if err := r.Store.Store(req.Context(), events); err != nil {
		r.observe(OutcomeStoreFailed, &counts)
		r.log().Warn("audit receiver could not store a batch; the apiserver will send it again",
			"events", len(events), "error", err)
		http.Error(w, "could not store the events", http.StatusServiceUnavailable)
		return
	}
	r.observe(OutcomeStored, &counts)
	r.log().Debug("audit batch stored", "kept", counts.Kept, "refused", counts.Refused, "dry_run", counts.DryRun, "not_write", counts.NotWrite)
	w.WriteHeader(http.StatusOK)
}

// tooLarge refuses a body over max with 413, reading no more of it.
func (r *Receiver) tooLarge(w http.ResponseWriter, req *http.Request, max int64) {
	r.observe(OutcomeTooLarge, nil)
	r.log().Warn("audit receiver refused a batch over audit.webhook.maxBodyBytes; the apiserver retries it, then drops it: "+
		"raise the limit, or turn on the apiserver's --audit-webhook-truncate-enabled",
		"remote", req.RemoteAddr, "content_length", req.ContentLength, "max_body_bytes", max)
	// The rest of the body is not read: net/http closes an HTTP/1.1 connection with more
	// than 256 KiB unread after the answer, and resets an HTTP/2 stream.
	http.Error(w, fmt.Sprintf("the body is over %d bytes", max), http.StatusRequestEntityTooLarge)
}

func (r *Receiver) maxInFlight() int {
	if r.MaxInFlight <= 0 {
		return DefaultMaxInFlight
	}
	return r.MaxInFlight
}

// admit takes one of the MaxInFlight slots, or says there is none.
func (r *Receiver) admit() bool {
	r.slotsOnce.Do(func() { r.slots = semaphore.NewWeighted(int64(r.maxInFlight())) })
	return r.slots.TryAcquire(1)
}

// oneLine is err's message on one line, at most 200 bytes: a JSON syntax error quotes
// no more than a character of the input, but a type error may name a field.
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
