package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
)

// The staging table one Write copies its batch into. It lives in the session's temporary
// schema, is created once per connection (AfterConnect) and emptied at every commit, so
// concurrent Writes (one connection each) never meet and no Write pays for DDL: creating
// and dropping a table per transaction cost milliseconds of catalog churn per batch, which
// dominated the latency of the small batches of a steady stream.
const (
	stageTable  = "kube_cdc_stage"
	stageWidth  = 15
	createStage = `CREATE TEMP TABLE kube_cdc_stage (
		seq         int         NOT NULL,  -- position in the batch
		namespace   text        NOT NULL,
		name        text        NOT NULL,
		uid         text        NOT NULL,
		rv          bigint      NOT NULL,
		epoch       int         NOT NULL,  -- change.Change.Epoch: versions order by (epoch, rv)
		op          text        NOT NULL,
		inferred    boolean     NOT NULL,
		reason      text,                  -- why an inferred delete happened; NULL when observed
		snapshot    boolean     NOT NULL,
		list_rv     bigint      NOT NULL,  -- a snapshot's LIST RV, else 0
		object      jsonb,
		labels      jsonb       NOT NULL,
		changed_by  text        NOT NULL,
		observed_at timestamptz NOT NULL,
		skip        boolean     NOT NULL DEFAULT false  -- noise: no changes row (skipNoiseSQL); not copied
	) ON COMMIT DELETE ROWS`
)

var stageColumns = []string{"seq", "namespace", "name", "uid", "rv", "epoch", "op", "inferred", "reason", "snapshot",
	"list_rv", "object", "labels", "changed_by", "observed_at"}

// latestPerKey is the newest staged change of each key: the only one that can move its
// objects row, since the RV guard would reject the older ones anyway. Only the narrow key
// columns are sorted (a sort of whole rows spills 20k objects to disk), then the chosen
// rows are picked by seq.
const latestPerKey = `(SELECT * FROM pg_temp.kube_cdc_stage
	 WHERE seq IN (SELECT DISTINCT ON (namespace, name) seq
	                 FROM pg_temp.kube_cdc_stage
	                ORDER BY namespace, name, epoch DESC, rv DESC, seq DESC))`

// drifted is true when the objects row (alias prefix p) is no longer what the upsert
// wrote (migration 008): another transaction wrote it last and its object hashes
// differently. The CASE keeps the hash off the rows kube-cdc wrote last: one md5 of
// every row cost the key index 4–12× its time (docs/benchmarks.md, "Drift check").
func drifted(p string) string {
	return fmt.Sprintf(`CASE WHEN %[1]sxmin::text::bigint = %[1]sobject_xmin THEN false
				ELSE jsonb_hash_extended(%[1]sobject, 0) IS DISTINCT FROM %[1]sobject_hash END`, p)
}

// statements are the sink's SQL with the schema filled in.
type statements struct {
	probe, checkpoint, keyIndex, upsert, hardDelete, insertChanges, insertChangesDiff, saveCheckpoint string
	quarantine, resolve, revive, epoch, saveEpoch, newest, clusterUIDs                                string
	scopes, forgetScopes                                                                              string
}

