// Package audit reads the apiserver's audit events (audit.k8s.io/v1) for the join that
// names who made each change (docs/contract.md, "actor").
//
// Decode reads an EventList (the webhook backend's batch, or a log shipper's) as it
// streams, one event in memory at a time, and keeps only the events that can have made
// a change: stage ResponseComplete, a write verb (create, update, patch, delete,
// deletecollection), a 2xx response, not a dry run.
// Refused writes (403, 409, …), dry runs and everything else are counted, never kept. Of a
// kept event only what the join needs is extracted (Event): who (user, impersonation,
// user agent, source IPs), what (verb, objectRef) and, from the response object, its
// metadata.resourceVersion and uid (for deletecollection, the deleted items' uids).
// Request and response bodies are read for that and dropped: never stored, never logged,
// since Secrets travel in them at level RequestResponse. DecodeEvent reads one event (a log
// line) through the same extraction: the fields are looked up in one place (extractJSON),
// which the tests hold to k8s.io/apiserver's published types.
//
// Receiver is the webhook backend's endpoint: HTTPS on its own address, callers
// authenticated by a client certificate (of a configured CA) or a bearer token, anything
// else refused with 401. It answers 2xx only once Store has made the batch durable, so
// the apiserver re-sends what was not acknowledged; a Store keyed by audit ID makes
// re-sent events harmless. It runs on every replica, leader or standby. Its memory is
// bounded: a body over MaxBodyBytes is answered 413 without being read (or read no
// further), and beyond MaxInFlight requests at once it answers 503 with Retry-After,
// which the apiserver's client waits out and sends again. Whoever holds its token or a
// certificate of its client CA can post any events: that is its trust boundary.
//
// LogFile reads the same events from an apiserver audit log file (JSON lines), follows it
// across rotation (a rename: the renamed file, found by its inode, is read to its end;
// a truncation: read from the start) and stores each batch of lines together with the
// position after them (PositionStore), so a restart resumes after the last line stored.
//
// This package imports nothing of the project: where the events go (PostgreSQL, the
// actors topic) and how the sinks wait for them are internal/audit/deliver's rules.
package audit
