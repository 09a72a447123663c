package checkpoint

import (
	"context"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Store is a durable home for checkpoints and key indexes, keyed by sink name and resource.
type Store interface {
	// Load returns the sink's checkpoint for res, or 0 when there is none.
	Load(ctx context.Context, sink string, res change.Resource) (change.RV, error)
	// KeyIndex calls fn for every live key the sink holds of res.
	KeyIndex(ctx context.Context, sink string, res change.Resource, fn func(change.Key, change.Entry) error) error
	// Commit atomically applies b's changes to the key index (a delete removes the key,
	// anything else sets it to the change's UID and RV) and sets the checkpoint to
	// b.Checkpoint. Call it only after the sink acknowledged b's records. It is durable
	// when it returns, unless the store groups Commits (GroupCommitStore).
	Commit(ctx context.Context, sink string, b change.Batch) error
	Close() error
}

// IntentStore is an optional Store ability, for a store whose key index is kept apart from
// the records it indexes (the file store): a sink sends a batch's records first and
// Commits after, so a crash between the two leaves records out that the index lacks, and
// a key the index lacks is never tombstoned once its object is gone (a relist finds it
// neither listed nor held). Intend, called before the records go out, adds each live key
// of b that the index lacks, at RV 0: "may have been written". A relist then rewrites the
// key if it is listed (RV 0 is no version it could show) and tombstones it if it is not;
// Commit replaces it with the version written. A key intended but never sent costs at
// most one needless tombstone. Keys the index has already are left as they are.
type IntentStore interface {
	Intend(ctx context.Context, sink string, b change.Batch) error
}

// Intend has store note b's keys before a sink sends b, when it keeps intents
// (IntentStore).
func Intend(ctx context.Context, store Store, sink string, b change.Batch) error {
	if s, ok := store.(IntentStore); ok {
		return s.Intend(ctx, sink, b)
	}
	return nil
}

// GroupCommitStore is an optional Store ability, for a store that makes Commits durable
// in groups (the file store with a flush interval, FileOptions.FlushInterval): Commit
// returns once the batch is applied in memory, reads see it at once, and a later flush
// writes it with the others. A crash loses the Commits since the last flush, whole and in
// order, so the sink re-emits their records (at least once allows it); Close flushes.
type GroupCommitStore interface {
	// WhenDurable calls fn once every Commit that returned before it is durable: at once
	// when none is pending, else after the flush that writes them, on its goroutine.
	WhenDurable(fn func())
	// Flush writes every pending Commit and returns once they are durable.
	Flush(ctx context.Context) error
}

// WhenDurable has store call fn once every Commit that returned before is durable: at once
// for a store whose Commits are durable when they return.
func WhenDurable(store Store, fn func()) {
	if s, ok := store.(GroupCommitStore); ok {
		s.WhenDurable(fn)
		return
	}
	fn()
}

// Flush writes store's pending Commits, when it groups them (GroupCommitStore).
func Flush(ctx context.Context, store Store) error {
	if s, ok := store.(GroupCommitStore); ok {
		return s.Flush(ctx)
	}
	return nil
}

// EpochStore is an optional Store ability: it keeps the epoch of each checkpoint
// (change.Batch.Epoch), so a sink goes on in the epoch it reached after a time travel.
type EpochStore interface {
	// Epoch returns the epoch of the sink's checkpoint of res; 0 when there is none.
	Epoch(ctx context.Context, sink string, res change.Resource) (int, error)
}

// LoadEpoch is store's epoch of (sink, res), or 0 when store keeps no epochs.
func LoadEpoch(ctx context.Context, store Store, sink string, res change.Resource) (int, error) {
	if e, ok := store.(EpochStore); ok {
		return e.Epoch(ctx, sink, res)
	}
	return 0, nil
}

// ScopeStore is an optional Store ability: it keeps checkpoints per scope and can say
// which scopes of a resource it has and forget those no longer configured (see
// pipeline.ScopeKeeper).
type ScopeStore interface {
	Scopes(ctx context.Context, sink string, res change.Resource) ([]string, error)
	ForgetScopes(ctx context.Context, sink string, res change.Resource, keep []string) error
}

// Scopes is store's scopes of res's resource for sink, or none when it keeps no scopes.
func Scopes(ctx context.Context, store Store, sink string, res change.Resource) ([]string, error) {
	if s, ok := store.(ScopeStore); ok {
		return s.Scopes(ctx, sink, res)
	}
	return nil, nil
}

// ForgetScopes has store forget sink's scopes of res's resource not in keep, when it keeps
// scopes.
func ForgetScopes(ctx context.Context, store Store, sink string, res change.Resource, keep []string) error {
	if s, ok := store.(ScopeStore); ok {
		return s.ForgetScopes(ctx, sink, res, keep)
	}
	return nil
}
