package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/status"
)

// DefaultAddress is where `kube-cdc ui` listens unless told otherwise: this machine only.
const DefaultAddress = "127.0.0.1:9465"

// DefaultPageSize is the feed's rows per page.
const DefaultPageSize = 50

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the handler. Store is required.
type Options struct {
	// Store reads the sink's schema (store.Open, read-only); the handler never closes it.
	Store *store.Store
	// Cluster is shown when the URL names none. Default: the only cluster the schema
	// holds checkpoints of, else the first by name.
	Cluster string
	// Token, when set, is demanded of every request: "Authorization: Bearer TOKEN", or
	// HTTP basic auth with TOKEN as the password (what a browser can send).
	Token string
	// TrustedHeader, when set, names a header an authenticating proxy sets to the user
	// (X-Forwarded-User, X-Auth-Request-Email): a request without it is refused, and the
	// pages show who is signed in. Only safe when nothing but the proxy reaches the address.
	TrustedHeader string
	// Status reads what `kube-cdc status` shows; nil leaves the status page out.
	Status func(ctx context.Context) (*status.Report, error)
	// PageSize is the feed's rows per page; default DefaultPageSize.
	PageSize int
	Log      *slog.Logger     // default slog.Default()
	Now      func() time.Time // default time.Now
}

// Server is the UI's http.Handler.
type Server struct {
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New checks the options and parses the embedded templates.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("ui: a store is required")
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, pages: map[string]*template.Template{}}
	for _, page := range []string{"timeline", "lanes", "object", "asof", "status", "error"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parse the %s template: %w", page, err)
		}
		s.pages[page] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	// Where a browser looks for an icon on a page that names none (a JSON response).
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
	s.mux.HandleFunc("GET /{$}", s.timeline)
	s.mux.HandleFunc("GET /chart.json", s.chartJSON)
	s.mux.HandleFunc("GET /lanes", s.lanes)
	s.mux.HandleFunc("GET /object", s.object)
	s.mux.HandleFunc("GET /asof", s.asOf)
	s.mux.HandleFunc("GET /status", s.statusPage)
	return s, nil
}

// ServeHTTP authenticates the request (Options.Token, Options.TrustedHeader), sets the
// headers that keep a page from running anything but the embedded scripts, and serves.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if s.o.Token != "" && !s.tokenOK(r) {
		h.Set("WWW-Authenticate", `Basic realm="kube-cdc", charset="UTF-8"`)
		http.Error(w, "kube-cdc ui: a token is required (Authorization: Bearer TOKEN, or the token as the basic auth password)", http.StatusUnauthorized)
		return
	}
	if s.o.TrustedHeader != "" && r.Header.Get(s.o.TrustedHeader) == "" {
		http.Error(w, "kube-cdc ui: this address is served behind an authenticating proxy, which sets "+s.o.TrustedHeader, http.StatusForbidden)
		return
	}
	start := s.o.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		s.o.Log.Debug("ui request", "path", r.URL.Path, "status", rec.code, "duration", time.Since(start))
	}
}

func (s *Server) tokenOK(r *http.Request) bool {
	var got string
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		got = strings.TrimPrefix(a, "Bearer ")
	} else if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.o.Token)) == 1
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Connect opens the read store of a sink for the UI: read-only sessions whatever the role
// may do, named "kube-cdc ui". With ping it checks the schema now (store.Options.Ping):
// kube-cdc ui fails at once on a wrong DSN, password or schema; without, connections are
// made as pages need them (inside run, whose sink retries a database that is down, the UI
// must not fail the start).
func Connect(ctx context.Context, o store.Options, ping bool) (*store.Store, error) {
	o.Name, o.MaxConns, o.Ping = "kube-cdc ui", 4, ping
	return store.Open(ctx, o)
}

// Serve listens on address and serves h until ctx ends, then shuts down within 5 s. ready,
// when not nil, receives the bound address (useful with port 0).
func Serve(ctx context.Context, address string, h http.Handler, ready func(addr string)) error {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("ui: listen on %s: %w", address, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 60 * time.Second}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("ui: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// AddressInUse names the way out of an address another process holds (EADDRINUSE) in
// Serve's error; other errors, and nil, it returns as they are. fromConfig: the address
// is the config's ui.address, which `kube-cdc run` with the same config serves its own UI
// on, the likely holder.
func AddressInUse(err error, addr string, fromConfig bool) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	if fromConfig {
		return fmt.Errorf("%w; the address is this config's ui.address, where a kube-cdc run with the same config serves the UI already (http://%s/): serve this one elsewhere with --listen (--listen 127.0.0.1:0 takes a free port)", err, addr)
	}
	return fmt.Errorf("%w; another process serves this address: choose another with --listen (--listen 127.0.0.1:0 takes a free port)", err)
}
