package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// retentionEvery is how often, at most, Write triggers the deletion of old changes rows.
const retentionEvery = time.Minute

// Sink writes batches of changes to PostgreSQL: see the package documentation.
type Sink struct {
	name, cluster string
	opts          Options
	log           *slog.Logger
	pool          *pgxpool.Pool
	password      string // scrubbed from every error
	sql           statements

	// Retention runs in the background, at most one at a time, until Close.
	bgCtx         context.Context
	bgCancel      context.CancelFunc
	bg            sync.WaitGroup
	retentionBusy atomic.Bool
	lastRetention atomic.Int64 // unix nanoseconds
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
// and returns the sink named name, writing for cluster. Connection errors that will not
// heal (wrong password, missing privilege, unknown database) are retry.Terminal with a
// one-line message naming the cause; refused connections and timeouts are retryable.
func New(ctx context.Context, name, cluster string, opts Options, log *slog.Logger) (*Sink, error) {
	opts = opts.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.DSN == "" {
		return nil, retry.Terminal(fmt.Errorf("postgres sink %q: dsn is required", name))
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", name, classify(err, ""))
	}
	password := cfg.ConnConfig.Password
	cfg.MaxConns = opts.MaxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, createStage)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %q: %w", name, classify(err, password))
	}
	s := &Sink{
		name: name, cluster: cluster, opts: opts, log: log,
		pool: pool, password: password,
		sql: newStatements(opts.Schema),
	}
	if err := s.start(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres sink %q: %w", name, err)
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

// start connects once, so that New fails fast on a bad DSN, and migrates or checks that
// the schema is there.
func (s *Sink) start(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(err, s.password)
	}
	defer conn.Release()
	if s.opts.Migrate {
		applied, err := migrate(ctx, conn.Conn(), s.opts.Schema)
		if err != nil {
			return classify(err, s.password)
		}
		if len(applied) > 0 {
			s.log.Info("applied migrations", "sink", s.name, "schema", s.opts.Schema, "versions", applied)
		}
		return nil
	}
	_, err = conn.Exec(ctx, s.sql.probe)
	return classify(err, s.password)
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
		return 0, fmt.Errorf("read the checkpoint of %s: %w", res.ID(), classify(err, s.password))
	}
	return rv, nil
}

// KeyIndex (pipeline.Sink): every live row of (cluster, group, resource). Rows are
// not kept per scope, so the index covers every scope of the resource.
func (s *Sink) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	rows, err := s.pool.Query(ctx, s.sql.keyIndex, s.cluster, res.Group, res.Resource)
	if err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), classify(err, s.password))
	}
	defer rows.Close()
	var (
		key change.Key
		e   change.Entry
	)
	for rows.Next() {
		if err := rows.Scan(&key.Namespace, &key.Name, &e.UID, &e.RV); err != nil {
			return fmt.Errorf("read the key index of %s: %w", res.ID(), classify(err, s.password))
		}
		if err := fn(key, e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), classify(err, s.password))
	}
	return nil
}

// Write (pipeline.Sink): b's rows and its checkpoint commit in one transaction.
func (s *Sink) Write(ctx context.Context, b change.Batch) error {
	if len(b.Changes) == 0 && b.Checkpoint == 0 {
		return nil
	}
	if err := s.checkBatch(b); err != nil {
		return retry.Terminal(err)
	}
	res := b.Resource
	if len(b.Changes) <= smallBatch {
		return s.writeSmall(ctx, b)
	}
	var steps stepTimer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		steps.start()
		if len(b.Changes) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{stageTable}, stageColumns, &stageRows{changes: b.Changes}); err != nil {
				return err
			}
			steps.done("copy")
			if s.opts.HardDelete {
				if _, err := tx.Exec(ctx, s.sql.hardDelete, s.cluster, res.Group, res.Resource); err != nil {
					return err
				}
				steps.done("delete")
			}
			if _, err := tx.Exec(ctx, s.sql.upsert, s.cluster, res.Group, res.Version, res.Resource, res.Kind, s.opts.HardDelete); err != nil {
				return err
			}
			steps.done("objects")
			if _, err := tx.Exec(ctx, s.sql.insertChanges, s.cluster, res.Group, res.Resource); err != nil {
				return err
			}
			steps.done("changes")
		}
		if b.Checkpoint != 0 {
			if _, err := tx.Exec(ctx, s.sql.saveCheckpoint, s.cluster, s.name, res.Group, res.Resource, res.Scope, b.Checkpoint); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write %d changes of %s: %w", len(b.Changes), res.ID(), classify(err, s.password))
	}
	steps.done("commit")
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", append([]any{"sink", s.name, "resource", res.ID(), "changes", len(b.Changes), "checkpoint", b.Checkpoint.String()}, steps.attrs()...)...)
	}
	s.maybeRetain()
	return nil
}

