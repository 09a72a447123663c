package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
)

// writersLog is a log to look into: every record as a JSON line.
type writersLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *writersLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *writersLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *writersLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writersGauge records the ConcurrentWriters hook.
type writersGauge struct {
	mu  sync.Mutex
	val map[string]int
}

func (g *writersGauge) Quarantined(string, string, int) {}

func (g *writersGauge) ConcurrentWriters(sink string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.val == nil {
		g.val = map[string]int{}
	}
	g.val[sink] = n
}

func (g *writersGauge) get(sink string) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.val[sink]
	return n, ok
}

// writerPeriods shortens the writer lock's periods for one test's sinks.
func writerPeriods(check, warn time.Duration) func(*writerlock.Timing) {
	return func(wt *writerlock.Timing) { wt.CheckEvery, wt.WarnEvery = check, warn }
}

// writerGrace sets the grace of a refusing claim for one test's sinks.
func writerGrace(d time.Duration) func(*writerlock.Timing) {
	return func(wt *writerlock.Timing) { wt.Grace = d }
}

// openWriter opens a sink on dsn with its own log and gauge, its writer lock paced by the
// defaults as tune changes them, without claiming.
func openWriter(t *testing.T, dsn, name string, tune ...func(*writerlock.Timing)) (*Sink, *writersLog, *writersGauge) {
	t.Helper()
	l, g := &writersLog{}, &writersGauge{}
	s, err := New(testCtx(t), name, cluster, Options{DSN: dsn, Migrate: true}, slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, f := range tune {
		f(&s.writers.Timing)
	}
	s.SetMetrics(g)
	return s, l, g
}

// writer opens a sink on dsn that holds its writer lock.
func writer(t *testing.T, dsn, name string, tune ...func(*writerlock.Timing)) (*Sink, *writersLog, *writersGauge) {
	t.Helper()
	s, l, g := openWriter(t, dsn, name, tune...)
	if err := s.ClaimWriter(testCtx(t), writerlock.OrRefuse); err != nil {
		t.Fatal(err)
	}
	return s, l, g
}

func waitGauge(t *testing.T, g *writersGauge, sink string, want int, within time.Duration) {
	t.Helper()
	eventually(t, within, fmt.Sprintf("concurrent writers gauge of %s = %d", sink, want), func() bool {
		n, ok := g.get(sink)
		return ok && n == want
	})
}

func TestWritersASecondSinkOfTheSameNameIsRefusedNamingTheHolder(t *testing.T) {
	t.Parallel()
	timing := []func(*writerlock.Timing){writerPeriods(100*time.Millisecond, time.Minute), writerGrace(200 * time.Millisecond)}
	dsn := pg.NewDatabase(t)
	_, _, aGauge := writer(t, dsn, "warehouse", timing...)
	waitGauge(t, aGauge, "warehouse", 0, 10*time.Second)
	// A sink of another name is another writer.
	writer(t, dsn, "archive", timing...)

	b, _, _ := openWriter(t, dsn, "warehouse", timing...)
	err := b.ClaimWriter(testCtx(t), writerlock.OrRefuse)
	if !errors.Is(err, writerlock.ErrHeld) || !retry.IsTerminal(err) {
		t.Fatalf("the second writer's claim: %v, want a terminal writerlock.ErrHeld", err)
	}
	for _, want := range []string{`sink warehouse (cluster ` + cluster + `, schema kube_cdc)`, pgdb.ApplicationName() + " (backend pid",
		"holds the writer lock", "--wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the refusal is not one line: %q", err)
	}
	// Refused, it does not linger as a waiter.
	ws, err := b.Writers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || !ws[0].Holds {
		t.Errorf("Writers after the refusal = %v, want the holder alone", ws)
	}
}

