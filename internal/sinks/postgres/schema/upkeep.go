package schema

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPartitionsAhead is how many months of changes partitions exist ahead of the
// current one (migration 012) unless Options.PartitionsAhead says.
const DefaultPartitionsAhead = 3

// Options are the upkeep's share of a PostgreSQL sink's options (the sinks[].postgres
// keys of the same names).
type Options struct {
	// Retention deletes changes rows older than this; 0 keeps them forever.
	Retention time.Duration
	// RetentionByPartition makes retention drop whole months only (Retain).
	RetentionByPartition bool
	// PartitionsAhead is how many monthly partitions of changes are kept created ahead
	// of the current month; 0: DefaultPartitionsAhead.
	PartitionsAhead int
}

func (o Options) partitionsAhead() int {
	if o.PartitionsAhead <= 0 {
		return DefaultPartitionsAhead
	}
	return o.PartitionsAhead
}

// Upkeep keeps one cluster's history in a schema in shape for the sink that writes it:
// the months of changes ahead created (EnsurePartitions), old changes removed (Retain)
// and statistics left behind bulk loads (analyze.go). A writer starts it (Start), tells
// it of every write (AfterWrite, Loaded) and stops it (Close); the work runs in the
// background, never two retentions or two analyses at a time, so a write never waits
// for it.
type Upkeep struct {
	pool     *pgxpool.Pool
	schema   string // the schema's name, unquoted
	cluster  string
	sink     string // named in the log
	opts     Options
	password string // scrubbed from every error
	log      *slog.Logger
	sql      upkeepStatements

	ctx    context.Context // the background's, cancelled by Close
	cancel context.CancelFunc
	bg     sync.WaitGroup

	retentionBusy atomic.Bool
	lastRetention atomic.Int64 // unix nanoseconds
	// lastPartitions is when the months ahead were last created (EnsurePartitions).
	lastPartitions atomic.Int64
	// loaded counts the rows bulk loads put in since the last analysis, which runs in
	// the background, one at a time (analyze.go).
	loaded      atomic.Int64
	analyzeBusy atomic.Bool
}

// NewUpkeep keeps cluster's history in schema through pool, for the sink named sink;
// password is scrubbed from its errors. It does nothing until Start or a call.
func NewUpkeep(pool *pgxpool.Pool, schema, cluster, sink string, o Options, password string, log *slog.Logger) *Upkeep {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := &Upkeep{pool: pool, schema: schema, cluster: cluster, sink: sink, opts: o, password: password, log: log,
		sql: newUpkeepStatements(pgx.Identifier{schema}.Sanitize())}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	return u
}

// Start records the cluster's retention and creates the months ahead (EnsurePartitions)
// now, logging a failure: a writer's start.
func (u *Upkeep) Start(ctx context.Context) {
	u.lastPartitions.Store(time.Now().UnixNano())
	u.ensurePartitionsLogged(ctx)
}

// Background runs f in the upkeep's background, with a context Close cancels; Close waits
// for it. The sink's own upkeep (the events retention) runs here, beside the schema's.
func (u *Upkeep) Background(f func(ctx context.Context)) {
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		f(u.ctx)
	}()
}

// Close stops the background work and waits for it.
func (u *Upkeep) Close() {
	u.cancel()
	u.bg.Wait()
}

// upkeepStatements are the upkeep's SQL with the schema filled in.
type upkeepStatements struct {
	partitions, retentionRows, retentionDefault, partitionWanted, recordRetention, ensurePartitions string
	detached, retentionAudit                                                                        string
}

func newUpkeepStatements(s string) upkeepStatements {
	return upkeepStatements{
		// The partitions of changes (migration 012) with their ranges, oldest first; NULL
		// bounds are MINVALUE (changes_legacy) or the default partition's.
		partitions: fmt.Sprintf(`SELECT c.relname,
				(regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz,
				(regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
			  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			 WHERE i.inhparent = '%s.changes'::regclass
			 ORDER BY 3 NULLS LAST`, s),
		// $1 cluster, $2 cutoff, $3 chunk, $4 and $5 the range of one partition. Through
		// the parent, so that the DELETE privilege on changes is enough (partitions are
		// tables of their own, and only their owner may name them); the range limits the
		// statement to that partition's rows, and so its ctids to that partition's.
		retentionRows: fmt.Sprintf(`DELETE FROM %[1]s.changes WHERE observed_at >= $4 AND observed_at < $5
			AND ctid = ANY (ARRAY(SELECT ctid FROM %[1]s.changes
				WHERE cluster = $1 AND observed_at < $2 AND observed_at >= $4 AND observed_at < $5 LIMIT $3))`, s),
		// $1 cluster, $2 cutoff, $3 chunk, $4 the default partition, whose rows have no
		// range: told apart by tableoid, through the parent as well.
		retentionDefault: fmt.Sprintf(`DELETE FROM %[1]s.changes WHERE tableoid = $4::regclass
			AND ctid = ANY (ARRAY(SELECT ctid FROM %[1]s.changes
				WHERE tableoid = $4::regclass AND cluster = $1 AND observed_at < $2 LIMIT $3))`, s),
		// %%s the partition. $1 cluster, $2 its upper bound. How many other clusters want
		// rows of it: those that have some and keep them forever, are not recorded, or
		// keep less than its age. The clusters are read by a skip scan of the (cluster,
		// observed_at) index: one probe per cluster, whatever the partition's size.
		partitionWanted: fmt.Sprintf(`WITH RECURSIVE cl(cluster) AS (
				(SELECT cluster FROM %%[1]s ORDER BY cluster LIMIT 1)
				UNION ALL
				SELECT (SELECT p.cluster FROM %%[1]s p WHERE p.cluster > cl.cluster ORDER BY p.cluster LIMIT 1)
				  FROM cl WHERE cl.cluster IS NOT NULL)
			SELECT count(*) FROM cl LEFT JOIN %[1]s.retention r USING (cluster)
			 WHERE cl.cluster IS NOT NULL AND cl.cluster <> $1
			   AND (r.keep IS NULL OR now() - r.keep < $2::timestamptz)`, s),
		// $1 schema. Tables retention detached and did not drop (detachedMark).
		detached: `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind = 'r' AND NOT c.relispartition
			  AND obj_description(c.oid, 'pg_class') = ` + detachedMark,
		// $1 cluster, $2 cutoff, $3 chunk. The cluster's audit events received before the
		// cutoff (retention.go, retainAuditEvents), by the received_at index.
		retentionAudit: fmt.Sprintf(`DELETE FROM %[1]s.audit_events WHERE audit_id = ANY (ARRAY(
				SELECT audit_id FROM %[1]s.audit_events WHERE received_at < $2 AND cluster = $1 LIMIT $3))`, s),
		// $1 cluster, $2 its retention (NULL: forever).
		recordRetention: fmt.Sprintf(`INSERT INTO %s.retention (cluster, keep, updated_at) VALUES ($1, $2, now())
			ON CONFLICT (cluster) DO UPDATE SET keep = excluded.keep, updated_at = now()`, s),
		// $1 months ahead.
		ensurePartitions: fmt.Sprintf(`SELECT %s.changes_partitions_ensure($1)`, s),
	}
}
