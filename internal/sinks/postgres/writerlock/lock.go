package writerlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Timing paces the writer lock: DefaultTiming() but in tests, which shorten its periods
// or give it a fake clock before Claim.
type Timing struct {
	// WarnEvery is how long one wait for the lock lasts before the holder is looked at
	// again (and named again in the log if it changed).
	WarnEvery time.Duration
	// Grace is how long a process started without --wait waits for a held lock before it
	// refuses: long enough for the session of a holder that has just died to end.
	Grace time.Duration
	// CheckEvery is how often the holder looks for waiters (and so notices a dead
	// connection).
	CheckEvery time.Duration
	// Backoff paces reconnects of the lock's connection; its delays are waited on Clock.
	Backoff retry.Backoff
	// Clock times CheckEvery and Backoff's delays. WarnEvery and Grace are the server's
	// lock_timeout, timed by PostgreSQL.
	Clock clock.Clock
}

// DefaultTiming is the writer lock's pace in production.
func DefaultTiming() Timing {
	return Timing{
		WarnEvery:  time.Minute,
		Grace:      5 * time.Second,
		CheckEvery: 10 * time.Second,
		Backoff:    retry.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second},
		Clock:      clock.RealClock{},
	}
}

// Metrics is the optional metrics hook of the writer lock; *metrics.Metrics implements
// it.
type Metrics interface {
	// ConcurrentWriters records how many other processes hold or wait for sink's writer
	// lock: 0 when this one is alone.
	ConcurrentWriters(sink string, others int)
}

// Writer is a session holding or waiting for a sink's writer lock (pgdb.Writer: the
// read side lists them too, for status).
type Writer = pgdb.Writer

// Querier is what List needs of a connection or a pool.
type Querier = pgdb.Querier

// key is the advisory lock key of (schema, cluster, sink) (pgdb.WriterKey).
func key(schema, cluster, sink string) int64 { return pgdb.WriterKey(schema, cluster, sink) }

func queryWriters(ctx context.Context, q Querier, key int64) ([]Writer, error) {
	return pgdb.Writers(ctx, q, key)
}

// List lists, through q, the running kube-cdc processes that write the sink named sink
// of cluster in schema (same database too): the holder of the writer lock first, then
// those waiting for it. More than one means two kube-cdc run without leader election.
// The session calling it (`kube-cdc status`) neither holds nor waits, so it is never
// listed. Its errors are the driver's, unclassified.
func List(ctx context.Context, q Querier, schema, cluster, sink string) ([]Writer, error) {
	return queryWriters(ctx, q, key(schema, cluster, sink))
}

// holder holds a sink's writer lock in the background until stop.
type holder struct {
	c       *Lock
	timing  Timing  // the Lock's, as Claim found it
	metrics Metrics // likewise
	key     int64
	cfg     *pgx.ConnConfig
	cancel  context.CancelFunc
	done    chan struct{}
	lost    atomic.Pointer[error] // set when another process took the lock from this one

	policy Policy

	// Owned by the hold goroutine.
	others int // other writers at the last look; -1 before the first
}

// Policy says what Claim does when another process holds the writer lock.
type Policy int

const (
	// OrRefuse refuses to write (ErrHeld) once Timing.Grace has passed.
	OrRefuse Policy = iota
	// OrWait waits for the holder to let go (`kube-cdc run --wait`).
	OrWait
	// Fenced writes at once and takes the lock in the background when it comes free:
	// leader election fences writers already.
	Fenced
)

// ErrHeld is the error Claim returns (wrapped, terminal) when another process holds the
// sink's writer lock under OrRefuse.
var ErrHeld = errors.New("another kube-cdc process writes this sink")

// Lock is one sink's writer lock: taken at most once (Claim) and released by Stop.
type Lock struct {
	conn                  *pgx.ConnConfig // the sink's, copied for the lock's own connection
	schema, cluster, sink string
	password              string // scrubbed from every error
	log                   *slog.Logger

	// Timing paces the lock and Metrics (nil: none) is told how many other writers
	// there are; Claim reads both, so set them before Claim only.
	Timing  Timing
	Metrics Metrics

	once sync.Once
	held *holder
}

// New is the writer lock of the sink named sink of cluster in schema, connecting as conn
// says (the sink's pool's configuration); password is scrubbed from its errors. It takes
// nothing until Claim.
func New(conn *pgx.ConnConfig, schema, cluster, sink, password string, log *slog.Logger) *Lock {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lock{conn: conn, schema: schema, cluster: cluster, sink: sink, password: password, log: log, Timing: DefaultTiming()}
}

