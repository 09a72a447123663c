// Package roundtrip runs a small statement on a pooled PostgreSQL connection in one round
// trip: Bind, Execute and Sync in one write, the results read to the ReadyForQuery, with
// no timer armed around the write (pgx's Exec arms one per write; why: Executor.Exec).
// The PostgreSQL sink sends a steady watch's batch this way (its single-statement write,
// inline.go).
//
// What Exec promises, as pgx's Exec does:
//
//   - The statement is prepared once per connection, under the caller's name; a DSN that
//     asks pgx not to prepare (default_query_exec_mode other than cache_statement, as
//     behind a transaction-pooling pgbouncer) runs it through pgx's Exec in that mode.
//   - A server error is a *pgconn.PgError, and the connection stays usable.
//   - A cancelled context ends the exchange at once (a socket deadline interrupts the
//     read); the connection, left mid-answer, is closed and the pool drops it. So is one
//     that failed in any other way.
//   - Statements whose parameters exceed 64 KiB, or a connection pgx is not done with,
//     go through pgx's Exec, whose writes guard against a server waiting on the client.
package roundtrip
