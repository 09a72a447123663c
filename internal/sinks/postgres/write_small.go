package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// smallBatch is the largest batch written in one round trip (writeSmall) rather than
// with COPY: a steady stream's batches hold a change or two, and for them the round
// trips of BEGIN, COPY, three statements and COMMIT were most of the cost.
const smallBatch = 64

// writeSmall writes a small batch as one pipelined pgx.Batch: a multi-row INSERT into the
// stage, the same statements as writeCopy, and the checkpoint. A batch with no BEGIN runs
// in one implicit transaction (everything up to the protocol's Sync), so it is still all
// or nothing, and the stage is emptied at its commit.
func (s *Sink) writeSmall(ctx context.Context, w *batchWrite) error {
	start := time.Now()
	batch := &pgx.Batch{}
	if len(w.staged) > 0 {
		rows := &stageRows{changes: w.staged}
		args := make([]any, 0, len(w.staged)*stageWidth)
		for rows.Next() {
			v, _ := rows.Values()
			args = append(args, v...)
		}
		batch.Queue(stageInsert(len(w.staged)), args...)
	}
	plan := s.plan(w)
	for _, st := range plan {
		batch.Queue(st.sql, st.args...)
	}
	br := s.pool.SendBatch(ctx, batch)
	if len(w.staged) > 0 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	for _, st := range plan {
		if st.skipped != nil {
			if err := br.QueryRow().Scan(st.skipped); err != nil {
				br.Close()
				return err
			}
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if st.bad != nil {
			st.bad.inserted = tag.RowsAffected() == 1
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", "sink", s.name, "resource", w.res.ID(), "changes", len(w.staged), "quarantined", len(w.bad),
			"checkpoint", w.checkpoint.String(), "pipelined", time.Since(start).String())
	}
	return nil
}

// stageInsert is INSERT INTO the stage VALUES ($1…$15), … for n rows.
func stageInsert(n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO pg_temp.kube_cdc_stage (")
	sb.WriteString(strings.Join(stageColumns, ", "))
	sb.WriteString(") VALUES ")
	writeStageValues(&sb, n, func(row, col int) string { return "$" + strconv.Itoa(1+row*stageWidth+col) }, nil)
	return sb.String()
}
