package retry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"
)

type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as not worth retrying. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err or anything it wraps was marked with Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}

// Backoff is an exponential backoff with full jitter.
type Backoff struct {
	Initial time.Duration // first delay; default 100ms
	Max     time.Duration // cap; default 30s
	// Clock waits between attempts in Do; default the real clock.
	Clock clock.Clock
}

// Delay returns the wait before attempt n (0-based): a random duration in
// [d/2, d] where d = min(Max, Initial·2ⁿ).
func (b Backoff) Delay(n int) time.Duration {
	initial, maxD := b.Initial, b.Max
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if maxD <= 0 {
		maxD = 30 * time.Second
	}
	d := initial
	for i := 0; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return d/2 + rand.N(d/2+1)
}

// Do calls fn until it succeeds, returns a terminal error, or ctx ends, waiting
// b.Delay(n) between attempts and logging each retryable failure as a warning.
func Do(ctx context.Context, b Backoff, log *slog.Logger, what string, fn func(ctx context.Context) error) error {
	for n := 0; ; n++ {
		err := fn(ctx)
		if err == nil || IsTerminal(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		d := b.Delay(n)
		if log != nil {
			log.Warn("retrying", "what", what, "attempt", n+1, "in", d.Round(time.Millisecond).String(), "error", err)
		}
		var clk clock.Clock = clock.RealClock{}
		if b.Clock != nil {
			clk = b.Clock
		}
		t := clk.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C():
		}
	}
}
