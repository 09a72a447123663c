package stdout

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
)

var _ pipeline.Sink = (*Sink)(nil)

// Sink writes changes as JSON lines. It is safe for concurrent use; batches are written
// whole, so lines of different batches never interleave.
type Sink struct {
	name    string
	cluster string
	store   checkpoint.Store

	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// New returns a sink named name writing to w. cluster fills source.cluster for changes
// that carry none. store may be nil: then the sink holds no checkpoint and the pipeline
// relists every resource at start.
func New(name, cluster string, w io.Writer, store checkpoint.Store) *Sink {
	return &Sink{name: name, cluster: cluster, w: w, store: store}
}

// Name is the sink's configured name.
func (s *Sink) Name() string { return s.name }

// Checkpoint returns the store's checkpoint for res, or 0 without a store.
func (s *Sink) Checkpoint(ctx context.Context, res change.Resource) (change.RV, error) {
	if s.store == nil {
		return 0, nil
	}
	return s.store.Load(ctx, s.name, res)
}

// KeyIndex walks the store's key index for res; without a store there is nothing to walk.
func (s *Sink) KeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	if s.store == nil {
		return nil
	}
	return s.store.KeyIndex(ctx, s.name, res, fn)
}

// Write encodes every change of b as one line, writes the lines with a single Write call
// and then, with a store, commits b's checkpoint and key index. A failed write or commit
// leaves the checkpoint where it was, so the pipeline's retry writes the lines again (at
// least once).
func (s *Sink) Write(ctx context.Context, b change.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.buf[:0]
	for i := range b.Changes {
		c := &b.Changes[i]
		if c.Cluster == "" && s.cluster != "" {
			cc := *c
			cc.Cluster = s.cluster
			c = &cc
		}
		buf = envelope.Append(buf, c)
		buf = append(buf, '\n')
	}
	// Keep a moderate buffer for the next batch; let a rare huge one be collected.
	if cap(buf) <= 4<<20 {
		s.buf = buf
	} else {
		s.buf = nil
	}
	if len(buf) > 0 {
		if _, err := s.w.Write(buf); err != nil {
			return fmt.Errorf("stdout sink %s: write %s: %w", s.name, b.Resource.ID(), err)
		}
	}
	if s.store != nil {
		if err := s.store.Commit(ctx, s.name, b); err != nil {
			return fmt.Errorf("stdout sink %s: commit %s: %w", s.name, b.Resource.ID(), err)
		}
	}
	return nil
}

// Close closes the store, if any. It does not close the writer, which the caller owns.
func (s *Sink) Close() error {
	if s.store == nil {
		return nil
	}
	return s.store.Close()
}
