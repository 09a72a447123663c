package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

//go:embed sql/*.sql
var queries embed.FS

// query is the embedded file sql/name.sql.
func query(name string) string {
	b, err := queries.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(err) // a file of this package: caught by any test that reads through it
	}
	return string(b)
}

// Options name the sink a Store reads and how to connect.
type Options struct {
	DSN     string // libpq connection string or URL; required
	Schema  string // the sink's schema; required
	Cluster string // the cluster whose rows the reads return (the UI's pages may name another)
	Sink    string // the sink's name: errors and the writer lock name it
	// VerifySchema refuses a schema a newer kube-cdc migrated (the schema owner's check,
	// internal/sinks/postgres.VerifySchema, handed in so that the read side imports no
	// sink). Required by Open; On leaves it to whoever opened the pool.
	VerifySchema func(ctx context.Context, pool *pgxpool.Pool, schema string) error
	// MaxConns caps the pool. Default 2 (a command's few queries, one at a time).
	MaxConns int32
	// Ping connects once at Open to fail now on a wrong DSN or password; without it,
	// connections are made as reads need them and Open checks nothing.
	Ping bool
	// Name is the pool's application_name; default pgdb.ApplicationName().
	Name string
}

// Store reads a PostgreSQL sink's schema. It never writes: its sessions are read only
// (default_transaction_read_only), so a role with SELECT alone is enough.
type Store struct {
	pool     *pgxpool.Pool
	schema   string
	cluster  string
	sink     string
	password string
}

// Open connects to the sink's database with a read-only pool of its own. With o.Ping it
// checks now that no newer kube-cdc migrated the schema (o.VerifySchema) and that the
// role may read its tables (CheckSchema). Wrong password, unknown database and a missing schema are retry.Terminal,
// with one line naming the cause; no error holds the password.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.DSN == "" || o.Schema == "" {
		return nil, fmt.Errorf("postgres sink %q: a DSN and a schema are required", o.Sink)
	}
	cfg, password, err := pgdb.PoolConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", o.Sink, err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["default_transaction_read_only"] = "on"
	// The queries name no schema (sql/*.sql): the sink's is searched first.
	rp["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	if o.Name != "" {
		rp["application_name"] = o.Name
	}
	// Reads touch a few rows through indexes over every partition of changes: at 10M rows
	// the planner estimates them above jit_above_cost, and compiling them cost more than
	// running them (docs/benchmarks.md). Each statement is prepared once per connection
	// (pgx's statement cache) and planned generically: a custom plan made at every
	// execution cost more than running it; the filters and the time range are parameters,
	// and a generic plan prunes the months at run time.
	rp["jit"] = "off"
	rp["plan_cache_mode"] = "force_generic_plan"
	cfg.MaxConns = o.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 2
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", o.Sink, pgdb.Classify(err, password))
	}
	s := &Store{pool: pool, schema: o.Schema, cluster: o.Cluster, sink: o.Sink, password: password}
	if !o.Ping {
		return s, nil
	}
	if o.VerifySchema == nil {
		pool.Close()
		return nil, errors.New("store: Options.VerifySchema is required")
	}
	if err := o.VerifySchema(ctx, pool, o.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", o.Sink, pgdb.Classify(err, password))
	}
	if err := s.CheckSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", o.Sink, err)
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Cluster is the cluster the store reads unless a read names another.
func (s *Store) Cluster() string { return s.cluster }

// Schema is the sink's schema.
func (s *Store) Schema() string { return s.schema }

// Pool is the store's read-only pool, for the audit store's counts (internal/status).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// fail wraps err as the read what failed, classified, without the password.
func (s *Store) fail(what string, err error) error {
	return fmt.Errorf("%s: %w", what, pgdb.Classify(err, s.password))
}

// CheckSchema fails, saying what to do, when the schema holds no kube-cdc tables (a wrong
// schema name, a database never migrated) or the role may not read them.
func (s *Store) CheckSchema(ctx context.Context) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, query("tables"), pgx.NamedArgs{"schema": s.schema}).Scan(&ok); err != nil {
		return fmt.Errorf("read the schema %s: %w", s.schema, pgdb.Classify(err, s.password))
	}
	if !ok {
		return fmt.Errorf("schema %s has no kube-cdc tables (changes, checkpoints): check the sink's postgres.schema, or run kube-cdc migrate (or run) once", s.schema)
	}
	if _, err := s.pool.Exec(ctx, query("probe")); err != nil {
		return fmt.Errorf("read the schema %s: %w (the role needs USAGE on the schema and SELECT on its tables: docs/operations.md, \"Web UI\")", s.schema, pgdb.Classify(err, s.password))
	}
	return nil
}

// collect runs the embedded query name with args and scans each row by position.
func collect[T any](ctx context.Context, s *Store, what, name string, args pgx.NamedArgs, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	rows, err := s.pool.Query(ctx, query(name), args)
	if err != nil {
		return nil, s.fail(what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, s.fail(what, err)
	}
	return out, nil
}

// resourceName is a resource as the SQL functions take it: "plural" or "plural.group".
func resourceName(group, resource string) string {
	if group == "" {
		return resource
	}
	return strings.Join([]string{resource, group}, ".")
}
