// Package auditstore keeps the apiserver's audit events (internal/audit) in a migrated
// kube-cdc schema's audit_events table, and reads back who made each change.
//
// Its contract:
//
//   - Store makes a batch durable in one transaction, all of it or none, and answers only
//     then; an event stored before (its audit ID) is left as it is, so a batch the
//     apiserver re-sends is harmless. Values text cannot hold (a NUL byte, invalid UTF-8
//     in a claim or a user agent) are stored with U+FFFD (pgtext), never failing the batch.
//   - StoreAt stores a log file's batch with the position after it, in the same
//     transaction, for the reader ForReader names (a replica's identity: the file is on
//     its host); Position reads it back (zero when none is stored).
//   - ExactActors answers, for a batch of changes, the actor audit events name exactly:
//     the SQL function exact_actor (migration 018), the exact branch of the view
//     change_actors, so a Kafka or stdout record and the database name the same actor.
//   - JoinStats counts how the join of events to changes went in a window.
//
// Every replica stores the events it receives, leader or standby: a Store claims no writer
// lock and writes no table of the sink's. It is opened on a migrated database
// (postgres.NewAuditStore migrates or verifies the schema first); the PostgreSQL sink's
// reader opens one on its own pool to count the join. Errors pass through Options.Classify.
package auditstore
