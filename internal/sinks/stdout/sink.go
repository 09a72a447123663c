package stdout

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/resolved"
)

// Sink writes changes as JSON lines. It is safe for concurrent use; batches are written
// whole, so lines of different batches never interleave.
type Sink struct {
	name string
	// Keeper answers Checkpoint, KeyIndex, Epoch (pipeline.EpochKeeper) and Scopes and
	// ForgetScopes (pipeline.ScopeKeeper) from the checkpoint store.
	checkpoint.Keeper

	mu sync.Mutex // serialises writes to w
	w  io.Writer

	resolved     *resolved.Emitter // nil unless Options.ResolvedInterval is set
	stopResolved func()
	actors       envelope.Actors // Options.Actors
}

// Options configures the sink.
type Options struct {
	// Cluster is the configured cluster name, written on resolved lines.
	Cluster string
	// ResolvedInterval is how often the sink prints a resolved line per resource whose
	// watermark moved since the last one (the `stdout.resolvedInterval` key). Default 0:
	// none.
	ResolvedInterval time.Duration
	// Actors, when set, puts who made each change into its line's source (user,
	// impersonator, userAgent, auditID) where it is known when the batch is printed.
	Actors envelope.Actors
}

// Validate checks the options' configured keys. Its error reads "<key>: <reason>", the
// key under sinks[].stdout, so that the config layer can name the whole key.
func (o Options) Validate() error {
	if o.ResolvedInterval < 0 {
		return fmt.Errorf("resolvedInterval: must not be negative (0 prints no resolved lines), got %v", o.ResolvedInterval)
	}
	return nil
}

// DefaultCheckpointType is the checkpoint store a stdout sink uses unless configured:
// none, so every start relists and prints a snapshot.
const DefaultCheckpointType = checkpoint.TypeNone

// New returns a sink named name writing to w, keeping its checkpoints in store
// (checkpoint.None{} to keep none: the pipeline then relists every resource at start).
// With opts.ResolvedInterval set it also prints resolved lines until Close.
func New(name string, w io.Writer, store checkpoint.Store, opts Options) *Sink {
	if store == nil {
		store = checkpoint.None{}
	}
	s := &Sink{name: name, w: w, Keeper: checkpoint.Keeper{SinkName: name, Store: store}, actors: opts.Actors}
	if opts.ResolvedInterval > 0 {
		s.startResolved(opts)
	}
	return s
}

// startResolved prints resolved lines every opts.ResolvedInterval: one per resource
// (scope) whose watermark moved, in the JSON of package resolved, with "op":"resolved".
// A watermark is taken from a batch only after the batch's lines were written and its
// checkpoint committed, and lines are written in order, so every change line of that
// resource up to the watermark's RV was printed before the resolved line.
func (s *Sink) startResolved(opts Options) {
	s.resolved = &resolved.Emitter{Cluster: opts.Cluster, Sink: s.name, Interval: opts.ResolvedInterval, Emit: s.printResolved}
	stop := s.resolved.Start()
	// The last watermarks; a broken pipe has nobody to tell.
	s.stopResolved = func() { _ = stop(context.Background()) }
}

func (s *Sink) printResolved(_ context.Context, ws []resolved.Watermark) error {
	var buf []byte
	for _, w := range ws {
		buf = append(resolved.Append(buf, w), '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(buf); err != nil {
		return fmt.Errorf("stdout sink %s: write resolved lines: %w", s.name, err)
	}
	return nil
}

// Name is the sink's configured name.
func (s *Sink) Name() string { return s.name }

// Write is Prepare(b)(ctx).
func (s *Sink) Write(ctx context.Context, b change.Batch) error { return s.Prepare(b)(ctx) }

// Prepare encodes every change of b as one JSON line, once; the returned write writes
// the lines with a single Write call and then commits b's checkpoint and key index to
// the store. Retried after a failed commit, it commits again without printing the lines
// a second time; after a failed print it prints them again (at least once).
func (s *Sink) Prepare(b change.Batch) func(ctx context.Context) error {
	var buf []byte
	encode := func(actors []*change.Actor) {
		for i := range b.Changes {
			var a *change.Actor
			if i < len(actors) {
				a = actors[i]
			}
			buf = envelope.AppendWith(buf, &b.Changes[i], a)
			buf = append(buf, '\n')
		}
	}
	encoded := s.actors == nil || len(b.Changes) == 0
	if encoded {
		encode(nil)
	}
	printed := len(b.Changes) == 0
	return func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !encoded {
			// The actors are looked up once, when the batch is first written (the lookup
			// may wait for them); a failed lookup prints the lines without them.
			actors, _ := s.actors.Actors(ctx, b)
			encode(actors)
			encoded = true
		}
		if !printed {
			// A kill after the print and before the commit must not leave lines whose
			// keys the index lacks (checkpoint.IntentStore).
			if err := s.Intend(ctx, b); err != nil {
				return fmt.Errorf("stdout sink %s: %w", s.name, err)
			}
			s.mu.Lock()
			_, err := s.w.Write(buf)
			s.mu.Unlock()
			if err != nil {
				return fmt.Errorf("stdout sink %s: write %s: %w", s.name, b.Resource.ID(), err)
			}
			printed = true
		}
		if err := s.Commit(ctx, b); err != nil {
			return fmt.Errorf("stdout sink %s: commit %s: %w", s.name, b.Resource.ID(), err)
		}
		if s.resolved != nil {
			s.resolved.Committed(b)
		}
		return nil
	}
}

// Close prints the last resolved lines (if on) and closes the store. It does not close
// the writer, which the caller owns.
func (s *Sink) Close() error {
	if s.stopResolved != nil {
		s.stopResolved()
	}
	return s.Store.Close()
}
