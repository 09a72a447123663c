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