// Claim takes the sink's writer lock before it writes anything and holds it in the
// background until Stop. When another process holds it, Claim does as policy says: it
// returns a terminal error wrapping ErrHeld that names the holder (OrRefuse), logs the
// holder once and waits until the lock is free or ctx ends (OrWait), or returns at once
// and waits in the background (Fenced). Only a sink that streams claims it — `kube-cdc
// status` does not. Calling it again does nothing.
func (w *Lock) Claim(ctx context.Context, policy Policy) error {
	var err error
	w.once.Do(func() {
		cfg := w.conn.Copy()
		// A wait for the lock ends every Timing.WarnEvery to look again; no other timeout of
		// the DSN may end it. Short server-side keepalives free the lock of a holder whose
		// host vanished within about a minute.
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(w.Timing.WarnEvery.Milliseconds(), 10)
		cfg.RuntimeParams["statement_timeout"] = "0"
		cfg.RuntimeParams["tcp_keepalives_idle"] = "30"
		cfg.RuntimeParams["tcp_keepalives_interval"] = "10"
		cfg.RuntimeParams["tcp_keepalives_count"] = "3"
		// Stopping while waiting cancels the wait on the server (a cancel request), so the
		// session leaves the queue at once instead of lingering as a waiter.
		cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 2 * time.Second}
		}
		l := &holder{c: w, timing: w.Timing, metrics: w.Metrics, key: key(w.schema, w.cluster, w.sink), cfg: cfg, others: -1, policy: policy}
		hctx, cancel := context.WithCancel(context.Background())
		if policy == Fenced {
			l.cancel, l.done = cancel, make(chan struct{})
			w.held = l
			go func() {
				conn, err := l.acquire(hctx)
				if err != nil {
					close(l.done)
					return
				}
				l.hold(hctx, conn)
			}()
			return
		}
		var conn *pgx.Conn
		conn, err = l.acquire(ctx)
		if err != nil {
			cancel()
			return
		}
		l.cancel, l.done = cancel, make(chan struct{})
		w.held = l
		go l.hold(hctx, conn)
	})
	return err
}

// Lost is the error every write is to return once another process took the lock from
// this one; nil while it holds it (or never claimed it). Safe on nil.
func (w *Lock) Lost() error {
	if w == nil {
		return nil
	}
	if l := w.held; l != nil {
		if err := l.lost.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// acquire connects (retrying a failed connection with backoff) and takes the lock: at
// once, or, as the policy says, once the holder lets go.
func (l *holder) acquire(ctx context.Context) (*pgx.Conn, error) {
	for attempt := 0; ; attempt++ {
		conn, err := l.connect(ctx)
		if err == nil {
			if err = l.take(ctx, conn, l.policy); err == nil {
				return conn, nil
			}
			l.close(conn)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrHeld) || retry.IsTerminal(err) {
			return nil, err
		}
		d := l.timing.Backoff.Delay(attempt)
		l.c.log.Warn("writer lock: cannot reach PostgreSQL; retrying", "sink", l.c.sink, "in", d.Round(time.Millisecond).String(), "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.timing.Clock.After(d):
		}
	}
}

func (l *holder) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, pgdb.Classify(err, l.c.password)
	}
	// PostgreSQL 14+: notice a vanished client even while waiting for the lock, so a
	// killed waiter does not linger in the queue. Older servers lack it; nothing is lost.
	_, _ = conn.Exec(ctx, "SELECT set_config('client_connection_check_interval', '5s', false)")
	return conn, nil
}

func (l *holder) close(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// take takes the lock on conn: under OrRefuse only when it is free (within
// Timing.Grace); else waiting for it, logging the holder once and again whenever another
// process holds it.
func (l *holder) take(ctx context.Context, conn *pgx.Conn, policy Policy) error {
	var logged string
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&got); err != nil {
			return pgdb.Classify(err, l.c.password)
		}
		if got {
			if logged != "" {
				l.c.log.Info("took the writer lock: the other process let go", "sink", l.c.sink, "cluster", l.c.cluster, "schema", l.c.schema)
			}
			return nil
		}
		others, err := queryWriters(ctx, conn, l.key)
		if err != nil {
			return pgdb.Classify(err, l.c.password)
		}
		l.gauge(len(others))
		holder := holderOf(others)
		if policy == OrRefuse {
			// The holder may be a process that has just died, its session not yet ended
			// (a kill -9 and an immediate restart): give it Timing.Grace to go.
			got, err := l.lockWithin(ctx, conn, l.timing.Grace)
			if err != nil || got {
				return err
			}
			if others, err = queryWriters(ctx, conn, l.key); err != nil {
				return pgdb.Classify(err, l.c.password)
			}
			holder = holderOf(others)
			return retry.Terminal(fmt.Errorf("sink %s (cluster %s, schema %s): %w: %s; stop it, run one kube-cdc per database, cluster and sink "+
				"(or several with leaderElection), or start this one with --wait to take over when it stops",
				l.c.sink, l.c.cluster, l.c.schema, ErrHeld, holder))
		}
		if holder != logged {
			logged = holder
			msg := "another kube-cdc process writes this sink; waiting for its writer lock (--wait)"
			if policy == Fenced {
				msg = "another session holds this sink's writer lock (a previous leader's, until PostgreSQL ends it); " +
					"leader election fences writers, so this leader writes and takes the lock when it comes free"
			}
			l.c.log.Info(msg, "sink", l.c.sink, "cluster", l.c.cluster, "schema", l.c.schema, "holder", holder)
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			l.c.log.Info("took the writer lock: the other process let go", "sink", l.c.sink, "cluster", l.c.cluster, "schema", l.c.schema)
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_timeout: look again
		default:
			return pgdb.Classify(err, l.c.password)
		}
	}
}