func TestWritersWithoutWaitAHolderThatEndsWithinTheGraceIsTakenOver(t *testing.T) {
	t.Parallel()
	timing := []func(*writerlock.Timing){writerGrace(time.Minute)}
	dsn := pg.NewDatabase(t)
	a, _, _ := writer(t, dsn, "warehouse", timing...)
	b, _, _ := openWriter(t, dsn, "warehouse", timing...)
	claimed := make(chan error, 1)
	go func() { claimed <- b.ClaimWriter(testCtx(t), writerlock.OrRefuse) }()
	eventually(t, 10*time.Second, "the second claim waiting in pg_locks", func() bool {
		ws, err := a.Writers(testCtx(t))
		return err == nil && len(ws) == 2
	})
	a.Close() // as a process that has just been killed
	select {
	case err := <-claimed:
		if err != nil {
			t.Fatalf("the claim: %v, want the lock of the holder that ended within the grace", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not end within 10s of the holder closing")
	}
}

func TestWritersWithWaitTheSecondTakesOverWhenTheFirstCloses(t *testing.T) {
	t.Parallel()
	timing := []func(*writerlock.Timing){writerPeriods(100*time.Millisecond, time.Minute)}
	dsn := pg.NewDatabase(t)
	a, aLog, aGauge := writer(t, dsn, "warehouse", timing...)

	b, bLog, bGauge := openWriter(t, dsn, "warehouse", timing...)
	claimed := make(chan error, 1)
	go func() { claimed <- b.ClaimWriter(testCtx(t), writerlock.OrWait) }()
	eventually(t, 10*time.Second, "the waiter names the holder", func() bool {
		return bLog.count(`"holder":"`+pgdb.ApplicationName()+` (backend pid`) == 1
	})
	waitGauge(t, bGauge, "warehouse", 1, 10*time.Second)
	// The holder sees the waiter at its next look.
	waitGauge(t, aGauge, "warehouse", 1, 10*time.Second)
	eventually(t, 10*time.Second, "the holder names the waiter", func() bool {
		return aLog.count("waits to take this sink over") == 1
	})
	ws, err := a.Writers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || !ws[0].Holds || ws[1].Holds {
		t.Errorf("Writers = %v, want the holder, then the waiter", ws)
	}
	select {
	case err := <-claimed:
		t.Fatalf("the waiter's claim returned %v while the holder holds the lock", err)
	default:
	}

	a.Close()
	select {
	case err := <-claimed:
		if err != nil {
			t.Fatalf("the waiter's claim: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not take the lock within 10s of the holder closing")
	}
	waitGauge(t, bGauge, "warehouse", 0, 10*time.Second)
	if n := bLog.count("took the writer lock"); n != 1 {
		t.Errorf("the waiter logged taking the lock %d times, want once:\n%s", n, bLog)
	}
}

// The holder's looks for waiters are timed by the writer lock's clock: on a fake one, a
// waiter is seen only once the clock is stepped to the next look.
func TestWritersTheHolderLooksForWaitersWhenItsClockReachesTheNextLook(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	dsn := pg.NewDatabase(t)
	a, _, aGauge := writer(t, dsn, "warehouse", func(wt *writerlock.Timing) { wt.CheckEvery, wt.Clock = time.Hour, clk })
	waitGauge(t, aGauge, "warehouse", 0, 10*time.Second) // the first look, at once
	eventually(t, 10*time.Second, "the holder waiting on its clock for the next look", clk.HasWaiters)

	b, _, _ := openWriter(t, dsn, "warehouse")
	ctx, cancel := context.WithCancel(testCtx(t))
	claimed := make(chan error, 1)
	go func() { claimed <- b.ClaimWriter(ctx, writerlock.OrWait) }()
	defer func() {
		cancel()
		<-claimed
	}()
	eventually(t, 10*time.Second, "a waiter in pg_locks", func() bool {
		ws, err := a.Writers(testCtx(t))
		return err == nil && len(ws) == 2
	})
	if n, _ := aGauge.get("warehouse"); n != 0 {
		t.Fatalf("the holder saw %d waiters before its clock reached the next look", n)
	}
	clk.Step(time.Hour)
	waitGauge(t, aGauge, "warehouse", 1, 20*time.Second)
}

func TestWritersAWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	writer(t, dsn, "warehouse")
	b, _, _ := openWriter(t, dsn, "warehouse")
	ctx, cancel := context.WithCancel(testCtx(t))
	claimed := make(chan error, 1)
	go func() { claimed <- b.ClaimWriter(ctx, writerlock.OrWait) }()
	eventually(t, 10*time.Second, "a waiter in pg_locks", func() bool {
		ws, err := b.Writers(testCtx(t))
		return err == nil && len(ws) == 2
	})
	cancel()
	select {
	case err := <-claimed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled claim: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not end within 10s of its context")
	}
	eventually(t, 10*time.Second, "the waiter gone from pg_locks", func() bool {
		ws, err := b.Writers(testCtx(t))
		return err == nil && len(ws) == 1
	})
}

func TestWritersTheLockIsTakenAgainAfterTheConnectionsAreTerminated(t *testing.T) {
	t.Parallel()
	timing := []func(*writerlock.Timing){writerPeriods(100*time.Millisecond, time.Minute)}
	dsn := pg.NewDatabase(t)
	_, _, g := writer(t, dsn, "warehouse", timing...)
	waitGauge(t, g, "warehouse", 0, 10*time.Second)
	db := mustURL(t, dsn).Path[1:]
	if err := pg.TerminateBackends(testCtx(t), db); err != nil {
		t.Fatal(err)
	}
	// An observer (as `kube-cdc status`) sees the lock held again.
	obs, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	eventually(t, 20*time.Second, "the writer lock held again", func() bool {
		ws, err := obs.Writers(testCtx(t))
		return err == nil && len(ws) == 1 && ws[0].Holds && ws[0].Application == pgdb.ApplicationName()
	})
}

func TestWritersASinkWhoseLockAnotherProcessTookWhileItReconnectedStopsWriting(t *testing.T) {
	t.Parallel()
	// The holder reconnects after 3s: time enough for the other one to take the lock.
	timing := []func(*writerlock.Timing){writerPeriods(100*time.Millisecond, time.Minute),
		func(wt *writerlock.Timing) {
			wt.Backoff = retry.Backoff{Initial: 3 * time.Second, Max: 3 * time.Second}
		}}
	dsn := pg.NewDatabase(t)
	a, aLog, aGauge := writer(t, dsn, "warehouse", timing...)
	waitGauge(t, aGauge, "warehouse", 0, 10*time.Second)
	write(t, a, batch(5, cm("a", "u-a", 5, change.OpCreate)))

	if err := pg.TerminateBackends(testCtx(t), mustURL(t, dsn).Path[1:]); err != nil {
		t.Fatal(err)
	}
	writer(t, dsn, "warehouse", timing...) // takes the lock the holder lost with its connection
	eventually(t, 20*time.Second, "the first sink says it lost the lock", func() bool {
		return aLog.count("another process took the sink over") == 1
	})
	err := a.Write(testCtx(t), batch(6, cm("b", "u-b", 6, change.OpCreate)))
	if !retry.IsTerminal(err) || !errors.Is(err, writerlock.ErrHeld) || !strings.Contains(err.Error(), "lost the writer lock") {
		t.Fatalf("a Write after losing the lock: %v, want a terminal error saying the lock was lost", err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects WHERE name = 'b'`); n != 0 {
		t.Errorf("%d rows of b, want none: the sink that lost its lock wrote", n)
	}
}

// Under leader election the lease fences writers, and a frozen old leader keeps its
// session (and the lock) alive: the new leader must write at once, and take the lock in
// the background once the old session ends.
func TestWritersAFencedClaimWritesAtOnceAndTakesTheLockWhenItComesFree(t *testing.T) {
	t.Parallel()
	timing := []func(*writerlock.Timing){writerPeriods(100*time.Millisecond, time.Minute)}
	dsn := pg.NewDatabase(t)
	a, _, _ := writer(t, dsn, "warehouse", timing...)
	b, bLog, _ := openWriter(t, dsn, "warehouse", timing...)
	if err := b.ClaimWriter(testCtx(t), writerlock.Fenced); err != nil {
		t.Fatalf("a fenced claim beside a holder: %v, want nil at once", err)
	}
	write(t, b, batch(5, cm("a", "u-a", 5, change.OpCreate)))
	eventually(t, 10*time.Second, "the fenced writer names the holder", func() bool {
		return bLog.count("leader election fences writers") == 1
	})
	a.Close()
	obs, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	eventually(t, 10*time.Second, "the fenced writer holds the lock", func() bool {
		ws, err := obs.Writers(testCtx(t))
		return err == nil && len(ws) == 1 && ws[0].Holds
	})
}
