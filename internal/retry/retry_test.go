package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDoRetriesRetryableErrorsUntilSuccess(t *testing.T) {
	calls := 0
	err := Do(context.Background(), Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, nil, "x", func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err=%v calls=%d, want nil and 3", err, calls)
	}
}

func TestDoStopsAtOnceOnATerminalError(t *testing.T) {
	calls := 0
	base := errors.New("password authentication failed")
	err := Do(context.Background(), Backoff{Initial: time.Millisecond}, nil, "x", func(context.Context) error {
		calls++
		return Terminal(base)
	})
	if calls != 1 || !errors.Is(err, base) || !IsTerminal(err) {
		t.Fatalf("err=%v calls=%d", err, calls)
	}
}

func TestDelayStaysWithinHalfToFullOfTheCappedExponential(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			if d := b.Delay(n); d < want/2 || d > want {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
}