// smallBatch is the largest batch written in one round trip (writeSmall) rather than
// with COPY: a steady stream's batches hold a change or two, and for them the round
// trips of BEGIN, COPY, three statements and COMMIT were most of the cost.
const smallBatch = 64

// writeSmall writes a small batch as one pipelined pgx.Batch: a multi-row INSERT into the
// stage, the same statements as Write, and the checkpoint. A batch with no BEGIN runs in
// one implicit transaction (everything up to the protocol's Sync), so it is still all or
// nothing, and the stage is emptied at its commit.
func (s *Sink) writeSmall(ctx context.Context, b change.Batch) error {
	res := b.Resource
	start := time.Now()
	batch := &pgx.Batch{}
	if len(b.Changes) > 0 {
		rows := &stageRows{changes: b.Changes}
		args := make([]any, 0, len(b.Changes)*stageWidth)
		for rows.Next() {
			v, _ := rows.Values()
			args = append(args, v...)
		}
		batch.Queue(stageInsert(len(b.Changes)), args...)
		if s.opts.HardDelete {
			batch.Queue(s.sql.hardDelete, s.cluster, res.Group, res.Resource)
		}
		batch.Queue(s.sql.upsert, s.cluster, res.Group, res.Version, res.Resource, res.Kind, s.opts.HardDelete)
		batch.Queue(s.sql.insertChanges, s.cluster, res.Group, res.Resource)
	}
	if b.Checkpoint != 0 {
		batch.Queue(s.sql.saveCheckpoint, s.cluster, s.name, res.Group, res.Resource, res.Scope, b.Checkpoint)
	}
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("write %d changes of %s: %w", len(b.Changes), res.ID(), classify(err, s.password))
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", "sink", s.name, "resource", res.ID(), "changes", len(b.Changes),
			"checkpoint", b.Checkpoint.String(), "pipelined", time.Since(start).String())
	}
	s.maybeRetain()
	return nil
}

// stageInsert is INSERT INTO the stage VALUES ($1…$12), … for n rows.
func stageInsert(n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO pg_temp.kube_cdc_stage (")
	sb.WriteString(strings.Join(stageColumns, ", "))
	sb.WriteString(") VALUES ")
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for j := range stageWidth {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(i*stageWidth + j + 1))
		}
		sb.WriteByte(')')
	}
	return sb.String()
}

// checkBatch rejects what retrying cannot fix: RVs that do not fit the bigint columns
// (RV.Value), and changes stamped with another cluster than this sink writes (a wiring
// error: the pipeline stamps the configured cluster on every change).
func (s *Sink) checkBatch(b change.Batch) error {
	if _, err := b.Checkpoint.Value(); err != nil {
		return fmt.Errorf("checkpoint of %s: %w", b.Resource.ID(), err)
	}
	for _, c := range b.Changes {
		if _, err := c.RV.Value(); err != nil {
			return fmt.Errorf("%s %s: %w", b.Resource.ID(), c.Key, err)
		}
		if c.Cluster != s.cluster {
			return fmt.Errorf("%s %s: change of cluster %q reached the sink of cluster %q", b.Resource.ID(), c.Key, c.Cluster, s.cluster)
		}
	}
	return nil
}

