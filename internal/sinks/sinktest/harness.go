package sinktest

import (
	"context"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Sink is the part of the pipeline's sink contract the suite drives (the pipeline's own
// declaration is not imported: sinks and their tests never depend on the pipeline).
type Sink interface {
	Checkpoint(ctx context.Context, res change.Resource) (change.RV, error)
	KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error
	Write(ctx context.Context, b change.Batch) error
	Close() error
}

// Preparer is the optional ability to encode a batch once: the suite writes through it
// when the sink has it, and retries a failed write by calling the same returned write
// again, as the pipeline does.
type Preparer interface {
	Prepare(b change.Batch) func(ctx context.Context) error
}

// Harness describes one sink, with one checkpoint store, to the suite.
type Harness struct {
	// Cluster is the cluster the sink writes for; the suite stamps it on every change, as
	// the pipeline does.
	Cluster string
	// ExactlyOnce says the sink never holds a record twice: writing a batch again adds
	// nothing (the PostgreSQL sink). Otherwise delivery is at least once and a rewrite may
	// append copies, as long as the per-key order holds.
	ExactlyOnce bool
	// RetrySendsOnlyTheRest says calling a prepared write again after it failed part-way
	// sends only what the failed attempt did not get acknowledged, so even an at-least-once
	// sink holds every record of that batch once (the Kafka sink).
	RetrySendsOnlyTheRest bool
	// Transactional says records, key index and checkpoint move together: after a failed
	// write the sink holds no record of the batch (the PostgreSQL sink).
	Transactional bool
	// KeyIndexFromRecords says the key index is read from the records themselves (the
	// Kafka sink with the kafka store rebuilds it from the data topic), so after a partial
	// failure it already shows the acknowledged records, ahead of the checkpoint. Otherwise
	// the key index moves only with the checkpoint.
	KeyIndexFromRecords bool
	// RemembersDeletes says a deleted key keeps its RV, so replaying an older batch does
	// not bring it back (the PostgreSQL sink's soft delete). A store that forgets deleted
	// keys lists the key again until the next relist's reconcile diff infers its delete.
	RemembersDeletes bool
	// New starts fresh durable state (a database, a broker, a file) for one case of the
	// suite and returns the Target that opens sinks on it.
	New func(t *testing.T) Target
}

// Target is one case's durable state.
type Target struct {
	// Open opens a sink on the state. The suite closes it, and may open another after
	// that: a restart, which must see everything the closed sink made durable.
	Open func(t *testing.T) Sink
	// Records reads back every record the sink durably holds of res (one per change
	// written, Kafka tombstones left out), each key's records in the order a consumer sees
	// them.
	Records func(t *testing.T, res change.Resource) []Record
	// Break makes the next write of b fail part-way: after some of b went out (records
	// acknowledged, rows written, lines printed) and before the sink could finish. The
	// failure lasts until heal is called.
	Break func(t *testing.T, b change.Batch) (heal func())
}

// Record is what a sink holds of one change.
type Record struct {
	Key change.Key
	RV  change.RV
	Op  change.Op
}