// lockWithin waits up to d for the lock on conn and says whether it got it.
func (l *holder) lockWithin(ctx context.Context, conn *pgx.Conn, d time.Duration) (bool, error) {
	setTimeout := func(d time.Duration) error {
		_, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, false)", strconv.FormatInt(d.Milliseconds(), 10))
		return err
	}
	if err := setTimeout(d); err != nil {
		return false, pgdb.Classify(err, l.c.password)
	}
	_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_timeout
	default:
		return false, pgdb.Classify(err, l.c.password)
	}
	if err := setTimeout(l.timing.WarnEvery); err != nil {
		return false, pgdb.Classify(err, l.c.password)
	}
	return pgErr == nil, nil
}

// holderOf names the session holding the lock among others ("" sessions visible means it
// left between the two queries).
func holderOf(others []Writer) string {
	for _, w := range others {
		if w.Holds {
			return w.String()
		}
	}
	return "a session that has just let go"
}

// stop releases the lock (closing its connection) and waits for that. Safe on nil.
func (l *holder) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// hold keeps the lock on conn until ctx ends, looking for waiters every Timing.CheckEvery.
// A lost connection is reopened with backoff and the lock taken again; when another
// process took it meanwhile, hold records that (lost) and ends.
func (l *holder) hold(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	l.c.log.Debug("holding the writer lock", "sink", l.c.sink, "cluster", l.c.cluster, "schema", l.c.schema)
	for attempt := 0; ; {
		err := l.watch(ctx, conn)
		l.close(conn)
		if ctx.Err() != nil {
			return
		}
		for conn = nil; conn == nil; attempt++ {
			d := l.timing.Backoff.Delay(attempt)
			l.c.log.Debug("writer lock: connection lost, reconnecting", "sink", l.c.sink,
				"in", d.Round(time.Millisecond).String(), "error", pgdb.Classify(err, l.c.password))
			select {
			case <-ctx.Done():
				return
			case <-l.timing.Clock.After(d):
			}
			if conn, err = l.connect(ctx); err != nil {
				continue
			}
			// Under leader election another writer is fenced by the lease: wait for the
			// lock again. Otherwise one that took the lock meanwhile ends this one.
			again := OrRefuse
			if l.policy == Fenced {
				again = Fenced
			}
			if err = l.take(ctx, conn, again); err != nil {
				l.close(conn)
				conn = nil
				if errors.Is(err, ErrHeld) {
					err = fmt.Errorf("lost the writer lock while PostgreSQL was unreachable: %w", err)
					l.lost.Store(&err)
					l.c.log.Error("another process took the sink over; this one stops writing it", "sink", l.c.sink, "error", err)
					return
				}
			}
		}
		attempt = 0
	}
}

// watch looks for waiters on conn every Timing.CheckEvery until the connection fails or
// ctx ends.
func (l *holder) watch(ctx context.Context, conn *pgx.Conn) error {
	for {
		others, err := queryWriters(ctx, conn, l.key)
		if err != nil {
			return err
		}
		l.gauge(len(others))
		if len(others) > 0 && l.others <= 0 {
			names := make([]string, len(others))
			for i, w := range others {
				names[i] = w.String()
			}
			l.c.log.Info("another kube-cdc process waits to take this sink over when this one stops",
				"sink", l.c.sink, "cluster", l.c.cluster, "schema", l.c.schema, "waiting", strings.Join(names, "; "))
		}
		l.others = len(others)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.timing.Clock.After(l.timing.CheckEvery):
		}
	}
}

func (l *holder) gauge(others int) {
	if l.metrics != nil {
		l.metrics.ConcurrentWriters(l.c.sink, others)
	}
}

// Stop releases the lock if Claim took it, and keeps a later Claim from taking one. Safe
// on nil.
func (w *Lock) Stop() {
	if w == nil {
		return
	}
	w.once.Do(func() {})
	w.held.stop()
}
