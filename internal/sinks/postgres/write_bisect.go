package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// writeBisecting is the safety net for a batch PostgreSQL refused with a data exception
// that screen did not foresee. In one transaction, as every Write, it writes the staged
// changes in halves, each under a savepoint, halving again whatever fails with a data
// exception, until the changes at fault stand alone; those go to quarantine (a delete
// is first tried without its last state). Halves are written left to right, so changes
// ids keep batch order and a quarantined change is in place before any later version of
// its key resolves it. The cost is about two COPYs of the batch per change at fault.
func (s *Sink) writeBisecting(ctx context.Context, w *batchWrite) error {
	w.skipped = 0 // the failed write's count was rolled back with it
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := setWorkMem(ctx, tx, w.staged); err != nil {
			return err
		}
		for i := range w.bad {
			if err := s.insertQuarantine(ctx, tx, w.res, &w.bad[i]); err != nil {
				return err
			}
		}
		var try, halves func(cs []change.Change) error
		try = func(cs []change.Change) error {
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return s.writeChunk(ctx, sp, w, w.res, cs) })
			pgErr := dataException(err)
			switch {
			case pgErr == nil:
				return err
			case len(cs) > 1:
				return halves(cs)
			}
			q := quarantined{c: cs[0], reason: pgReason(pgErr), sqlstate: pgErr.Code}
			if c := cs[0]; c.Op == change.OpDelete && (c.Object != nil || c.Labels != nil) {
				stripped := []change.Change{stripObject(c)}
				err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return s.writeChunk(ctx, sp, w, w.res, stripped) })
				if err == nil {
					q.stripped = true
				} else if dataException(err) == nil {
					return err
				}
			}
			w.bad = append(w.bad, q)
			return s.insertQuarantine(ctx, tx, w.res, &w.bad[len(w.bad)-1])
		}
		halves = func(cs []change.Change) error {
			if err := try(cs[:len(cs)/2]); err != nil {
				return err
			}
			return try(cs[len(cs)/2:])
		}
		// The whole batch failed already: start with its halves.
		first := try
		if len(w.staged) > 1 {
			first = halves
		}
		if err := first(w.staged); err != nil {
			return err
		}
		var tail []statement
		if w.travel != nil {
			tail = append(tail, s.epochStatement(w))
		}
		if w.savesCheckpoint() {
			tail = append(tail, s.checkpointStatement(w))
		}
		for _, st := range tail {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeChunk writes some staged changes inside writeBisecting's transaction and empties
// the stage again for the next chunk.
func (s *Sink) writeChunk(ctx context.Context, tx pgx.Tx, w *batchWrite, res change.Resource, cs []change.Change) error {
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{stageTable}, stageColumns, &stageRows{changes: cs}); err != nil {
		return err
	}
	var skipped int64
	var ignore *noiseSQL
	if hasWatchUpdate(cs) {
		ignore = w.ignore
	}
	sts := append(s.stagedStatements(res, cs, ignore, &skipped),
		statement{sql: s.sql.resolve, args: []any{s.writeArgs(res)}},
		statement{sql: clearStage})
	for _, st := range sts {
		if st.skipped != nil {
			if err := tx.QueryRow(ctx, st.sql, st.args...).Scan(st.skipped); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
			return err
		}
	}
	w.skipped += skipped // the chunk is written (its savepoint may still roll back: see try)
	return nil
}

func (s *Sink) insertQuarantine(ctx context.Context, tx pgx.Tx, res change.Resource, q *quarantined) error {
	tag, err := tx.Exec(ctx, s.sql.quarantine, quarantineArgs(s.cluster, res, q)...)
	if err != nil {
		return fmt.Errorf("quarantine %s %s: %w", res.ID(), q.c.Key, err)
	}
	q.inserted = tag.RowsAffected() == 1
	return nil
}
