package pipeline

import (
	"context"
	"sync"
)

// group runs the goroutines of one attempt. The first error cancels the context of the
// others; Wait returns the first error that is not a Fault, else the first Fault, so a
// sink's terminal error met while writing what a failed stream delivered still stops the
// pipeline.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	err   error // the first error that is not a Fault
	fault error // the first Fault
}

func newGroup(ctx context.Context) *group {
	g := &group{}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

func (g *group) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := f()
		if err == nil {
			return
		}
		g.mu.Lock()
		if _, ok := faultOf(err); ok {
			if g.fault == nil {
				g.fault = err
			}
		} else if g.err == nil {
			g.err = err
		}
		g.mu.Unlock()
		g.cancel()
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	if g.err != nil {
		return g.err
	}
	return g.fault
}
