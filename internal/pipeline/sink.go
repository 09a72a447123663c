package pipeline

import (
	"context"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Sink is what the pipeline needs of a sink. Implementations live in internal/sinks/...
type Sink interface {
	// Name is the sink's configured name; its checkpoints are keyed by it.
	Name() string
	// Checkpoint returns the RV up to which the sink durably holds every change of res,
	// or 0 when it holds nothing of res (then the pipeline relists).
	Checkpoint(ctx context.Context, res change.Resource) (change.RV, error)
	// KeyIndex calls fn for every live (not deleted) object of res the sink holds. The
	// reconcile diff after a relist compares the listed set against it.
	KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error
	// Write durably applies b and advances the sink's checkpoint for b.Resource to
	// b.Checkpoint, both or neither where the sink can promise it. On error the pipeline
	// writes the same batch again (after a backoff when retry.IsTerminal(err) is false,
	// never when it is true), so writes must be idempotent.
	Write(ctx context.Context, b change.Batch) error
	// Close releases the sink's connections. It does not promise delivery of anything.
	Close() error
}

// Preparer is an optional Sink ability. A sink that turns a batch into a wire form
// (Kafka records, JSON lines) does it once in Prepare; the pipeline then calls only the
// returned write, again after each retryable failure, so encoding never repeats and the
// write can remember how far an earlier attempt got (the records a broker already
// acknowledged are not sent twice). The returned write has Write's contract.
type Preparer interface {
	Prepare(b change.Batch) func(ctx context.Context) error
}

// ScopeKeeper is an optional Sink ability: a sink that keeps checkpoints per scope can
// say which scopes of a resource it holds and forget those no longer configured. When
// it holds a scope no target has (a namespace or selector removed from the
// configuration), the resource's sweeping target (Target.Sweeps) relists into it, so its
// reconcile diff tombstones the rows the removed scope left (out of scope), and then the
// stale checkpoints are forgotten.
type ScopeKeeper interface {
	// Scopes returns the scopes of res's group and resource that have a checkpoint.
	Scopes(ctx context.Context, res change.Resource) ([]string, error)
	// ForgetScopes removes the checkpoints of res's group and resource whose scope is not
	// in keep.
	ForgetScopes(ctx context.Context, res change.Resource, keep []string) error
}

// EpochKeeper is an optional Sink ability: a sink that stores the epoch of its checkpoint
// (change.Batch.Epoch) says which it is, so that a restart after a time travel goes on
// in the new epoch. A sink without it starts every run in epoch 0.
type EpochKeeper interface {
	// Epoch returns the epoch of the sink's checkpoint of res; 0 when it has none.
	Epoch(ctx context.Context, res change.Resource) (int, error)
}

// TimeTravelObserver is an optional Metrics ability: it counts time travels.
type TimeTravelObserver interface {
	TimeTravel(sink, resource, reason string)
}

// IdentityKeeper is an optional Sink ability: a sink that keeps the cluster's identity
// (change.Batch.ClusterUID) with its checkpoints says which identities they were taken
// in. One other than Options.ClusterUID is a cluster rebuilt under the same name.
type IdentityKeeper interface {
	ClusterUIDs(ctx context.Context) ([]string, error)
}

// NewestKeeper is an optional Sink ability: the versions of a resource it holds with the
// highest (epoch, RV), live or tombstoned, newest first, at most n. With Target.Current,
// the pipeline checks at start that the cluster has not gone back behind them.
type NewestKeeper interface {
	Newest(ctx context.Context, res change.Resource, n int) ([]change.Held, error)
}