// maybeRetain starts the deletion of changes older than opts.Retention in the background,
// at most once per retentionEvery and never twice at a time, so Write does not wait for it.
func (s *Sink) maybeRetain() {
	if s.opts.Retention <= 0 {
		return
	}
	now := time.Now()
	if now.UnixNano()-s.lastRetention.Load() < int64(retentionEvery) || !s.retentionBusy.CompareAndSwap(false, true) {
		return
	}
	s.lastRetention.Store(now.UnixNano())
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.retentionBusy.Store(false)
		n, err := s.DeleteExpiredChanges(s.bgCtx, now.Add(-s.opts.Retention))
		if err != nil && s.bgCtx.Err() == nil {
			s.log.Warn("retention: delete old changes", "sink", s.name, "error", err)
			return
		}
		if n > 0 {
			s.log.Debug("retention: deleted old changes", "sink", s.name, "rows", n)
		}
	}()
}

// DeleteExpiredChanges deletes changes rows observed before cutoff, in chunks so no
// statement holds locks for long, and returns how many it deleted.
func (s *Sink) DeleteExpiredChanges(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.sql.retention, cutoff, retentionChunk)
		if err != nil {
			return total, classify(err, s.password)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < retentionChunk {
			return total, nil
		}
	}
}

const retentionChunk = 10000

// Close (pipeline.Sink): it stops background retention and closes the pool.
func (s *Sink) Close() error {
	s.bgCancel()
	s.bg.Wait()
	s.pool.Close()
	return nil
}

// ResourceStatus is one line of `kube-cdc status` for a PostgreSQL sink.
type ResourceStatus struct {
	Sink       string
	Group      string
	Resource   string
	Scope      string
	Checkpoint change.RV
	UpdatedAt  time.Time // when the checkpoint last moved or was rewritten
	Live       int64     // objects rows of the resource with deleted_at NULL (all scopes)
	Deleted    int64     // tombstones
}

// Status reports every checkpoint of this sink's cluster in the schema (one per sink,
// resource and scope) with the resource's object counts.
func (s *Sink) Status(ctx context.Context) ([]ResourceStatus, error) {
	rows, err := s.pool.Query(ctx, s.sql.status, s.cluster)
	if err != nil {
		return nil, fmt.Errorf("read status: %w", classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResourceStatus, error) {
		var r ResourceStatus
		err := row.Scan(&r.Sink, &r.Group, &r.Resource, &r.Scope, &r.Checkpoint, &r.UpdatedAt, &r.Live, &r.Deleted)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read status: %w", classify(err, s.password))
	}
	return out, nil
}

// stageRows feeds a batch to CopyFrom without copying it: object and labels go through
// as the raw JSON the source produced (pgx writes json.RawMessage to jsonb verbatim,
// nil as NULL).
type stageRows struct {
	changes []change.Change
	i       int
	row     [stageWidth]any
}

func (r *stageRows) Next() bool {
	r.i++
	return r.i <= len(r.changes)
}

func (r *stageRows) Values() ([]any, error) {
	c := &r.changes[r.i-1]
	labels := c.Labels
	if len(labels) == 0 {
		labels = emptyLabels
	}
	var observed any = c.ObservedAt
	if c.ObservedAt.IsZero() {
		observed = time.Now()
	}
	r.row = [stageWidth]any{
		int32(r.i), c.Key.Namespace, c.Key.Name, c.UID, c.RV, string(c.Op),
		c.Inferred, c.Snapshot, c.Object, labels, c.ChangedBy, observed,
	}
	return r.row[:], nil
}

func (r *stageRows) Err() error { return nil }

var emptyLabels = json.RawMessage("{}")

// stepTimer measures the steps of one Write for the debug log.
type stepTimer struct {
	last  time.Time
	names []string
	took  []time.Duration
}

func (t *stepTimer) start() { t.last, t.names, t.took = time.Now(), t.names[:0], t.took[:0] }

func (t *stepTimer) done(name string) {
	now := time.Now()
	t.names, t.took = append(t.names, name), append(t.took, now.Sub(t.last))
	t.last = now
}

func (t *stepTimer) attrs() []any {
	out := make([]any, 0, 2*len(t.names))
	for i, n := range t.names {
		out = append(out, n, t.took[i].Round(time.Microsecond).String())
	}
	return out
}
