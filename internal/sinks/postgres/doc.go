// Package postgres is the PostgreSQL sink: current state in objects, an audit trail in
// changes, and the sink's checkpoints in checkpoints, all in one schema (a contract:
// docs/contract.md, "PostgreSQL schema"; the SQL is in /migrations).
//
// What Write promises:
//
//   - Both or neither. A batch's objects rows, its changes rows and its checkpoint commit in
//     one transaction, so after a crash the checkpoint says exactly what the tables hold
//     (effectively-once delivery, docs/guarantees.md).
//   - Idempotence. Writing a batch again inserts no changes row twice (one row per key,
//     epoch, RV and op: since changes is partitioned by time, migration 012, no UNIQUE key
//     can say it, so the insert asks changes unless the key's objects row proves the change
//     new; insertChangesSQL) and leaves objects as they were; the pipeline may therefore
//     retry any Write whose outcome it does not know.
//   - The RV guard. An objects row only moves to a higher resource version
//     (ON CONFLICT … DO UPDATE … WHERE objects.resource_version < excluded.resource_version),
//     so a replayed or reordered older change never overwrites a newer one, and a
//     checkpoint never moves backwards (GREATEST).
//   - Deletes are soft by default: deleted_at is set, delete_inferred says whether the
//     DELETE was observed or inferred by a relist, and the row keeps the last object. A
//     later change with a higher RV (a re-created object, new uid) revives the row and
//     resets created_at. With HardDelete the row is deleted instead; then nothing guards
//     against replaying an older change of that key, which recreates the row until the
//     next relist.
//   - A poison object never stops the sink. A change PostgreSQL cannot store goes to the
//     quarantine table instead of objects and changes, in the batch's transaction, and
//     the checkpoint moves on. Known poisons are found before the write (jsonbRejects:
//     the escape \u0000, legal in Kubernetes, and lone UTF-16 surrogate escapes, which
//     jsonb rejects); anything else the server refuses with a data exception (SQLSTATE
//     class 22) fails the batch, which is then written again in halves under savepoints,
//     halving what fails until the changes at fault stand alone (writeBisecting). A
//     quarantine row keeps the key, uid, epoch, RV, op, reason, SQLSTATE and the object's raw
//     bytes; each new one is logged at warn and counted (the Metrics hook,
//     kube_cdc_quarantined_total). A replay quarantines nothing twice (quarantine is
//     unique on key, epoch, RV and op). A delete whose last state is the poison is still stored, as a
//     delete without that state (objects keeps the last good object), so the sink never
//     keeps a deleted object alive. Rows are never deleted by kube-cdc: a later version of
//     the key written to objects (or a delete) marks the row resolved (resolved_at,
//     resolved_rv), so the table stays the record of what the changes trail lacks;
//     Status counts the unresolved rows per resource.
//   - Errors are classified once (pgdb.Classify): bad credentials, missing privileges, an
//     unknown database or missing tables are retry.Terminal; lost connections, restarts and
//     timeouts are retryable. No error or log line contains the DSN's password.
//   - One writer. A sink that streams claims its writer lock first (ClaimWriter, package
//     writerlock); once another process took it, every Write fails with a terminal error.
//
// How: the batch is copied (COPY, binary) into a temporary staging table, then one
// INSERT … SELECT DISTINCT ON (key) … ORDER BY key, rv DESC … ON CONFLICT upserts the
// newest change of each key, one INSERT … ORDER BY seq appends the new changes (it runs
// first, reading the objects rows as the batch found them) (ids in batch order: a scan of the stage alone is not, since PostgreSQL puts
// a later, narrower row in an earlier page's free space), quarantined changes are
// inserted, quarantined keys the batch brings anew are resolved, and one upsert moves the
// checkpoint. Object JSON goes to jsonb as the source produced it,
// never decoded in Go. A batch of up to 64 changes skips COPY: a steady watch's batch
// (no snapshots, quarantined changes, hard deletes or time travel) is one statement whose
// VALUES list stands for the stage and whose data-modifying CTEs do the same writes
// (write_inline.go); any other small batch is the stage insert and the statements,
// pipelined in one round trip (write_small.go); a larger one is COPY (write_copy.go).
// The statements name their parameters (@cluster, @resource, …: pgx.NamedArgs).
//
// The schema is package schema's: New migrates through it (unless Migrate is false, when
// it only verifies that this binary may write to the schema), and its Upkeep keeps the
// history in shape in the background of Write, never making a write wait: the months of
// changes ahead (EnsurePartitions, at start and every hour), retention (Retain) and
// statistics after COPY batches. The write path's plans do not wait for statistics
// (each lookup names its row by a unique key).
//
// Rows are keyed by (cluster, group, resource, namespace, name), not by scope: KeyIndex
// returns every live object of the resource whatever scope wrote it, while checkpoints
// are kept per scope.
//
// New is a writer's start (migrations, the retention record, the months ahead). The
// commands that only read (status, history, as-of) and the web UI read through a Reader
// (reader.go) instead: a read-only session (default_transaction_read_only) that writes
// nothing, so a role with SELECT is enough and a writer's retention stays as it set it.
//
// Check (check.go) is what `kube-cdc check` says of the sink: it connects as run does
// (without the retention record and the months ahead) and asks the catalogs
// (has_*_privilege; it changes nothing) whether the role may do what run will do. Options.Validate (validate.go) is the config layer's check of the
// sinks[].postgres keys. No message shows the DSN's password: pgdb.ScrubPassword is the
// one scrubber, for the sink's errors, Check's and Validate's.
//
// NewAuditStore opens the audit store (internal/sinks/postgres/auditstore) on the sink's
// database, migrating or verifying the schema first as New does; the store is a package
// of its own and imports nothing of the sink.
package postgres
