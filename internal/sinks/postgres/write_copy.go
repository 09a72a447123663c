package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// writeCopy writes a batch in an explicit transaction: COPY into the stage, then the
// statements.
func (s *Sink) writeCopy(ctx context.Context, w *batchWrite) error {
	var steps stepTimer
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		steps.start()
		if err := setWorkMem(ctx, tx, w.staged); err != nil {
			return err
		}
		if len(w.staged) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{stageTable}, stageColumns, &stageRows{changes: w.staged}); err != nil {
				return err
			}
			steps.done("copy")
		}
		for _, st := range s.plan(w) {
			if st.skipped != nil {
				if err := tx.QueryRow(ctx, st.sql, st.args...).Scan(st.skipped); err != nil {
					return err
				}
				steps.done(st.step)
				continue
			}
			tag, err := tx.Exec(ctx, st.sql, st.args...)
			if err != nil {
				return err
			}
			if st.bad != nil {
				st.bad.inserted = tag.RowsAffected() == 1
			}
			if st.step != "" {
				steps.done(st.step)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	steps.done("commit")
	if !s.noAnalyze {
		s.upkeep.Loaded(len(w.staged))
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", append([]any{"sink", s.name, "resource", w.res.ID(), "changes", len(w.staged),
			"quarantined", len(w.bad), "checkpoint", w.checkpoint.String()}, steps.attrs()...)...)
	}
	return nil
}

// setWorkMem turns JIT compilation off for the transaction and sizes its work_mem to the
// batch when the default would not hold it.
//
// JIT: the stage is a temporary table the planner knows nothing of, so the statements
// over it are estimated far above jit_above_cost, and PostgreSQL compiled them at every
// batch: for a relist batch of 20,000 1.3 KB objects the changes insert spent 440 ms of
// its 735 ms compiling (550 of 765 into the partitioned changes, whose plan holds twice
// the functions), and ran in 190–290 ms without (docs/benchmarks.md, "Issue 22").
//
// work_mem: the changes insert sorts whole staged rows by seq (batch order), and a sort
// that spills to disk doubled its time for 20,000 1.3 KB objects. Capped at
// maxWorkMemKB; a batch under the server's default changes nothing.
func setWorkMem(ctx context.Context, tx pgx.Tx, cs []change.Change) error {
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return err
	}
	n := 0
	for i := range cs {
		n += len(cs[i].Object) + len(cs[i].Labels) + 200 // keys, uid, changed_by, row overhead
	}
	kb := 2 * n / 1024
	if kb <= defaultWorkMemKB {
		return nil
	}
	_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL work_mem = '%dkB'", min(kb, maxWorkMemKB)))
	return err
}

const (
	defaultWorkMemKB = 4 << 10   // PostgreSQL's default work_mem
	maxWorkMemKB     = 128 << 10 // per sort, per connection: at most MaxConns at a time
)

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
