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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// Options configure the handler. Pool and Schema are required.
type Options struct {
	Pool   *pgxpool.Pool // connections to the sink's database (Connect makes read-only ones)
	Schema string        // the sink's schema, e.g. kube_cdc
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
	o      Options
	schema string // sanitized identifier
	pages  map[string]*template.Template
	mux    *http.ServeMux
}

// New checks the options and parses the embedded templates.
func New(o Options) (*Server, error) {
	if o.Pool == nil || o.Schema == "" {
		return nil, errors.New("ui: a pool and a schema are required")
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
	s := &Server{o: o, schema: pgx.Identifier{o.Schema}.Sanitize(), pages: map[string]*template.Template{}}
	for _, page := range []string{"timeline", "object", "asof", "status", "error"} {
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
	s.mux.HandleFunc("GET /{$}", s.timeline)
	s.mux.HandleFunc("GET /chart.json", s.chartJSON)
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

// Connect opens a pool whose sessions are read-only (default_transaction_read_only): the
// UI never writes, whatever the role may do. With ping it connects once to fail now on a
// wrong DSN or password; without, connections are made as pages need them (inside run,
// whose sink retries a database that is down, the UI must not fail the start).
func Connect(ctx context.Context, dsn string, ping bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the PostgreSQL DSN: %w", scrubbed(err, ""))
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "kube-cdc ui"
	// The pages' queries read a few rows through indexes over every partition of changes:
	// at 10M rows the planner estimates them above jit_above_cost, and compiling them cost
	// more than running them (history() spent 0.9 s of 1 s compiling, docs/benchmarks.md).
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	// Each page's statements are prepared once per connection (pgx's statement cache); a
	// custom plan was made at every execution, 10-20 ms each for the actors' view over
	// every partition, more than running them. The filters and the time range are
	// parameters: a generic plan prunes the months at run time.
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", scrubbed(err, cfg.ConnConfig.Password))
	}
	if ping {
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to PostgreSQL: %w", scrubbed(err, cfg.ConnConfig.Password))
		}
	}
	return pool, nil
}

// scrubbed keeps a password out of an error's text.
func scrubbed(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
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

// CheckSchema fails, saying what to do, when schema holds no kube-cdc tables (a wrong
// schema name, a database never migrated) or the role may not read them.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass(quote_ident($1) || '.changes') IS NOT NULL AND to_regclass(quote_ident($1) || '.checkpoints') IS NOT NULL`, schema).Scan(&ok); err != nil {
		return fmt.Errorf("read the schema %s: %w", schema, err)
	}
	if !ok {
		return fmt.Errorf("schema %s has no kube-cdc tables (changes, checkpoints): check the sink's postgres.schema, or run kube-cdc migrate (or run) once", schema)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`SELECT 1 FROM %[1]s.changes LIMIT 0; SELECT 1 FROM %[1]s.checkpoints LIMIT 0; SELECT 1 FROM %[1]s.objects LIMIT 0`, ident)); err != nil {
		return fmt.Errorf("read the schema %s: %w (the UI's role needs USAGE on the schema and SELECT on its tables: docs/operations.md, \"Web UI\")", schema, err)
	}
	return nil
}
