package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Write (pipeline.Sink): b's rows and its checkpoint commit in one transaction. Changes
// PostgreSQL cannot store go to the quarantine table in that transaction instead (see
// the package documentation), so a poison object never fails the batch.
//
// A batch takes one of three paths, each in its own file, which all run the same
// statements (plan, over the stage or a VALUES list standing for it): a steady watch's
// small batch is one statement (writeInline, write_inline.go); another small batch is
// one pipelined round trip (writeSmall, write_small.go); a large one is COPY into the
// stage in an explicit transaction (writeCopy, write_copy.go). A batch the server
// refuses with a data exception is written again in halves (writeBisecting,
// write_bisect.go).
func (s *Sink) Write(ctx context.Context, b change.Batch) error {
	if len(b.Changes) == 0 && b.Checkpoint == 0 && b.TimeTravel == nil {
		return nil
	}
	if err := s.checkBatch(b); err != nil {
		return retry.Terminal(err)
	}
	if err := s.writers.Lost(); err != nil {
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
		return fmt.Errorf("write %d changes of %s: %w", len(b.Changes), w.res.ID(), pgdb.Classify(err, s.password))
	}
	s.reportQuarantined(ctx, w.res, w.bad)
	if hm, ok := s.metrics.(historyMetrics); ok && w.skipped > 0 {
		hm.HistorySkipped(s.name, w.res.ID(), int(w.skipped))
	}
	s.upkeep.AfterWrite()
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
		out = append(out, statement{sql: s.sql.resolve, args: []any{s.writeArgs(w.res)}, step: "resolve"})
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
		out = append(out, statement{sql: ignore.stage, args: []any{s.writeArgs(res)},
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
	out = append(out, statement{sql: insert, args: []any{s.writeArgs(res)}, step: "changes"})
	if s.opts.HardDelete {
		out = append(out, statement{sql: s.sql.hardDelete, args: []any{s.cluster, res.Group, res.Resource}, step: "delete"})
	}
	if hasSnapshot(staged) {
		out = append(out, statement{sql: s.sql.revive, args: []any{s.cluster, res.Group, res.Resource}, step: "revive"})
	}
	return append(out,
		statement{sql: s.sql.upsert, args: []any{s.writeArgs(res)}, step: "objects"})
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
	args := s.writeArgs(w.res)
	args["rv"], args["epoch"], args["cluster_uid"] = w.checkpoint, int32(w.epoch), w.clusterUID
	return statement{sql: s.sql.saveCheckpoint, args: []any{args}}
}

// writeArgs are the named parameters of the write statements that take them
// (statements.go: the upsert, the changes insert, the resolution of quarantined keys,
// the noise statements and the checkpoint, which adds @rv, @epoch and @cluster_uid),
// to be passed as the statement's one argument: pgx numbers them. A name a statement
// does not use is not sent.
func (s *Sink) writeArgs(res change.Resource) pgx.NamedArgs {
	return pgx.NamedArgs{"cluster": s.cluster, "group": res.Group, "version": res.Version, "resource": res.Resource,
		"kind": res.Kind, "hard_delete": s.opts.HardDelete, "sink": s.name, "scope": res.Scope}
}

// writeStageValues writes n rows of stage placeholders, (p(0, 0), …), (…), each cast to
// its column's type when types is given; p names the placeholder of a row's column.
func writeStageValues(sb *strings.Builder, n int, p func(row, col int) string, types []string) {
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range stageWidth {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(p(i, j))
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
