package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/roundtrip"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
)

// Sink writes batches of changes to PostgreSQL: see the package documentation.
type Sink struct {
	name, cluster string
	opts          Options
	log           *slog.Logger
	pool          *pgxpool.Pool
	password      string // scrubbed from every error
	sql           statements
	inline        *inlineStatements // single-statement writes of small batches (inline.go)
	events        eventsStatements  // Kubernetes Events in the events table (events.go)
	// exchange sends the single statements in one round trip (pgx's Exec when the DSN
	// asks pgx not to prepare statements).
	exchange *roundtrip.Executor
	metrics  Metrics // optional: SetMetrics
	// ignore holds the noise statements of each resource scope that has ignore paths
	// (SetIgnorePaths, noise.go), by ignoreKey.
	ignore     map[string]*noiseSQL
	noPrecheck bool // tests: leave every poison object to the bisecting safety net
	noAnalyze  bool // tests: no analysis after bulk loads (schema.Upkeep.Loaded), as before it has run

	// upkeep creates the months of changes ahead, retains and analyzes in the
	// background of Write, until Close (package schema).
	upkeep *schema.Upkeep

	writers      *writerlock.Lock // held once ClaimWriter takes it
	eventsUpkeep eventsUpkeep     // paces the events retention (events.go)
}

// withDefaults fills the defaults of every field that has one (Migrate's default, true,
// is the config layer's: a false here is an explicit choice).
func (o Options) withDefaults() Options {
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	return o
}

// New connects to PostgreSQL, applies pending migrations unless opts.Migrate is false,
// records the cluster's retention and creates the months of changes ahead
// (EnsurePartitions), and returns the sink named name, writing for cluster: a writer's
// start, for run alone (commands that only read open a Reader). Connection errors that will not
// heal (wrong password, missing privilege, unknown database) are retry.Terminal with a
// one-line message naming the cause; refused connections and timeouts are retryable.
func New(ctx context.Context, name, cluster string, opts Options, log *slog.Logger) (*Sink, error) {
	s, err := openSink(ctx, name, cluster, opts, log)
	if err != nil {
		return nil, err
	}
	s.upkeep.Start(ctx)
	return s, nil
}

// openSink is New but for the partitions: it connects, migrates unless opts.Migrate is
// false, and probes the schema, writing nothing else (Check's way of starting as run
// starts).
func openSink(ctx context.Context, name, cluster string, opts Options, log *slog.Logger) (*Sink, error) {
	opts = opts.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, password, err := poolConfig(name, opts)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = opts.MaxConns
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, createStage)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", name, pgdb.Classify(err, password))
	}
	s := &Sink{
		name: name, cluster: cluster, opts: opts, log: log,
		pool: pool, password: password,
		sql:     newStatements(opts.Schema),
		writers: writerlock.New(pool.Config().ConnConfig, opts.Schema, cluster, name, password, log),
		events:  newEventsStatements(opts.Schema),
	}
	s.inline = newInlineStatements(pgx.Identifier{opts.Schema}.Sanitize(), s.sql, opts.storesChangedPaths())
	s.exchange = roundtrip.New(pool)
	if err := s.start(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", name, err)
	}
	s.upkeep = schema.NewUpkeep(pool, opts.Schema, cluster, name, opts.upkeep(), password, log)
	return s, nil
}

// start connects once, so that New fails fast on a bad DSN, and migrates or checks that
// the schema is there.
func (s *Sink) start(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return pgdb.Classify(err, s.password)
	}
	defer conn.Release()
	if s.opts.Migrate {
		applied, err := schema.MigrateConn(ctx, conn.Conn(), s.opts.Schema, "")
		if err != nil {
			return pgdb.Classify(err, s.password)
		}
		if len(applied) > 0 {
			s.log.Info("applied migrations", "sink", s.name, "schema", s.opts.Schema, "versions", applied)
		}
		return nil
	}
	// Not migrating (migrate: false, or a command that only reads): still refuse a schema
	// a newer kube-cdc migrated, or one whose applied migration is not this binary's.
	if err := schema.Verify(ctx, conn, s.opts.Schema); errors.Is(err, schema.ErrUnverifiable) {
		s.log.Warn("cannot verify the schema's applied migrations against this kube-cdc's (grant SELECT on schema_migrations)",
			"sink", s.name, "schema", s.opts.Schema, "error", pgdb.Classify(err, s.password))
	} else if err != nil {
		return pgdb.Classify(err, s.password)
	}
	_, err = conn.Exec(ctx, s.sql.probe)
	return pgdb.Classify(err, s.password)
}

// Name (pipeline.Sink).
func (s *Sink) Name() string { return s.name }

// Checkpoint (pipeline.Sink): the RV stored for (cluster, sink, resource, scope).
func (s *Sink) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	var rv change.RV
	err := s.pool.QueryRow(ctx, s.sql.checkpoint, s.cluster, s.name, res.Group, res.Resource, res.Scope).Scan(&rv)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the checkpoint of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return rv, nil
}

