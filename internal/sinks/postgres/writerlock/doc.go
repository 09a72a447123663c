// Package writerlock makes one kube-cdc process the writer of a PostgreSQL sink.
//
// Two `kube-cdc run` with the same database, schema, cluster and sink name and no leader
// election (a standby never opens its sinks) would both write every change: nothing breaks
// — writes are idempotent and RV-guarded, checkpoints only move forward — but the load
// doubles and nobody notices. So a streaming sink claims a session advisory lock keyed by
// (schema, cluster, sink) before it writes anything (Lock.Claim), on a connection of its
// own outside the pool so that it stays held, and keeps it until Lock.Stop.
//
// What it promises:
//
//   - A process that finds the lock taken (and still taken Timing.Grace later) refuses
//     to start, with one terminal error wrapping ErrHeld that names the holder
//     (application_name "kube-cdc/<host>/<pid>", backend pid, client address, connected
//     since). With --wait (OrWait) it logs the holder once and waits (pg_advisory_lock,
//     woken every Timing.WarnEvery by lock_timeout), listed in pg_locks as a waiter,
//     until the holder stops.
//   - Under leader election (Fenced) the lease already fences, and a new leader must not
//     stop at the lock of an old leader whose session lingers (a frozen process keeps its
//     connection, and its lock, alive): it writes at once and takes the lock in the
//     background when it comes free.
//   - The holder looks for waiters every Timing.CheckEvery and sets the
//     ConcurrentWriters gauge (Metrics) to how many there are; `kube-cdc status` lists
//     holder and waiters (List).
//   - A session lock dies with its connection: a crashed holder's lock is released when
//     PostgreSQL sees the connection close (server-side TCP keepalives, set short on this
//     connection, cover a vanished host), and a waiter takes it over at once. A holder
//     whose lock connection is lost (a restarted server) reconnects with backoff and takes
//     the lock again; if another process took it meanwhile, this one has lost it: Lost
//     returns a terminal error naming the new holder, which the sink returns from every
//     later Write, so the process stops instead of writing beside it.
//
// Keys differ per database by construction (advisory locks are per database), so the key
// hashes only the schema, cluster and sink name. It knows nothing of changes or of the
// sink's tables.
package writerlock