func newStatements(schema string) statements {
	s := pgx.Identifier{schema}.Sanitize()
	return statements{
		probe: fmt.Sprintf(`SELECT (SELECT 1 FROM %[1]s.objects LIMIT 0), (SELECT 1 FROM %[1]s.changes LIMIT 0),
			(SELECT 1 FROM %[1]s.checkpoints LIMIT 0), (SELECT 1 FROM %[1]s.quarantine LIMIT 0)`, s),

		checkpoint: fmt.Sprintf(`SELECT resource_version FROM %s.checkpoints
			WHERE cluster = $1 AND sink = $2 AND api_group = $3 AND resource = $4 AND scope = $5`, s),
		// $1 cluster, $2 group, $3 resource, $4 limit. A top-N sort of the resource's rows,
		// once per resource and start: no index on the RV (it would cost every update).
		newest: fmt.Sprintf(`SELECT namespace, name, uid, resource_version, epoch, deleted_at IS NOT NULL, delete_inferred
			FROM %s.objects WHERE cluster = $1 AND api_group = $2 AND resource = $3
			ORDER BY epoch DESC, resource_version DESC LIMIT $4`, s),
		epoch: fmt.Sprintf(`SELECT epoch FROM %s.checkpoints
			WHERE cluster = $1 AND sink = $2 AND api_group = $3 AND resource = $4 AND scope = $5`, s),

		// The last column is change.Entry.Drifted: the object is no longer what the upsert
		// wrote (migration 008), so the row was edited behind kube-cdc's back. Only rows
		// another transaction wrote last are hashed again.
		keyIndex: fmt.Sprintf(`SELECT namespace, name, uid, resource_version, epoch, %s FROM %s.objects
			WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND deleted_at IS NULL`, drifted(""), s),

		// @cluster, @group, @version, @resource, @kind, @hard_delete.
		// Versions order by (epoch, RV): a new epoch's version replaces any of an older
		// epoch, whatever the RVs (time travel). At an equal version a delete wins over a live row: an inferred delete carries the
		// LIST's RV, which is the object's own when it was the last write before the LIST.
		// Deletes keep the last object (an inferred delete brings none) and record whether
		// they were inferred; anything else revives the row. A new uid resets created_at.
		// object_xmin and object_hash record who wrote the object and what it hashed to
		// (drift checks, migration 008); a live row at the same version that is drifted was
		// edited by hand, and the same version written again (the reconcile diff's repair)
		// replaces it.
		upsert: upsertSQL(s, latestPerKey, "NOT s.skip"),

		// $1 cluster, $2 group, $3 resource. Runs before the upsert, for batches that hold
		// snapshots. A row an inferred delete tombstoned at an RV the LIST had reached
		// (tombstone RV <= the snapshot's list_rv) is wrong about the cluster as the LIST
		// saw it: the object was there, in this scope. The RV guard would keep it
		// tombstoned forever (the inferred delete carries a LIST's RV, above the object's
		// own), so its RV is lowered below the snapshot's and the upsert then revives it.
		// A tombstone above list_rv was made after the LIST (another scope's relist, a
		// later look at the cluster) and stands; an observed delete is never touched.
		// When the staged key is there several times, any of its rows lowers the RV below
		// the newest one, which the upsert takes. The uncorrelated EXISTS is a one-time
		// filter on the objects_inferred index: while the resource has no inferred
		// tombstone (the usual case) the stage is not even read: a relist batch of 20,000
		// 1.3 KB snapshots wrote in 0.63–0.77 s with or without this step, against
		// 0.77–0.89 s with an unfiltered join.
		revive: fmt.Sprintf(`UPDATE %[1]s.objects o SET resource_version = s.rv - 1
			  FROM pg_temp.kube_cdc_stage s
			 WHERE o.cluster = $1 AND o.api_group = $2 AND o.resource = $3
			   AND o.namespace = s.namespace AND o.name = s.name
			   AND o.deleted_at IS NOT NULL AND o.delete_inferred
			   AND s.snapshot AND s.op <> 'delete' AND s.list_rv >= o.resource_version
			   AND o.resource_version >= s.rv AND o.epoch = s.epoch
			   AND EXISTS (SELECT 1 FROM %[1]s.objects t
							WHERE t.cluster = $1 AND t.api_group = $2 AND t.resource = $3
							  AND t.deleted_at IS NOT NULL AND t.delete_inferred)`, s),

		// $1 cluster, $2 group, $3 resource. The same RV guard as the upsert's for deletes.
		hardDelete: fmt.Sprintf(`DELETE FROM %s.objects o USING %s s
			WHERE s.op = 'delete' AND o.cluster = $1 AND o.api_group = $2 AND o.resource = $3
			  AND o.namespace = s.namespace AND o.name = s.name
			  AND (o.epoch, o.resource_version) <= (s.epoch, s.rv)`, s, latestPerKey),

		// @cluster, @group, @resource, @hard_delete. ids follow batch order because of the ORDER BY
		// seq, and only because of it: a sequential scan of the stage does not return rows
		// in the order they were written, since a row too wide for the current page sends
		// the next ones to an earlier page's free space (issue 12: 2.1% of ids out of
		// watch order with objects of varied sizes).
		insertChanges: insertChangesSQL(s, "pg_temp.kube_cdc_stage", true, false),
		// The same for a batch with a watch update, which gets its changed paths.
		insertChangesDiff: insertChangesSQL(s, "pg_temp.kube_cdc_stage", true, true),

		// $1 cluster, $2 group, $3 version, $4 resource, $5 kind, $6 namespace, $7 name,
		// $8 uid, $9 RV, $10 op, $11 inferred, $12 snapshot, $13 changed_by, $14 observed_at,
		// $15 reason, $16 sqlstate, $17 raw, $18 resolved_rv (the delete's own RV when it was
		// stored without its last state, else NULL), $19 epoch. A row whose key objects
		// already holds at a higher (epoch, RV) (a replay after a later version landed) is
		// resolved at once.
		quarantine: fmt.Sprintf(`INSERT INTO %[1]s.quarantine (cluster, api_group, api_version, resource, kind,
				namespace, name, uid, resource_version, op, inferred, snapshot, changed_by, observed_at,
				reason, sqlstate, raw, resolved_at, resolved_rv, epoch)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
				CASE WHEN coalesce($18::bigint, newer.rv) IS NOT NULL THEN now() END, coalesce($18::bigint, newer.rv), $19
			  FROM (SELECT max(resource_version) AS rv FROM %[1]s.objects
					 WHERE cluster = $1 AND api_group = $2 AND resource = $4 AND namespace = $6 AND name = $7
					   AND (epoch, resource_version) > ($19::int, $9::bigint)) newer
			ON CONFLICT (cluster, api_group, resource, namespace, name, epoch, resource_version, op) DO NOTHING`, s),

		// @cluster, @group, @resource. A staged change newer than a quarantined one
		// of its key resolves it: objects holds a good version again. The uncorrelated
		// EXISTS is a one-time filter, so while nothing of the resource is in quarantine
		// (the usual case) the stage is not even read.
		resolve: resolveSQL(s, latestPerKey),

		// A checkpoint never moves backwards in (epoch, RV), even when an old batch is
		// replayed; a new epoch's checkpoint replaces a higher RV of an older one.
		// @cluster_uid is the cluster's identity ('' when unknown: the one stored stays).
		saveCheckpoint: fmt.Sprintf(`INSERT INTO %s.checkpoints AS c (cluster, sink, api_group, resource, scope,
				resource_version, epoch, cluster_uid, updated_at)
			VALUES (@cluster, @sink, @group, @resource, @scope, @rv, @epoch, @cluster_uid, now())
			ON CONFLICT (cluster, sink, api_group, resource, scope) DO UPDATE SET
				resource_version = CASE WHEN (c.epoch, c.resource_version) < (excluded.epoch, excluded.resource_version)
				                        THEN excluded.resource_version ELSE c.resource_version END,
				epoch            = GREATEST(c.epoch, excluded.epoch),
				cluster_uid      = CASE WHEN excluded.cluster_uid = '' THEN c.cluster_uid ELSE excluded.cluster_uid END,
				updated_at       = now()`, s),
		// $1 cluster, $2 sink.
		clusterUIDs: fmt.Sprintf(`SELECT DISTINCT cluster_uid FROM %s.checkpoints
			WHERE cluster = $1 AND sink = $2 AND cluster_uid <> ''`, s),
		// $1 cluster, $2 sink, $3 group, $4 resource, $5 scope, $6 epoch, $7 reason,
		// $8 checkpoint RV, $9 LIST RV, $10 namespace, $11 name, $12 held RV, $13 time.
		saveEpoch: fmt.Sprintf(`INSERT INTO %s.epochs (cluster, sink, api_group, resource, scope, epoch, reason,
				checkpoint_rv, list_rv, namespace, name, held_rv, detected_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT DO NOTHING`, s),

		// $1 cluster, $2 sink, $3 group, $4 resource.
		scopes: fmt.Sprintf(`SELECT scope FROM %s.checkpoints
			WHERE cluster = $1 AND sink = $2 AND api_group = $3 AND resource = $4`, s),
		// $1 cluster, $2 sink, $3 group, $4 resource, $5 the scopes to keep.
		forgetScopes: fmt.Sprintf(`DELETE FROM %s.checkpoints
			WHERE cluster = $1 AND sink = $2 AND api_group = $3 AND resource = $4 AND scope <> ALL($5::text[])`, s),
	}
}

