// Package checkpoint keeps, for sinks that cannot hold it themselves, the RV up to which
// each sink durably holds each resource and the key index the reconcile diff needs
// (key → uid, RV of every live object).
//
// Stores here are the ones tied to no sink's technology: file (bbolt; one transaction
// per commit, or, with a flush interval, the commits of each interval grouped into one
// transaction while reads see them at once: GroupCommitStore) and none (remembers
// nothing). A file has one writer, which holds its lock while it runs; readers open it
// read-only (OpenFileReadOnly, refused at once while it is held) or read the writer's
// consistent copy (WriteSnapshot). The Kafka sink's offsets-topic store lives
// with the Kafka sink (internal/sinks/kafka); the PostgreSQL sink keeps both in its own
// database, in the same transaction as the rows, and needs no Store.
package checkpoint
