package stdout

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
)

// Sink writes changes as JSON lines. It is safe for concurrent use; batches are written
// whole, so lines of different batches never interleave.
type Sink struct {
	name  string
	store checkpoint.Store

	mu sync.Mutex // serialises writes to w
	w  io.Writer
}

// DefaultCheckpointType is the checkpoint store a stdout sink uses unless configured:
// none, so every start relists and prints a snapshot.
const DefaultCheckpointType = checkpoint.TypeNone

// New returns a sink named name writing to w, keeping its checkpoints in store
// (checkpoint.None{} to keep none: the pipeline then relists every resource at start).
func New(name string, w io.Writer, store checkpoint.Store) *Sink {
	if store == nil {
		store = checkpoint.None{}
	}
	return &Sink{name: name, w: w, store: store}
}

// Name is the sink's configured name.
func (s *Sink) Name() string { return s.name }

// Checkpoint returns the store's checkpoint for res.
func (s *Sink) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	return s.store.Load(ctx, s.name, res)
}

// Epoch (pipeline.EpochKeeper) returns the epoch of the store's checkpoint for res; 0
// when the store keeps none.
func (s *Sink) Epoch(ctx context.Context, res change.Resource) (int, error) {
	return checkpoint.LoadEpoch(ctx, s.store, s.name, res)
}

// Scopes (pipeline.ScopeKeeper) returns the scopes of res's resource the store has a
// checkpoint of; none when the store keeps no scopes.
func (s *Sink) Scopes(ctx context.Context, res change.Resource) ([]string, error) {
	return checkpoint.Scopes(ctx, s.store, s.name, res)
}

// ForgetScopes (pipeline.ScopeKeeper) has the store forget the scopes of res's resource
// not in keep.
func (s *Sink) ForgetScopes(ctx context.Context, res change.Resource, keep []string) error {
	return checkpoint.ForgetScopes(ctx, s.store, s.name, res, keep)
}

// KeyIndex walks the store's key index for res.
func (s *Sink) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	return s.store.KeyIndex(ctx, s.name, res, fn)
}

// Write is Prepare(b)(ctx).
func (s *Sink) Write(ctx context.Context, b change.Batch) error { return s.Prepare(b)(ctx) }

// Prepare encodes every change of b as one JSON line, once; the returned write writes
// the lines with a single Write call and then commits b's checkpoint and key index to
// the store. Retried after a failed commit, it commits again without printing the lines
// a second time; after a failed print it prints them again (at least once).
func (s *Sink) Prepare(b change.Batch) func(ctx context.Context) error {
	var buf []byte
	for i := range b.Changes {
		buf = envelope.Append(buf, &b.Changes[i])
		buf = append(buf, '\n')
	}
	printed := len(buf) == 0
	return func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !printed {
			s.mu.Lock()
			_, err := s.w.Write(buf)
			s.mu.Unlock()
			if err != nil {
				return fmt.Errorf("stdout sink %s: write %s: %w", s.name, b.Resource.ID(), err)
			}
			printed = true
		}
		if err := s.store.Commit(ctx, s.name, b); err != nil {
			return fmt.Errorf("stdout sink %s: commit %s: %w", s.name, b.Resource.ID(), err)
		}
		return nil
	}
}

// Close closes the store. It does not close the writer, which the caller owns.
func (s *Sink) Close() error { return s.store.Close() }
