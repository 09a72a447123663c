package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A steady watch's batch holds a change or two (adaptive batching writes a change that
// finds the sink idle at once), so what a batch costs regardless of its size is paid per
// change. writeSmall sends five statements (stage insert, objects upsert, changes insert,
// quarantine resolve, checkpoint) in one pipelined round trip; the client still encodes,
// tracks and reads five results, about 200 µs of kube-cdc's CPU per batch. writeInline
// sends the same work as one statement: the batch is a VALUES list in a WITH clause and
// the four writes are data-modifying CTEs over it, so it runs in one implicit transaction
// (all or nothing, as before) with one Bind, one Execute and one result.
//
// The CTEs all see the database as it was when the statement started (PostgreSQL runs
// data-modifying CTEs on one snapshot), which is why only batches whose writes do not
// read each other's results go this way: no snapshot upserts (revive must run before the
// upsert), no quarantined changes (their insert reads the upserted row), no hard
// deletes, no time travel, no inferred deletes (their insert must see another batch's
// tombstone, committed after the lock it takes: stagedStatements). Updates that may be
// noise need no more than that snapshot:
// the noise CTE compares them with the objects rows as they were before the upsert, the
// changes insert leaves them out, and the statement returns one row per change left out
// (its command tag counts them).

// inlineStatements builds (once per batch size) and caches the single statements.
type inlineStatements struct {
	objects, changes, resolve, checkpoint string // the CTEs' bodies, with named parameters (writeArgs)
	schema                                string
	diff                                  bool // watch updates get their changed paths (insertChangesSQL)

	mu  sync.Mutex
	sql map[inlineKey]inlineStatement
}

// inlineKey names one single statement: its rows, whether it saves the checkpoint, and
// the resource scope whose noise it leaves out ("": none).
type inlineKey struct {
	rows       int
	checkpoint bool
	noise      string
}

// inlineStatement is one single statement, the name it is prepared under, and what each
// of its parameters is, in order ($1, $2, …).
type inlineStatement struct {
	name, sql string
	params    []inlineParam
}

// inlineParam is a parameter of a single statement: the named parameter inlineNames[name]
// (writeArgs), or column col of the batch's row row (name -1).
type inlineParam struct {
	name, row, col int
}

func newInlineStatements(schema string, st statements, diff bool) *inlineStatements {
	return &inlineStatements{
		schema:     schema,
		objects:    upsertSQL(schema, "latest", "true"),
		changes:    insertChangesSQL(schema, "stage", false, diff),
		diff:       diff,
		resolve:    resolveSQL(schema, "latest"),
		checkpoint: st.saveCheckpoint,
		sql:        map[inlineKey]inlineStatement{},
	}
}

