// Package check holds the rows of `kube-cdc check` that need neither the cluster's client
// nor the command's wiring: the table itself (Table), the audit receiver's row (Audit),
// a PostgreSQL sink's row (Postgres) and a Kafka sink's dead-letter topics (DeadLetters).
//
// Its contract: a row says FAIL only where `kube-cdc run` with the same config would fail
// to start, and "warn" for what run survives but an operator should fix; each row is one
// line, whatever newlines a driver's message holds. A check changes nothing: it never
// migrates a schema, creates a topic or takes a writer lock. Table counts the rows and
// the failures, and Flush fails when any check did. The rows that talk to the apiserver
// (RBAC, signals, the cluster's identity) stay with the command, which holds the client.
package check
