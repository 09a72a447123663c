package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Write (pipeline.Sink): b's rows and its checkpoint commit in one transaction. Changes
// PostgreSQL cannot store go to the quarantine table in that transaction instead (see
// the package documentation), so a poison object never fails the batch.
func (s *Sink) Write(ctx context.Context, b change.Batch) error {
	if len(b.Changes) == 0 && b.Checkpoint == 0 && b.TimeTravel == nil {
		return nil
	}
	if err := s.checkBatch(b); err != nil {
		return retry.Terminal(err)
	}
	if err := s.writers.lostErr(); err != nil {
		return retry.Terminal(err)
	}
	w := &batchWrite{res: b.Resource, checkpoint: b.Checkpoint, epoch: b.Epoch, clusterUID: b.ClusterUID, travel: b.TimeTravel}
	w.staged, w.bad = screen(b.Changes, !s.noPrecheck)
	if n := s.ignore[ignoreKey(b.Resource)]; n != nil && hasWatchUpdate(w.staged) {
		w.ignore = n
	}
	var err error
	if s.storesEvents(b.Resource) {
		err = s.writeEvents(ctx, w)
	} else if s.inlines(w) {
		err = s.writeInline(ctx, w)
	} else if len(b.Changes) <= smallBatch {
		err = s.writeSmall(ctx, w)
	} else {
		err = s.writeCopy(ctx, w)
	}
	if pgErr := dataException(err); pgErr != nil && len(w.staged) > 0 && !s.storesEvents(b.Resource) {
		s.log.Warn("PostgreSQL rejected a value of the batch; bisecting it to quarantine the changes at fault",
			"sink", s.name, "resource", w.res.ID(), "changes", len(w.staged), "sqlstate", pgErr.Code, "error", pgErr.Message)
		err = s.writeBisecting(ctx, w)
	}
	if err != nil {
		return fmt.Errorf("write %d changes of %s: %w", len(b.Changes), w.res.ID(), classify(err, s.password))
	}
	s.reportQuarantined(ctx, w.res, w.bad)
	if hm, ok := s.metrics.(historyMetrics); ok && w.skipped > 0 {
		hm.HistorySkipped(s.name, w.res.ID(), int(w.skipped))
	}
	s.maybeRetain()
	s.maybeRetainEvents()
	return nil
}

// batchWrite is one Write's batch, split by screen into the changes to stage and those
// to quarantine.
type batchWrite struct {
	res        change.Resource
	checkpoint change.RV
	epoch      int
	clusterUID string
	travel     *change.TimeTravel
	staged     []change.Change
	bad        []quarantined
	// ignore is the resource scope's noise statements when the batch holds watch updates
	// that may be noise, else nil; skipped counts the changes the write left out of
	// changes as noise.
	ignore  *noiseSQL
	skipped int64
}

// savesCheckpoint says whether the batch moves the checkpoint: any RV, and in a later
// epoch even 0 (a relist that started the epoch and has not ended: a crash relists).
func (w *batchWrite) savesCheckpoint() bool { return w.checkpoint != 0 || w.epoch > 0 }

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
	s.noteBulkLoad(len(w.staged))
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", append([]any{"sink", s.name, "resource", w.res.ID(), "changes", len(w.staged),
			"quarantined", len(w.bad), "checkpoint", w.checkpoint.String()}, steps.attrs()...)...)
	}
	return nil
}

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

// statement is one statement of a write after the stage is filled.
type statement struct {
	sql  string
	args []any
	step string       // names the step in the debug log's timings; "" for none
	bad  *quarantined // a quarantine insert: told whether it inserted a row
	// skipped: the statement (skipNoiseSQL) returns one row, a count, which goes here.
	skipped *int64
}

// plan is what follows the stage fill, in order: the objects upsert (and hard delete),
// the changes insert, the quarantine inserts, the resolution of quarantined keys staged
// anew, and the checkpoint. Quarantine rows go after the upsert so that one whose key
// the batch also holds at a higher RV is resolved as it is inserted.
func (s *Sink) plan(w *batchWrite) []statement {
	var out []statement
	if len(w.staged) > 0 {
		out = append(out, s.stagedStatements(w.res, w.staged, w.ignore, &w.skipped)...)
	}
	for i := range w.bad {
		out = append(out, statement{sql: s.sql.quarantine, args: quarantineArgs(s.cluster, w.res, &w.bad[i]), bad: &w.bad[i]})
	}
	if len(w.staged) > 0 {
		out = append(out, statement{sql: s.sql.resolve, args: []any{s.cluster, w.res.Group, w.res.Resource}, step: "resolve"})
	}
	if w.travel != nil {
		out = append(out, s.epochStatement(w))
	}
	if w.savesCheckpoint() {
		out = append(out, s.checkpointStatement(w))
	}
	return out
}