// upsertSQL moves the newest change of each key of src (a relation with the stage's
// columns, one row per key, aliased s) into objects. inChanges is the boolean expression
// over s that says whether the version has a changes row (objects.in_changes: false for
// noise left out). Named parameters (writeArgs): @cluster, @group, @version,
// @resource, @kind, @hard_delete.
func upsertSQL(schema, src, inChanges string) string {
	return fmt.Sprintf(`INSERT INTO %s.objects AS o (cluster, api_group, api_version, resource, kind,
			namespace, name, uid, resource_version, epoch, labels, object, object_xmin, object_hash, changed_by,
			created_at, updated_at, deleted_at, delete_inferred, delete_reason, in_changes)
		SELECT @cluster, @group, @version, @resource, @kind, s.namespace, s.name, s.uid, s.rv, s.epoch, s.labels, s.object,
			txid_current() %% 4294967296, jsonb_hash_extended(s.object, 0), s.changed_by,
			now(), now(), CASE WHEN s.op = 'delete' THEN now() END, s.op = 'delete' AND s.inferred,
			CASE WHEN s.op = 'delete' THEN s.reason END, %s
		  FROM %s s
		 WHERE NOT (@hard_delete::boolean AND s.op = 'delete')
		ON CONFLICT (cluster, api_group, resource, namespace, name) DO UPDATE SET
			api_version      = excluded.api_version,
			kind             = excluded.kind,
			uid              = CASE WHEN excluded.uid = '' THEN o.uid ELSE excluded.uid END,
			resource_version = excluded.resource_version,
			epoch            = excluded.epoch,
			labels           = CASE WHEN excluded.object IS NULL THEN o.labels ELSE excluded.labels END,
			object           = coalesce(excluded.object, o.object),
			object_xmin      = excluded.object_xmin,
			object_hash      = CASE WHEN excluded.object IS NULL THEN o.object_hash ELSE excluded.object_hash END,
			changed_by       = CASE WHEN excluded.object IS NULL THEN o.changed_by ELSE excluded.changed_by END,
			created_at       = CASE WHEN excluded.uid NOT IN ('', o.uid) THEN now() ELSE o.created_at END,
			updated_at       = now(),
			deleted_at       = excluded.deleted_at,
			delete_inferred  = excluded.delete_inferred,
			delete_reason    = excluded.delete_reason,
			in_changes       = excluded.in_changes
		WHERE (o.epoch, o.resource_version) < (excluded.epoch, excluded.resource_version)
		   OR (o.epoch, o.resource_version) = (excluded.epoch, excluded.resource_version)
		      AND o.deleted_at IS NULL AND excluded.deleted_at IS NOT NULL
		   OR (o.epoch, o.resource_version) = (excluded.epoch, excluded.resource_version)
		      AND o.deleted_at IS NULL AND excluded.deleted_at IS NULL AND excluded.object IS NOT NULL
		      AND %s`, schema, inChanges, src, drifted("o."))
}

