package postgres

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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

// writersTiming shortens the writer lock's periods for one test.
func writersTiming(t *testing.T, check, warn time.Duration) {
	oc, ow := writerCheckEvery, writerWarnEvery
	writerCheckEvery, writerWarnEvery = check, warn
	t.Cleanup(func() { writerCheckEvery, writerWarnEvery = oc, ow })
}

// writer opens a sink on dsn that claims its writer lock, with its own log and gauge.
func writer(t *testing.T, dsn, name string) (*Sink, *writersLog, *writersGauge) {
	t.Helper()
	l, g := &writersLog{}, &writersGauge{}
	s, err := New(testCtx(t), name, cluster, Options{DSN: dsn, Migrate: true}, slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SetMetrics(g)
	s.ClaimWriter()
	return s, l, g
}

func waitGauge(t *testing.T, g *writersGauge, sink string, want int, within time.Duration) {
	t.Helper()
	eventually(t, within, fmt.Sprintf("concurrent writers gauge of %s = %d", sink, want), func() bool {
		n, ok := g.get(sink)
		return ok && n == want
	})
}

const warnMsg = "another process writes the same sink"

func TestWritersTwoSinksOfTheSameNameWarnAndTheSecondTakesOverWhenTheFirstCloses(t *testing.T) {
	writersTiming(t, 200*time.Millisecond, time.Minute)
	dsn := pg.NewDatabase(t)
	a, aLog, aGauge := writer(t, dsn, "warehouse")
	waitGauge(t, aGauge, "warehouse", 0, 10*time.Second)
	// A sink of another name, or another cluster, is not the same writer.
	_, otherLog, otherGauge := writer(t, dsn, "archive")
	waitGauge(t, otherGauge, "archive", 0, 10*time.Second)

	_, bLog, bGauge := writer(t, dsn, "warehouse")
	waitGauge(t, bGauge, "warehouse", 1, 10*time.Second)
	eventually(t, 10*time.Second, "the second writer warns", func() bool { return bLog.count(warnMsg) == 1 })
	// The holder sees the waiter too, at its next look.
	waitGauge(t, aGauge, "warehouse", 1, 10*time.Second)
	eventually(t, 10*time.Second, "the first writer warns", func() bool { return aLog.count(warnMsg) == 1 })
	app := applicationName()
	for _, l := range []*writersLog{aLog, bLog} {
		if !strings.Contains(l.String(), `"others":"`+app+` (backend pid`) {
			t.Errorf("the warning does not name the other writer %q:\n%s", app, l)
		}
	}
	if !strings.Contains(bLog.String(), "holds the writer lock") || !strings.Contains(aLog.String(), "waits for the writer lock") {
		t.Errorf("the warnings do not say who holds the lock:\nfirst:\n%s\nsecond:\n%s", aLog, bLog)
	}
	ws, err := a.Writers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || !ws[0].Holds || ws[1].Holds {
		t.Errorf("Writers = %v, want the holder, then the waiter", ws)
	}

	a.Close()
	waitGauge(t, bGauge, "warehouse", 0, 10*time.Second)
	eventually(t, 10*time.Second, "the second writer says it is alone", func() bool {
		return bLog.count("no other process writes the sink any more") == 1
	})
	if otherLog.count(warnMsg) != 0 {
		t.Errorf("a sink of another name warned:\n%s", otherLog)
	}
	if n := bLog.count(warnMsg); n != 1 {
		t.Errorf("the second writer warned %d times within a minute, want once", n)
	}
}

func TestWritersTheWarningRepeatsWhileTheOtherWriterStays(t *testing.T) {
	writersTiming(t, 100*time.Millisecond, time.Second)
	dsn := pg.NewDatabase(t)
	writer(t, dsn, "warehouse")
	_, bLog, _ := writer(t, dsn, "warehouse")
	eventually(t, 15*time.Second, "three warnings", func() bool { return bLog.count(warnMsg) >= 3 })
}

func TestWritersTheLockIsTakenAgainAfterTheConnectionsAreTerminated(t *testing.T) {
	writersTiming(t, 100*time.Millisecond, time.Minute)
	dsn := pg.NewDatabase(t)
	_, _, g := writer(t, dsn, "warehouse")
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
		return err == nil && len(ws) == 1 && ws[0].Holds && ws[0].Application == applicationName()
	})
}

func TestWritersApplicationNameKeepsThePidWithinPostgreSQLsLimit(t *testing.T) {
	n := applicationName()
	if len(n) > 63 || !strings.HasPrefix(n, "kube-cdc/") || !strings.HasSuffix(n, fmt.Sprintf("/%d", os.Getpid())) {
		t.Errorf("applicationName() = %q", n)
	}
}
