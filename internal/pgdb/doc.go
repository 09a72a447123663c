// Package pgdb is what every kube-cdc client of PostgreSQL shares, below the sink (the
// write side, internal/sinks/postgres) and the read store (internal/read/store), so that
// neither imports the other:
//
//   - Config parses a DSN into a pool configuration that names this process to the server
//     (application_name "kube-cdc/<host>/<pid>", unless the DSN chose one) and gives up
//     connecting after 10 s unless the DSN says otherwise.
//   - Classify decides, in one place, which errors are terminal (wrong credentials, a
//     missing privilege, database or table, a statement the server rejects) and which a
//     caller retries (everything else); no error it returns holds the password.
//   - Writers lists the sessions that hold or wait for a sink's writer lock (WriterKey),
//     which the sink takes before it writes and `kube-cdc status` shows.
//
// It knows nothing of changes, checkpoints or the schema's tables.
package pgdb