// noiseSQL is what a write runs to leave a resource scope's noise out of changes (see
// skipNoiseSQL): the statement for the stage table, and the parts the single statement of
// a small batch (inline.go) is built from.
type noiseSQL struct {
	key   string // ignoreKey of the resource scope
	stage string // skipNoiseSQL
	ctes  string // noiseCTEs over the relation "stage"
}

func newNoiseSQL(schema, key string, paths []string) *noiseSQL {
	return &noiseSQL{key: key, stage: skipNoiseSQL(schema, paths), ctes: noiseCTEs(schema, "stage", paths)}
}

// skipNoiseSQL marks the noise among the staged changes of a resource whose ignore paths
// are paths (ignorepaths), counts it in history_skipped and returns how many it marked.
// @cluster, @group, @resource, @sink, @scope. Runs before the upsert and the
// changes insert, for batches that hold watch updates.
func skipNoiseSQL(schema string, paths []string) string {
	return fmt.Sprintf(`WITH %[2]s,
		marked AS (UPDATE pg_temp.kube_cdc_stage s SET skip = true FROM noise n WHERE s.seq = n.seq RETURNING 1),
		tally AS (%[3]s)
		SELECT count(*) FROM marked`, schema, noiseCTEs(schema, "pg_temp.kube_cdc_stage", paths), tallySQL(schema, "marked"))
}