// Epoch (pipeline.EpochKeeper): the epoch of the checkpoint of (cluster, sink,
// resource, scope); 0 without one.
func (s *Sink) Epoch(ctx context.Context, res change.Resource) (int, error) {
	var epoch int32
	err := s.pool.QueryRow(ctx, s.sql.epoch, s.cluster, s.name, res.Group, res.Resource, res.Scope).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the epoch of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return int(epoch), nil
}

// ClusterUIDs (pipeline.IdentityKeeper) returns the cluster identities this sink's
// checkpoints were taken in (none recorded: empty).
func (s *Sink) ClusterUIDs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sql.clusterUIDs, s.cluster, s.name)
	if err != nil {
		return nil, fmt.Errorf("read the cluster identity of the checkpoints: %w", pgdb.Classify(err, s.password))
	}
	uids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the cluster identity of the checkpoints: %w", pgdb.Classify(err, s.password))
	}
	return uids, nil
}

// Newest (pipeline.NewestKeeper): the n rows of (cluster, resource) with the highest
// (epoch, RV), live or tombstoned, newest first.
func (s *Sink) Newest(ctx context.Context, res change.Resource, n int) ([]change.Held, error) {
	if s.storesEvents(res) {
		return s.eventsNewest(ctx, res, n)
	}
	rows, err := s.pool.Query(ctx, s.sql.newest, s.cluster, res.Group, res.Resource, n)
	if err != nil {
		return nil, fmt.Errorf("read the newest rows of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change.Held, error) {
		var h change.Held
		var epoch int32
		err := row.Scan(&h.Key.Namespace, &h.Key.Name, &h.UID, &h.RV, &epoch, &h.Deleted, &h.Inferred)
		h.Epoch = int(epoch)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the newest rows of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return out, nil
}

// KeyIndex (pipeline.Sink): every live row of (cluster, group, resource). Rows are
// not kept per scope, so the index covers every scope of the resource. An entry is
// Drifted when the row's object is no longer what the upsert wrote (edited by hand).
func (s *Sink) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	if s.storesEvents(res) {
		return s.eventsKeyIndex(ctx, res, fn)
	}
	rows, err := s.pool.Query(ctx, s.sql.keyIndex, s.cluster, res.Group, res.Resource)
	if err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	defer rows.Close()
	var (
		key change.Key
		e   change.Entry
	)
	for rows.Next() {
		var epoch int32
		if err := rows.Scan(&key.Namespace, &key.Name, &e.UID, &e.RV, &epoch, &e.Drifted); err != nil {
			return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
		}
		e.Epoch = int(epoch)
		if err := fn(key, e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return nil
}

// Close (pipeline.Sink): it releases the writer lock, stops the background upkeep and
// closes the pool.
func (s *Sink) Close() error {
	s.writers.Stop()
	s.upkeep.Close()
	s.pool.Close()
	return nil
}

// ClaimWriter takes the sink's writer lock (writerlock.Lock.Claim) before it writes
// anything, and holds it until Close; once another process took it from this one, every
// Write fails with a terminal error.
func (s *Sink) ClaimWriter(ctx context.Context, policy writerlock.Policy) error {
	if m, ok := s.metrics.(writerlock.Metrics); ok {
		s.writers.Metrics = m
	}
	return s.writers.Claim(ctx, policy)
}

// Writers lists the running kube-cdc processes that write this sink (writerlock.List).
func (s *Sink) Writers(ctx context.Context) ([]writerlock.Writer, error) {
	ws, err := writerlock.List(ctx, s.pool, s.opts.Schema, s.cluster, s.name)
	if err != nil {
		return nil, fmt.Errorf("read the writer lock: %w", pgdb.Classify(err, s.password))
	}
	return ws, nil
}

// EnsurePartitions is schema.Upkeep.EnsurePartitions for this sink's cluster.
func (s *Sink) EnsurePartitions(ctx context.Context) ([]string, error) {
	return s.upkeep.EnsurePartitions(ctx)
}

// Retain is schema.Upkeep.Retain for this sink's cluster: it removes the cluster's
// changes observed before cutoff.
func (s *Sink) Retain(ctx context.Context, cutoff time.Time) (schema.RetentionResult, error) {
	return s.upkeep.Retain(ctx, cutoff)
}

// DeleteExpiredChanges is Retain, returning only the rows it deleted one by one.
func (s *Sink) DeleteExpiredChanges(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.Retain(ctx, cutoff)
	return res.Deleted, err
}

// poolConfig is pgdb.PoolConfig of opts.DSN, the pool configuration the sink and its
// readers share (the read store uses pgdb.PoolConfig too), with errors naming the sink.
func poolConfig(name string, opts Options) (*pgxpool.Config, string, error) {
	if opts.DSN == "" {
		return nil, "", retry.Terminal(fmt.Errorf("postgres sink %q: dsn is required", name))
	}
	cfg, password, err := pgdb.PoolConfig(opts.DSN)
	if err != nil {
		return nil, "", fmt.Errorf("postgres sink %q: %w", name, err)
	}
	return cfg, password, nil
}
