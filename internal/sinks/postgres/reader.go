package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
)

// Reader reads a sink's tables for the commands that only read them (status, history,
// as-of, check's audit row) and for the web UI. It never writes: its sessions are read
// only (default_transaction_read_only), and unlike New it applies no migration, records
// no retention, creates no partitions and no staging table, so a role with SELECT alone
// is enough, and a writer's retention (EnsurePartitions, which records the config's
// postgres.retention for the cluster) is left as the writer set it.
type Reader struct {
	s     *Sink // the read methods' receiver, on a read-only pool; never written through
	owned bool  // Close closes the pool (OpenReader); the caller's otherwise (ReaderOn)
}

// OpenReader connects to opts.DSN with a read-only pool of its own and checks that the
// schema holds kube-cdc's tables, and none a newer kube-cdc migrated (verifySchema). It reads the sink named name of cluster. Its errors are
// New's: wrong password, unknown database and a missing schema are retry.Terminal, with
// one line naming the cause.
func OpenReader(ctx context.Context, name, cluster string, opts Options) (*Reader, error) {
	opts = opts.withDefaults()
	cfg, password, err := poolConfig(name, opts)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2 // a command's few queries, one at a time
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", name, classify(err, password))
	}
	r := &Reader{s: readSink(pool, name, cluster, opts.Schema, password), owned: true}
	// An older kube-cdc's queries may not mean the same against a schema a newer one
	// migrated: refuse it, as New does (a role that may not read schema_migrations reads on).
	if err := verifySchema(ctx, pool, opts.Schema); err != nil && !errors.Is(err, errUnverifiable) {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", name, classify(err, password))
	}
	if _, err := pool.Exec(ctx, r.s.sql.probe); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", name, classify(err, password))
	}
	return r, nil
}

// ReaderOn reads the sink named name of cluster in schema through pool, which the
// caller opened read-only (the web UI's, ui.Connect) and closes.
func ReaderOn(pool *pgxpool.Pool, name, cluster, schema string) *Reader {
	return &Reader{s: readSink(pool, name, cluster, schema, pool.Config().ConnConfig.Password)}
}

func readSink(pool *pgxpool.Pool, name, cluster, schema, password string) *Sink {
	opts := Options{Schema: schema}.withDefaults()
	return &Sink{name: name, cluster: cluster, opts: opts, pool: pool, password: password, sql: newStatements(opts.Schema)}
}

// Close closes the pool OpenReader opened; on ReaderOn's it does nothing.
func (r *Reader) Close() {
	if r.owned {
		r.s.pool.Close()
	}
}

// Status is Sink.Status.
func (r *Reader) Status(ctx context.Context) ([]ResourceStatus, error) { return r.s.Status(ctx) }

// QuarantinedChanges is Sink.QuarantinedChanges.
func (r *Reader) QuarantinedChanges(ctx context.Context, perResource int) ([]QuarantinedChange, error) {
	return r.s.QuarantinedChanges(ctx, perResource)
}

// Writers is Sink.Writers.
func (r *Reader) Writers(ctx context.Context) ([]Writer, error) { return r.s.Writers(ctx) }

// History is Sink.History.
func (r *Reader) History(ctx context.Context, q HistoryQuery) ([]Version, error) {
	return r.s.History(ctx, q)
}

// RecordedResources is Sink.RecordedResources.
func (r *Reader) RecordedResources(ctx context.Context) ([]change.Resource, error) {
	return r.s.RecordedResources(ctx)
}

// HistoryNamespaces is Sink.HistoryNamespaces.
func (r *Reader) HistoryNamespaces(ctx context.Context, group, resource, name string) ([]string, error) {
	return r.s.HistoryNamespaces(ctx, group, resource, name)
}

// AsOf is Sink.AsOf.
func (r *Reader) AsOf(ctx context.Context, q AsOfQuery) ([]AsOfObject, error) {
	return r.s.AsOf(ctx, q)
}

// JoinStats is the audit store's JoinStats for the reader's cluster, in the reader's schema.
func (r *Reader) JoinStats(ctx context.Context, since time.Time) (audit.JoinStats, error) {
	a := auditstore.New(r.s.pool, auditstore.Options{Schema: r.s.opts.Schema, Cluster: r.s.cluster,
		Classify: func(err error) error { return classify(err, r.s.password) }})
	return a.JoinStats(ctx, since)
}
