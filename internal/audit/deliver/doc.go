// Package deliver holds the rules by which the audit inputs' events reach their stores
// and the sinks that write who made a change (docs/contract.md, "actor"); cmd/kube-cdc
// only wires them.
//
// TopicFirst stores a batch of events (the receiver's, or a log file's with its position)
// in the actors topic first, then in the audit store (PostgreSQL): a batch it acknowledges
// is in both; one that failed anywhere is an error, so the apiserver (or the log reader)
// sends it again, and the topic may then hold an event twice (the same auditID), which a
// consumer dedupes by auditID. The store dedupes by audit ID itself. Records maps events
// to the actors topic's records.
//
// Lookup gives the Kafka and stdout sinks the actors audit events name exactly (the
// store's exact rule, SQL exact_actor), waiting up to Wait, polling the store every Poll,
// for an actor still to come: the apiserver's webhook sends a batch after the write it
// describes, so an event commonly arrives after its change. Snapshots and inferred
// deletes have no event to wait for. When Wait has passed, or ctx ends, it returns what
// it found, nil for the rest: a record is never held back longer than Wait for its actor,
// and a lookup error leaves the batch's actors unknown (the sink writes it without them).
//
// JoinCounter counts how the join went over the last Window every Interval, into the
// metric kube_cdc_audit_join; a failed count is logged at warn and tried at the next tick.
//
// Every wait reads an injected clock (k8s.io/utils/clock), so tests step time instead of
// sleeping.
package deliver
