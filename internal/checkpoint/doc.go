// Package checkpoint keeps, for sinks that cannot hold it themselves (Kafka, stdout), the
// RV up to which each sink durably holds each resource and the key index the reconcile diff
// needs (key → uid, RV of every live object).
//
// Stores: file (bbolt, one transaction per commit) and kafka (a compacted topic in the
// Kafka Connect offsets convention). The PostgreSQL sink keeps both in its own database,
// in the same transaction as the rows, and needs no Store.
package checkpoint
