package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
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

// inlineFixed are the parameters before the batch's rows: $1 cluster, $2 group, $3
// version, $4 resource, $5 kind, $6 hard delete, then, for a statement that saves the
// checkpoint, $7 sink, $8 scope, $9 checkpoint, $10 epoch, $11 cluster uid. (A parameter
// no part of the statement uses has no type, and PostgreSQL refuses it.)
func inlineFixed(checkpoint bool) int {
	if checkpoint {
		return 11
	}
	return 6
}

// inlineStatements builds (once per batch size) and caches the single statements.
type inlineStatements struct {
	objects, changes, resolve, checkpoint string // the CTEs' bodies, numbered as inlineFixed says
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

// inlineStatement is one single statement and the name it is prepared under.
type inlineStatement struct{ name, sql string }

var placeholder = regexp.MustCompile(`\$(\d+)`)

// renumber rewrites the placeholders $n of sql as $to[n] (those not in to stay).
func renumber(sql string, to map[int]int) string {
	return placeholder.ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		if m, ok := to[n]; ok {
			return "$" + strconv.Itoa(m)
		}
		return p
	})
}

func newInlineStatements(schema string, st statements, diff bool) *inlineStatements {
	resource := map[int]int{3: 4} // $1 cluster, $2 group, $3 resource → the layout's $4
	return &inlineStatements{
		schema:  schema,
		objects: upsertSQL(schema, "latest", "true"),
		changes: renumber(insertChangesSQL(schema, "stage", false, diff), map[int]int{3: 4, 4: 6}), // and $4 hard delete → $6
		diff:    diff,
		resolve: renumber(resolveSQL(schema, "latest"), resource),
		// $1 cluster, $2 sink, $3 group, $4 resource, $5 scope, $6 RV, $7 epoch, $8 uid.
		checkpoint: renumber(st.saveCheckpoint, map[int]int{2: 7, 3: 2, 5: 8, 6: 9, 7: 10, 8: 11}),
		sql:        map[inlineKey]inlineStatement{},
	}
}

// statement returns the single statement for rows staged changes, saving the checkpoint
// or not, leaving noise's noise out of changes (nil: none). With noise, the sink and the
// scope are the two parameters after the rows.
func (in *inlineStatements) statement(rows int, checkpoint bool, noise *noiseSQL) inlineStatement {
	key := inlineKey{rows: rows, checkpoint: checkpoint}
	if noise != nil {
		key.noise = noise.key
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if st, ok := in.sql[key]; ok {
		return st
	}
	var sb strings.Builder
	sb.WriteString("WITH stage (")
	sb.WriteString(strings.Join(stageColumns, ", "))
	sb.WriteString(") AS (VALUES ")
	writeStageValues(&sb, rows, inlineFixed(checkpoint)+1, stageTypes[:])
	sb.WriteString("),\nlatest AS (SELECT DISTINCT ON (namespace, name) * FROM stage ORDER BY namespace, name, epoch DESC, rv DESC, seq DESC),\n")
	changes, objects := in.changes, in.objects
	if noise != nil {
		// $1 cluster, $2 group, $3 resource, $4 sink, $5 scope → the layout's $1, $2, $4
		// and the two after the rows.
		after := inlineFixed(checkpoint) + rows*stageWidth
		fmt.Fprintf(&sb, "%s,\nw_tally AS (%s),\n", renumber(noise.ctes, map[int]int{3: 4}),
			renumber(tallySQL(in.schema, "noise"), map[int]int{3: 4, 4: after + 1, 5: after + 2}))
		changes = renumber(insertChangesSQL(in.schema, "(SELECT * FROM stage WHERE seq NOT IN (SELECT seq FROM noise))", false, in.diff), map[int]int{3: 4, 4: 6})
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
	st := inlineStatement{name: fmt.Sprintf("kube_cdc_inline_%d", rows), sql: sb.String()}
	if !checkpoint {
		st.name += "_nocheckpoint"
	}
	if noise != nil {
		st.name += fmt.Sprintf("_noise_%d", len(in.sql)) // one name per resource scope's paths
	}
	in.sql[key] = st
	return st
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
	args := make([]any, 0, inlineFixed(checkpoint)+len(w.staged)*stageWidth)
	args = append(args, s.cluster, w.res.Group, w.res.Version, w.res.Resource, w.res.Kind, false)
	if checkpoint {
		args = append(args, s.name, w.res.Scope, w.checkpoint, int32(w.epoch), w.clusterUID)
	}
	rows := &stageRows{changes: w.staged}
	for rows.Next() {
		v, _ := rows.Values()
		args = append(args, v...)
	}
	if w.ignore != nil {
		args = append(args, s.name, w.res.Scope)
	}
	st := s.inline.statement(len(w.staged), checkpoint, w.ignore)
	tag, err := s.exchange.ExecTag(ctx, st.name, st.sql, args)
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
