// Package pgdb is how every part of kube-cdc that talks to PostgreSQL connects and judges
// a failure, below the sink (the write side, internal/sinks/postgres, its schema upkeep
// and writer lock), the audit store, `kube-cdc migrate` and `check`, and the read store
// (internal/read/store), so that neither side imports the other.
//
// What it promises:
//
//   - One way to read a DSN (PoolConfig, Connect): the session is named
//     "kube-cdc/<host>/<pid>" (ApplicationName) unless the DSN names it, which is how
//     other writers and `kube-cdc status` recognise a kube-cdc session, and a connect
//     times out after 10 s unless the DSN says otherwise.
//   - Errors are classified once (Classify): a failure that does not heal by waiting
//     (bad credentials, a missing privilege, an unknown database, missing tables, data
//     the server rejects, a malformed DSN) is retry.Terminal with one line naming the
//     cause; anything else (refused connections, timeouts, restarts, deadlocks,
//     overload) is left retryable. The driver's error stays reachable with errors.As.
//   - No error, and no message built with ScrubPassword, contains the DSN's password.
//   - Writers lists the sessions that hold or wait for a sink's writer lock (WriterKey),
//     which the sink takes before it writes and `kube-cdc status` shows.
//
// It knows nothing of kube-cdc's tables or changes.
package pgdb