// noiseCTEs are the CTEs "ordered" and "noise": noise is the seq of every change of stage
// (a relation with the stage's columns) that is noise. A staged update is noise when it
// equals the previous version of the same uid but under the ignored paths
// (ignorepaths.EqualSQL). The previous version is the batch's previous one of the key,
// in (epoch, RV) order, else the objects row (which the write has not replaced yet: the
// statement runs before the upsert, or beside it on the same snapshot). Creates,
// deletes, snapshots and an update after a delete or of another uid are never noise; nor
// is an update the objects row is not below (a batch written again: it may then record a
// version it left out the first time, never fewer). Only the narrow key columns are
// sorted, and each update costs one primary key lookup. @cluster, @group, @resource.
func noiseCTEs(schema, stage string, paths []string) string {
	return fmt.Sprintf(`ordered AS (
			SELECT seq, lag(seq) OVER (PARTITION BY namespace, name ORDER BY epoch, rv, seq) AS prev
			  FROM %[4]s),
		noise AS (
			SELECT c.seq
			  FROM ordered x
			  JOIN %[4]s c ON c.seq = x.seq
			  LEFT JOIN %[4]s p ON p.seq = x.prev
			 WHERE c.op = 'update' AND NOT c.snapshot AND c.object IS NOT NULL
			   AND CASE WHEN x.prev IS NULL
			            -- A subplan in the CASE: one primary key lookup per update (the
			            -- row is judged in the SELECT list, so that no condition makes the
			            -- partial objects_live index, a scan of the whole resource, look fit).
			            THEN (SELECT o.deleted_at IS NULL AND o.uid = c.uid AND o.object IS NOT NULL
			                         AND (o.epoch, o.resource_version) < (c.epoch, c.rv) AND %[2]s
			                    FROM %[1]s.objects o
			                   WHERE o.cluster = @cluster AND o.api_group = @group AND o.resource = @resource
			                     AND o.namespace = c.namespace AND o.name = c.name) IS TRUE
			            ELSE p.op <> 'delete' AND p.uid = c.uid AND p.object IS NOT NULL AND %[3]s
			       END)`, schema, ignorepaths.EqualSQL(paths, "o.object", "c.object"), ignorepaths.EqualSQL(paths, "p.object", "c.object"), stage)
}

// tallySQL adds the rows of src (one per change left out) to history_skipped.
// @cluster, @group, @resource, @sink, @scope.
func tallySQL(schema, src string) string {
	return fmt.Sprintf(`INSERT INTO %[1]s.history_skipped AS h (cluster, sink, api_group, resource, scope, skipped, updated_at)
			SELECT @cluster, @sink, @group, @resource, @scope, m.n, now() FROM (SELECT count(*) AS n FROM %[2]s) m WHERE m.n > 0
			ON CONFLICT (cluster, sink, api_group, resource, scope) DO UPDATE
			SET skipped = h.skipped + excluded.skipped, updated_at = now()`, schema, src)
}

