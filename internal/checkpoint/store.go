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
	// b.Checkpoint. Call it only after the sink acknowledged b's records.
	Commit(ctx context.Context, sink string, b change.Batch) error
	Close() error
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
