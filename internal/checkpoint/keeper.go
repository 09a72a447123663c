package checkpoint

import (
	"context"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Keeper is the half of a sink that its checkpoint store answers, for a sink that keeps
// its checkpoints in a Store (the Kafka and stdout sinks). Embedded in the sink, it gives
// it Checkpoint, KeyIndex, Epoch (pipeline.EpochKeeper) and Scopes and ForgetScopes
// (pipeline.ScopeKeeper), each the store's answer for the sink's name, and Intend and
// Commit for the sink's Prepare. A sink that does more in one of them (the Kafka sink
// checks its topics in Checkpoint) defines its own and calls the Keeper's.
type Keeper struct {
	SinkName string // the sink's configured name, which keys its checkpoints
	Store    Store
}

// CheckpointStore is the store itself (run serves a file store's copy to status).
func (k Keeper) CheckpointStore() Store { return k.Store }

// Checkpoint returns the store's checkpoint for res.
func (k Keeper) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	return k.Store.Load(ctx, k.SinkName, res)
}

// KeyIndex walks the store's key index for res.
func (k Keeper) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	return k.Store.KeyIndex(ctx, k.SinkName, res, fn)
}

// Epoch returns the epoch of the store's checkpoint for res; 0 when the store keeps none
// (LoadEpoch).
func (k Keeper) Epoch(ctx context.Context, res change.Resource) (int, error) {
	return LoadEpoch(ctx, k.Store, k.SinkName, res)
}

// Scopes returns the scopes of res's resource the store has a checkpoint of; none when
// the store keeps no scopes.
func (k Keeper) Scopes(ctx context.Context, res change.Resource) ([]string, error) {
	return Scopes(ctx, k.Store, k.SinkName, res)
}

// ForgetScopes has the store forget the scopes of res's resource not in keep.
func (k Keeper) ForgetScopes(ctx context.Context, res change.Resource, keep []string) error {
	return ForgetScopes(ctx, k.Store, k.SinkName, res, keep)
}

// Intend has the store note b's keys before the sink sends b, when it keeps intents
// (IntentStore).
func (k Keeper) Intend(ctx context.Context, b change.Batch) error {
	return Intend(ctx, k.Store, k.SinkName, b)
}

// Commit commits b to the store, once the sink's destination acknowledged it.
func (k Keeper) Commit(ctx context.Context, b change.Batch) error {
	return k.Store.Commit(ctx, k.SinkName, b)
}
