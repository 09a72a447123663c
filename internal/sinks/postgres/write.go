package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

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