// stagedStatements move the staged changes into changes and objects. With ignore (the
// resource scope's noise statements) the noise is marked first, against the objects rows
// the upsert replaces, and counted into skipped; then changes, whose insert asks the
// objects rows as they were before the batch whether a change is written already
// (insertChangesSQL).
func (s *Sink) stagedStatements(res change.Resource, staged []change.Change, ignore *noiseSQL, skipped *int64) []statement {
	var out []statement
	if ignore != nil {
		out = append(out, statement{sql: ignore.stage, args: []any{s.cluster, res.Group, res.Resource, s.name, res.Scope},
			step: "noise", skipped: skipped})
	}
	if hasInferredDelete(staged) {
		// Batches of one resource that infer deletes take turns: the changes insert
		// leaves out an inferred delete of a row already tombstoned (insertChangesSQL),
		// which it sees only once the other's transaction has committed. Two scopes
		// covering one key (label selectors in one namespace) relist at once and each
		// infer its delete when it has left both. Relist batches only; the wait is for
		// the other's commit.
		out = append(out, statement{sql: "SELECT pg_advisory_xact_lock($1)",
			args: []any{inferredKey(s.opts.Schema, s.cluster, res.Group, res.Resource)}, step: "lock"})
	}
	insert := s.sql.insertChanges
	if s.opts.storesChangedPaths() && hasWatchUpdate(staged) {
		insert = s.sql.insertChangesDiff
	}
	out = append(out, statement{sql: insert, args: []any{s.cluster, res.Group, res.Resource, s.opts.HardDelete}, step: "changes"})
	if s.opts.HardDelete {
		out = append(out, statement{sql: s.sql.hardDelete, args: []any{s.cluster, res.Group, res.Resource}, step: "delete"})
	}
	if hasSnapshot(staged) {
		out = append(out, statement{sql: s.sql.revive, args: []any{s.cluster, res.Group, res.Resource}, step: "revive"})
	}
	return append(out,
		statement{sql: s.sql.upsert, args: []any{s.cluster, res.Group, res.Version, res.Resource, res.Kind, s.opts.HardDelete}, step: "objects"})
}

// hasWatchUpdate reports whether cs holds an update read from a watch, the only kind of
// change that may be noise (skipNoiseSQL).
func hasWatchUpdate(cs []change.Change) bool {
	for i := range cs {
		if cs[i].Op == change.OpUpdate && !cs[i].Snapshot && cs[i].Object != nil {
			return true
		}
	}
	return false
}

// hasInferredDelete reports whether cs holds an inferred delete.
func hasInferredDelete(cs []change.Change) bool {
	for i := range cs {
		if cs[i].Op == change.OpDelete && cs[i].Inferred {
			return true
		}
	}
	return false
}

// inferredKey is the transaction advisory lock of the batches that infer deletes of one
// resource of one cluster in schema; the prefix keeps it apart from the writer and
// migration locks and from other applications' advisory locks.
func inferredKey(schema, cluster, group, resource string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kube-cdc inferred deletes\x00" + schema + "\x00" + cluster + "\x00" + group + "\x00" + resource))
	return int64(h.Sum64())
}

// hasSnapshot reports whether cs holds a snapshot upsert, which may revive a row (revive).
func hasSnapshot(cs []change.Change) bool {
	for i := range cs {
		if cs[i].Snapshot && cs[i].Op != change.OpDelete {
			return true
		}
	}
	return false
}

// epochStatement records the time travel that started the batch's epoch (epochs).
func (s *Sink) epochStatement(w *batchWrite) statement {
	tt := w.travel
	var ns, name, held any
	if tt.Reason == change.TravelObjectWentBack {
		ns, name, held = tt.Key.Namespace, tt.Key.Name, tt.HeldRV
	}
	at := tt.At
	if at.IsZero() {
		at = time.Now()
	}
	return statement{sql: s.sql.saveEpoch, step: "epoch", args: []any{s.cluster, s.name, w.res.Group, w.res.Resource, w.res.Scope,
		int32(tt.Epoch), tt.Reason, tt.Checkpoint, tt.ListRV, ns, name, held, at}}
}

func (s *Sink) checkpointStatement(w *batchWrite) statement {
	return statement{sql: s.sql.saveCheckpoint, args: []any{s.cluster, s.name, w.res.Group, w.res.Resource, w.res.Scope, w.checkpoint, int32(w.epoch), w.clusterUID}}
}

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
		statement{sql: s.sql.resolve, args: []any{s.cluster, res.Group, res.Resource}},
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

// stageInsert is INSERT INTO the stage VALUES ($1…$15), … for n rows.
func stageInsert(n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO pg_temp.kube_cdc_stage (")
	sb.WriteString(strings.Join(stageColumns, ", "))
	sb.WriteString(") VALUES ")
	writeStageValues(&sb, n, 1, nil)
	return sb.String()
}

// writeStageValues writes n rows of stage placeholders, ($first, …), (…), each cast to
// its column's type when types is given.
func writeStageValues(sb *strings.Builder, n, first int, types []string) {
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range stageWidth {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(first + i*stageWidth + j))
			if types != nil {
				sb.WriteString("::")
				sb.WriteString(types[j])
			}
		}
		sb.WriteByte(')')
	}
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
	r.row = [stageWidth]any{
		int32(r.i), c.Key.Namespace, c.Key.Name, c.UID, c.RV, int32(c.Epoch), string(c.Op),
		c.Inferred, reason(c), c.Snapshot, c.ListRV, c.Object, labels, c.ChangedBy, observedAt(c),
	}
	return r.row[:], nil
}

// reason is c.Reason, or NULL for an observed change.
func reason(c *change.Change) any {
	if c.Reason == "" {
		return nil
	}
	return c.Reason
}

// observedAt is c.ObservedAt, or now for a change that lacks it.
func observedAt(c *change.Change) time.Time {
	if c.ObservedAt.IsZero() {
		return time.Now()
	}
	return c.ObservedAt
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
