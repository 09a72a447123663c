// Package upgradetest proves that an upgrade keeps what an older kube-cdc stored: a
// PostgreSQL schema migrated and filled by an older binary (a committed pg_dump in
// testdata, written by that binary: fixture_test.go, behind the upgradefixture build tag,
// RELEASING.md) is restored into a real PostgreSQL, upgraded by this binary's migrations,
// and compared with what it held before, row by row and through history(), as_of() and
// the relation views; the sink of this binary then reads the old checkpoints.
package upgradetest