// statement returns the single statement for rows staged changes, saving the checkpoint
// or not, leaving noise's noise out of changes (nil: none).
func (in *inlineStatements) statement(rows int, checkpoint bool, noise *noiseSQL) (inlineStatement, error) {
	key := inlineKey{rows: rows, checkpoint: checkpoint}
	if noise != nil {
		key.noise = noise.key
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if st, ok := in.sql[key]; ok {
		return st, nil
	}
	var sb strings.Builder
	sb.WriteString("WITH stage (")
	sb.WriteString(strings.Join(stageColumns, ", "))
	sb.WriteString(") AS (VALUES ")
	writeStageValues(&sb, rows, rowParam, stageTypes[:])
	sb.WriteString("),\nlatest AS (SELECT DISTINCT ON (namespace, name) * FROM stage ORDER BY namespace, name, epoch DESC, rv DESC, seq DESC),\n")
	changes, objects := in.changes, in.objects
	if noise != nil {
		fmt.Fprintf(&sb, "%s,\nw_tally AS (%s),\n", noise.ctes, tallySQL(in.schema, "noise"))
		changes = insertChangesSQL(in.schema, "(SELECT * FROM stage WHERE seq NOT IN (SELECT seq FROM noise))", false, in.diff)
		objects = upsertSQL(in.schema, "latest", "s.seq NOT IN (SELECT seq FROM noise)")
	}
	fmt.Fprintf(&sb, "w_objects AS (%s),\nw_changes AS (%s),\nw_resolve AS (%s)", objects, changes, in.resolve)
	if checkpoint {
		fmt.Fprintf(&sb, ",\nw_checkpoint AS (%s)", in.checkpoint)
	}
	if noise != nil {
		sb.WriteString("\nSELECT 1 FROM noise") // the command tag counts the noise
	} else {
		sb.WriteString("\nSELECT 1")
	}
	sql, params, err := numberParams(sb.String(), rows)
	if err != nil {
		return inlineStatement{}, err
	}
	st := inlineStatement{name: fmt.Sprintf("kube_cdc_inline_%d", rows), sql: sql, params: params}
	if !checkpoint {
		st.name += "_nocheckpoint"
	}
	if noise != nil {
		st.name += fmt.Sprintf("_noise_%d", len(in.sql)) // one name per resource scope's paths
	}
	in.sql[key] = st
	return st, nil
}

// rowParam names the parameter of column col of row row of a single statement's VALUES.
func rowParam(row, col int) string { return "@r" + strconv.Itoa(row) + "_" + strconv.Itoa(col) }

// inlineNames are the named parameters (writeArgs) a single statement may use, in the
// order inlineArgs gives their values.
var inlineNames = [...]string{"cluster", "group", "version", "resource", "kind", "hard_delete", "sink", "scope", "rv", "epoch", "cluster_uid"}

// numberParams numbers the named parameters of sql, a single statement of rows rows, as
// pgx.NamedArgs does (in the order they first appear), and says what each number
// stands for: the statement is numbered once, and each write only fills the values in.
func numberParams(sql string, rows int) (string, []inlineParam, error) {
	self := pgx.NamedArgs{} // each name's value says which parameter it is
	for i, n := range inlineNames {
		self[n] = inlineParam{name: i}
	}
	for i := range rows {
		for j := range stageWidth {
			self[rowParam(i, j)[1:]] = inlineParam{name: -1, row: i, col: j}
		}
	}
	numbered, args, err := self.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		return "", nil, fmt.Errorf("number the parameters of the single statement: %w", err)
	}
	params := make([]inlineParam, len(args))
	for i, a := range args {
		p, ok := a.(inlineParam)
		if !ok {
			return "", nil, fmt.Errorf("the single statement names parameter $%d, which no write gives", i+1)
		}
		params[i] = p
	}
	return numbered, params, nil
}

// stageTypes are the SQL types of stageColumns, in order.
var stageTypes = [stageWidth]string{"int", "text", "text", "text", "bigint", "int", "text", "boolean", "text", "boolean",
	"bigint", "jsonb", "jsonb", "text", "timestamptz"}

// inlines says whether w can be written as one statement (see inlineStatements).
func (s *Sink) inlines(w *batchWrite) bool {
	return len(w.staged) > 0 && len(w.staged) <= smallBatch && len(w.bad) == 0 && w.travel == nil &&
		!s.opts.HardDelete && !hasSnapshot(w.staged) && !hasInferredDelete(w.staged) // see stagedStatements
}

// writeInline writes w as one statement (inlineStatements).
func (s *Sink) writeInline(ctx context.Context, w *batchWrite) error {
	start := time.Now()
	checkpoint := w.savesCheckpoint()
	st, err := s.inline.statement(len(w.staged), checkpoint, w.ignore)
	if err != nil {
		return err
	}
	tag, err := s.exchange.ExecTag(ctx, st.name, st.sql, s.inlineArgs(w, st))
	if err != nil {
		return err
	}
	if w.ignore != nil {
		w.skipped = tag.RowsAffected()
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("wrote batch", "sink", s.name, "resource", w.res.ID(), "changes", len(w.staged),
			"checkpoint", w.checkpoint.String(), "inline", time.Since(start).String())
	}
	return nil
}

// inlineArgs are the values of st's parameters for w, in st's order. (Once per steady
// write: no map, two slices.)
func (s *Sink) inlineArgs(w *batchWrite, st inlineStatement) []any {
	named := [len(inlineNames)]any{s.cluster, w.res.Group, w.res.Version, w.res.Resource, w.res.Kind, s.opts.HardDelete,
		s.name, w.res.Scope, w.checkpoint, int32(w.epoch), w.clusterUID}
	values := make([]any, 0, len(w.staged)*stageWidth)
	rows := &stageRows{changes: w.staged}
	for rows.Next() {
		v, _ := rows.Values()
		values = append(values, v...)
	}
	args := make([]any, len(st.params))
	for i, p := range st.params {
		if p.name >= 0 {
			args[i] = named[p.name]
		} else {
			args[i] = values[p.row*stageWidth+p.col]
		}
	}
	return args
}