// insertChangesSQL appends every change of stage (a relation with the stage's columns) to
// changes, in seq order, but those skipNoiseSQL marked when marks (the stage table has
// the skip column), and except those changes holds already: one row per (key, epoch, RV,
// op), as the changes_once UNIQUE key used to guarantee. @cluster, @group, @resource,
// @hard_delete.
//
// changes is partitioned by observed_at (migration 012), so no UNIQUE key can catch a
// replayed change: it would have to hold observed_at, which a replay stamps anew. So the
// insert asks changes itself (the changes_key_observed index: the key's rows, one descent
// per partition, their epoch, RV and op checked on the row; migration 016), except
// where the objects row, as it stood before this batch, proves the change new: the
// statement runs before the upsert (or beside it on one snapshot, in writeInline), and
// every change written before moved its key's row to its (epoch, RV) or past it, in the
// same transaction. A row below the change, or none at all (soft deletes), is that
// proof, for creates and updates: the one step that lowers a row's RV (revive, under a
// wrongly inferred delete) leaves a delete in changes above it, so deletes are always
// asked. With hard deletes a missing row proves nothing. The steady stream (each change
// newer than its row) and a first relist (no rows) never probe changes.
//
// Nor can a UNIQUE key catch two copies of one (key, epoch, RV, op) in the same batch,
// which the guard does not see either (it reads changes as it was before the statement):
// only the first of them in seq order is inserted, chosen on the stage's narrow columns.
//
// With diff, each watch update also gets its changed paths (changes.changed, migration
// 017): changed_paths against the previous version of the key, the batch's previous one
// written to changes (noise left out) or else the objects row the batch replaces, where
// that row's version has a changes row (objects.in_changes), is of the same uid and is
// live. Where the previous version is a delete, of another uid, or unknown, changed
// stays NULL and history() computes it when read. The lookup names the objects row by
// its primary key alone and tests the rest in a CASE: with deleted_at IS NULL in its
// WHERE the partial indexes objects_live and objects_live_uid qualify too, and a fresh
// database, whose tables have no statistics yet, chose objects_live and filtered every
// row of the resource (119 ms for one change at 20k objects; 6 s for a COPY batch of
// 200 updates). Without diff (a batch with no watch
// update: a relist's snapshots, creates, deletes) no row gets one and nothing is sorted.
func insertChangesSQL(schema, stage string, marks, diff bool) string {
	noise, keep, written := "", "", ""
	if marks {
		noise, keep, written = "NOT st.skip AND ", "WHERE NOT d.skip", "WHERE NOT s.skip"
	}
	changed, from := "NULL::text[]", stage+" st"
	if diff {
		changed = fmt.Sprintf(`CASE WHEN st.op = 'update' AND NOT st.snapshot AND st.object IS NOT NULL THEN
		         CASE WHEN st.prev_seq IS NOT NULL
		              THEN CASE WHEN st.prev_op <> 'delete' AND st.prev_uid = st.uid AND st.prev_object IS NOT NULL
		                        THEN %[1]s.changed_paths(st.prev_object, st.object) END
		              ELSE (SELECT CASE WHEN o.in_changes AND o.deleted_at IS NULL AND o.uid = st.uid AND o.object IS NOT NULL
		                                     AND (o.epoch, o.resource_version) < (st.epoch, st.rv)
		                                THEN %[1]s.changed_paths(o.object, st.object) END
		                      FROM %[1]s.objects o
		                     WHERE o.cluster = @cluster AND o.api_group = @group AND o.resource = @resource AND o.namespace = st.namespace
		                       AND o.name = st.name)
		         END
		       END`, schema)
		from = fmt.Sprintf(`(SELECT s.*, lag(s.seq) OVER w AS prev_seq, lag(s.op) OVER w AS prev_op,
		              lag(s.uid) OVER w AS prev_uid, lag(s.object) OVER w AS prev_object
		         FROM %s s %s
		       WINDOW w AS (PARTITION BY s.namespace, s.name ORDER BY s.epoch, s.rv, s.seq)) st`, stage, written)
	}
	return fmt.Sprintf(`INSERT INTO %[1]s.changes (cluster, api_group, resource, namespace, name, uid,
			resource_version, epoch, op, inferred, reason, snapshot, object, changed_by, observed_at, changed)
		SELECT @cluster, @group, @resource, st.namespace, st.name, st.uid, st.rv, st.epoch, st.op, st.inferred, st.reason, st.snapshot,
		       st.object, st.changed_by, st.observed_at, %[5]s
		  FROM %[6]s
		 WHERE %[3]sst.seq IN (SELECT DISTINCT ON (d.namespace, d.name, d.epoch, d.rv, d.op) d.seq FROM %[2]s d %[4]s
		                        ORDER BY d.namespace, d.name, d.epoch, d.rv, d.op, d.seq)
		   AND CASE
		 -- An inferred delete of a key objects holds tombstoned already, for the same uid,
		 -- adds no row (unless the batch changed the key before it): the object's end is
		 -- recorded. Two scopes of a resource that both cover a key (label selectors in one
		 -- namespace) each infer its delete when it leaves both, at their own LIST's RV,
		 -- and when their relists run at once both find it live.
		       WHEN st.op = 'delete' AND st.inferred
		            AND EXISTS (SELECT 1 FROM %[1]s.objects o
				 WHERE o.cluster = @cluster AND o.api_group = @group AND o.resource = @resource AND o.namespace = st.namespace
				   AND o.name = st.name AND o.deleted_at IS NOT NULL AND o.uid = st.uid)
		            AND NOT EXISTS (SELECT 1 FROM %[2]s p
				 WHERE p.namespace = st.namespace AND p.name = st.name AND p.seq < st.seq) THEN false
		 -- A snapshot update of a version the audit trail has already (a drift repair, a
		 -- resnapshot --full, of a version first recorded as a create) adds no version.
		       WHEN st.snapshot AND st.op = 'update' THEN NOT EXISTS (SELECT 1 FROM %[1]s.changes c
				 WHERE c.cluster = @cluster AND c.api_group = @group AND c.resource = @resource AND c.namespace = st.namespace
				   AND c.name = st.name AND c.epoch = st.epoch AND c.resource_version = st.rv)
		       WHEN st.op <> 'delete'
		            AND NOT EXISTS (SELECT 1 FROM %[1]s.objects o
				 WHERE o.cluster = @cluster AND o.api_group = @group AND o.resource = @resource AND o.namespace = st.namespace
				   AND o.name = st.name AND (o.epoch, o.resource_version) >= (st.epoch, st.rv))
		            AND NOT (@hard_delete::boolean AND NOT EXISTS (SELECT 1 FROM %[1]s.objects o
				 WHERE o.cluster = @cluster AND o.api_group = @group AND o.resource = @resource AND o.namespace = st.namespace
				   AND o.name = st.name))
		       THEN true
		       ELSE NOT EXISTS (SELECT 1 FROM %[1]s.changes c
				 WHERE c.cluster = @cluster AND c.api_group = @group AND c.resource = @resource AND c.namespace = st.namespace
				   AND c.name = st.name AND c.epoch = st.epoch AND c.resource_version = st.rv AND c.op = st.op)
		       END
		 ORDER BY st.seq`, schema, stage, noise, keep, changed, from)
}

// resolveSQL resolves the quarantined changes that a newer change of src (one row per
// key) supersedes. @cluster, @group, @resource.
func resolveSQL(schema, src string) string {
	return fmt.Sprintf(`UPDATE %[1]s.quarantine q SET resolved_at = now(), resolved_rv = s.rv
		  FROM %[2]s s
		 WHERE q.cluster = @cluster AND q.api_group = @group AND q.resource = @resource AND q.resolved_at IS NULL
		   AND q.namespace = s.namespace AND q.name = s.name AND (q.epoch, q.resource_version) < (s.epoch, s.rv)
		   AND EXISTS (SELECT 1 FROM %[1]s.quarantine u
						WHERE u.cluster = @cluster AND u.api_group = @group AND u.resource = @resource AND u.resolved_at IS NULL)`, schema, src)
}

// clearStage empties the stage between the chunks of writeBisecting's transaction (a
// commit empties it otherwise).
const clearStage = `DELETE FROM pg_temp.kube_cdc_stage`
