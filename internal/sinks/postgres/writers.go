package postgres

import (
	"context"
	"errors"
	"fmt"
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

// The writer lock: one kube-cdc process writes a sink.
//
// Two `kube-cdc run` with the same database, schema, cluster and sink name and no leader
// election (a standby never opens its sinks) would both write every change: nothing breaks
// — writes are idempotent and RV-guarded, checkpoints only move forward — but the load
// doubles and nobody notices. So a streaming sink claims a session advisory lock keyed by
// (schema, cluster, sink) before it writes anything (ClaimWriter), on a connection of its
// own outside the pool so that it stays held, and keeps it for the sink's lifetime:
//
//   - A process that finds the lock taken (and still taken writerTiming.Grace later)
//     refuses to start, with one error naming the holder (application_name "kube-cdc/<host>/<pid>", backend pid, client address,
//     connected since). With --wait (ClaimOrWait) it logs the holder once and waits
//     (pg_advisory_lock, woken every writerTiming.WarnEvery by lock_timeout), listed in pg_locks
//     as a waiter, until the holder stops.
//   - Under leader election (ClaimFenced) the lease already fences, and a new leader must
//     not stop at the lock of an old leader whose session lingers (a frozen process keeps
//     its connection, and its lock, alive): it writes at once and takes the lock in the
//     background when it comes free.
//   - The holder looks for waiters every writerTiming.CheckEvery and sets the
//     ConcurrentWriters gauge to how many there are; `kube-cdc status` lists holder and waiters (Writers).
//   - A session lock dies with its connection: a crashed holder's lock is released when
//     PostgreSQL sees the connection close (server-side TCP keepalives, set short on this
//     connection, cover a vanished host), and a waiter takes it over at once. A holder
//     whose lock connection is lost (a restarted server) reconnects with backoff and takes
//     the lock again; if another process took it meanwhile, this sink has lost it: every
//     later Write fails with a terminal error naming the new holder, so the process stops
//     instead of writing beside it.
//
// Keys differ per database by construction (advisory locks are per database), so the key
// hashes only the schema, cluster and sink name.

// writerTiming paces the writer lock. Every Sink holds defaultWriterTiming(); tests of
// this package shorten its periods or give it a fake clock before ClaimWriter.
type writerTiming struct {
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

func defaultWriterTiming() writerTiming {
	return writerTiming{
		WarnEvery:  time.Minute,
		Grace:      5 * time.Second,
		CheckEvery: 10 * time.Second,
		Backoff:    retry.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second},
		Clock:      clock.RealClock{},
	}
}

// WritersMetrics is the optional metrics hook of the writer lock, probed on the Metrics
// given to SetMetrics; *metrics.Metrics implements it.
type WritersMetrics interface {
	// ConcurrentWriters records how many other processes hold or wait for sink's writer
	// lock: 0 when this one is alone.
	ConcurrentWriters(sink string, others int)
}

// Writer is a session holding or waiting for a sink's writer lock (pgdb.Writer).
type Writer = pgdb.Writer

// writerKey is the advisory lock key of (schema, cluster, sink) (pgdb.WriterKey).
func writerKey(schema, cluster, sink string) int64 { return pgdb.WriterKey(schema, cluster, sink) }

func queryWriters(ctx context.Context, q pgdb.Querier, key int64) ([]Writer, error) {
	return pgdb.Writers(ctx, q, key)
}

// Writers lists the running kube-cdc processes that write this sink (same database,
// schema, cluster and sink name): the holder of the writer lock first, then those waiting
// for it. More than one means two kube-cdc run without leader election. The session
// calling it (`kube-cdc status`) neither holds nor waits, so it is never listed.
func (s *Sink) Writers(ctx context.Context) ([]Writer, error) {
	ws, err := queryWriters(ctx, s.pool, writerKey(s.opts.Schema, s.cluster, s.name))
	if err != nil {
		return nil, fmt.Errorf("read the writer lock: %w", classify(err, s.password))
	}
	return ws, nil
}

// applicationName is pgdb.ApplicationName.
func applicationName() string { return pgdb.ApplicationName() }

// setApplicationName is pgdb.SetApplicationName.
func setApplicationName(cc *pgconn.Config) { pgdb.SetApplicationName(cc) }

// writerLock holds a sink's writer lock in the background until stop.
type writerLock struct {
	s      *Sink
	timing writerTiming // the Sink's, as ClaimWriter found it
	key    int64
	cfg    *pgx.ConnConfig
	cancel context.CancelFunc
	done   chan struct{}
	lost   atomic.Pointer[error] // set when another process took the lock from this one

	policy ClaimPolicy

	// Owned by the hold goroutine.
	others int // other writers at the last look; -1 before the first
}

// ClaimPolicy says what ClaimWriter does when another process holds the writer lock.
type ClaimPolicy int

const (
	// ClaimOrRefuse refuses to write (ErrWriterLockHeld) once writerTiming.Grace has passed.
	ClaimOrRefuse ClaimPolicy = iota
	// ClaimOrWait waits for the holder to let go (`kube-cdc run --wait`).
	ClaimOrWait
	// ClaimFenced writes at once and takes the lock in the background when it comes free:
	// leader election fences writers already.
	ClaimFenced
)

// ErrWriterLockHeld is the error ClaimWriter returns (wrapped, terminal) when another
// process holds the sink's writer lock under ClaimOrRefuse.
var ErrWriterLockHeld = errors.New("another kube-cdc process writes this sink")

// ClaimWriter takes the sink's writer lock before it writes anything (see writerLock) and
// holds it in the background until Close. When another process holds it, ClaimWriter
// does as policy says: it returns a terminal error wrapping ErrWriterLockHeld that names
// the holder (ClaimOrRefuse), logs the holder once and waits until the lock is free or
// ctx ends (ClaimOrWait), or returns at once and waits in the background (ClaimFenced).
// Only a sink that streams claims it — `kube-cdc status` does not. Calling it again does
// nothing.
func (s *Sink) ClaimWriter(ctx context.Context, policy ClaimPolicy) error {
	var err error
	s.writers.once.Do(func() {
		cfg := s.pool.Config().ConnConfig.Copy()
		// A wait for the lock ends every writerTiming.WarnEvery to look again; no other timeout of
		// the DSN may end it. Short server-side keepalives free the lock of a holder whose
		// host vanished within about a minute.
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(s.writerTiming.WarnEvery.Milliseconds(), 10)
		cfg.RuntimeParams["statement_timeout"] = "0"
		cfg.RuntimeParams["tcp_keepalives_idle"] = "30"
		cfg.RuntimeParams["tcp_keepalives_interval"] = "10"
		cfg.RuntimeParams["tcp_keepalives_count"] = "3"
		// Stopping while waiting cancels the wait on the server (a cancel request), so the
		// session leaves the queue at once instead of lingering as a waiter.
		cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 2 * time.Second}
		}
		l := &writerLock{s: s, timing: s.writerTiming, key: writerKey(s.opts.Schema, s.cluster, s.name), cfg: cfg, others: -1, policy: policy}
		hctx, cancel := context.WithCancel(context.Background())
		if policy == ClaimFenced {
			l.cancel, l.done = cancel, make(chan struct{})
			s.writers.lock = l
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
		s.writers.lock = l
		go l.hold(hctx, conn)
	})
	return err
}

// lostErr is the error every Write returns once another process took the lock from this
// sink; nil while it holds it (or never claimed it).
func (w *writers) lostErr() error {
	if l := w.lock; l != nil {
		if err := l.lost.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// acquire connects (retrying a failed connection with backoff) and takes the lock: at
// once, or, as the policy says, once the holder lets go.
func (l *writerLock) acquire(ctx context.Context) (*pgx.Conn, error) {
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
		if errors.Is(err, ErrWriterLockHeld) || retry.IsTerminal(err) {
			return nil, err
		}
		d := l.timing.Backoff.Delay(attempt)
		l.s.log.Warn("writer lock: cannot reach PostgreSQL; retrying", "sink", l.s.name, "in", d.Round(time.Millisecond).String(), "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.timing.Clock.After(d):
		}
	}
}

func (l *writerLock) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, classify(err, l.s.password)
	}
	// PostgreSQL 14+: notice a vanished client even while waiting for the lock, so a
	// killed waiter does not linger in the queue. Older servers lack it; nothing is lost.
	_, _ = conn.Exec(ctx, "SELECT set_config('client_connection_check_interval', '5s', false)")
	return conn, nil
}

func (l *writerLock) close(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// take takes the lock on conn: under ClaimOrRefuse only when it is free (within
// writerTiming.Grace); else waiting for it, logging the holder once and again whenever another
// process holds it.
func (l *writerLock) take(ctx context.Context, conn *pgx.Conn, policy ClaimPolicy) error {
	var logged string
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&got); err != nil {
			return classify(err, l.s.password)
		}
		if got {
			if logged != "" {
				l.s.log.Info("took the writer lock: the other process let go", "sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema)
			}
			return nil
		}
		others, err := queryWriters(ctx, conn, l.key)
		if err != nil {
			return classify(err, l.s.password)
		}
		l.gauge(len(others))
		holder := holderOf(others)
		if policy == ClaimOrRefuse {
			// The holder may be a process that has just died, its session not yet ended
			// (a kill -9 and an immediate restart): give it writerTiming.Grace to go.
			got, err := l.lockWithin(ctx, conn, l.timing.Grace)
			if err != nil || got {
				return err
			}
			if others, err = queryWriters(ctx, conn, l.key); err != nil {
				return classify(err, l.s.password)
			}
			holder = holderOf(others)
			return retry.Terminal(fmt.Errorf("sink %s (cluster %s, schema %s): %w: %s; stop it, run one kube-cdc per database, cluster and sink "+
				"(or several with leaderElection), or start this one with --wait to take over when it stops",
				l.s.name, l.s.cluster, l.s.opts.Schema, ErrWriterLockHeld, holder))
		}
		if holder != logged {
			logged = holder
			msg := "another kube-cdc process writes this sink; waiting for its writer lock (--wait)"
			if policy == ClaimFenced {
				msg = "another session holds this sink's writer lock (a previous leader's, until PostgreSQL ends it); " +
					"leader election fences writers, so this leader writes and takes the lock when it comes free"
			}
			l.s.log.Info(msg, "sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema, "holder", holder)
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			l.s.log.Info("took the writer lock: the other process let go", "sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema)
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_timeout: look again
		default:
			return classify(err, l.s.password)
		}
	}
}

// lockWithin waits up to d for the lock on conn and says whether it got it.
func (l *writerLock) lockWithin(ctx context.Context, conn *pgx.Conn, d time.Duration) (bool, error) {
	setTimeout := func(d time.Duration) error {
		_, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, false)", strconv.FormatInt(d.Milliseconds(), 10))
		return err
	}
	if err := setTimeout(d); err != nil {
		return false, classify(err, l.s.password)
	}
	_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_timeout
	default:
		return false, classify(err, l.s.password)
	}
	if err := setTimeout(l.timing.WarnEvery); err != nil {
		return false, classify(err, l.s.password)
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
func (l *writerLock) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// hold keeps the lock on conn until ctx ends, looking for waiters every writerTiming.CheckEvery.
// A lost connection is reopened with backoff and the lock taken again; when another
// process took it meanwhile, hold records that (lost) and ends.
func (l *writerLock) hold(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	l.s.log.Debug("holding the writer lock", "sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema)
	for attempt := 0; ; {
		err := l.watch(ctx, conn)
		l.close(conn)
		if ctx.Err() != nil {
			return
		}
		for conn = nil; conn == nil; attempt++ {
			d := l.timing.Backoff.Delay(attempt)
			l.s.log.Debug("writer lock: connection lost, reconnecting", "sink", l.s.name,
				"in", d.Round(time.Millisecond).String(), "error", classify(err, l.s.password))
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
			again := ClaimOrRefuse
			if l.policy == ClaimFenced {
				again = ClaimFenced
			}
			if err = l.take(ctx, conn, again); err != nil {
				l.close(conn)
				conn = nil
				if errors.Is(err, ErrWriterLockHeld) {
					err = fmt.Errorf("lost the writer lock while PostgreSQL was unreachable: %w", err)
					l.lost.Store(&err)
					l.s.log.Error("another process took the sink over; this one stops writing it", "sink", l.s.name, "error", err)
					return
				}
			}
		}
		attempt = 0
	}
}

// watch looks for waiters on conn every writerTiming.CheckEvery until the connection fails or
// ctx ends.
func (l *writerLock) watch(ctx context.Context, conn *pgx.Conn) error {
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
			l.s.log.Info("another kube-cdc process waits to take this sink over when this one stops",
				"sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema, "waiting", strings.Join(names, "; "))
		}
		l.others = len(others)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.timing.Clock.After(l.timing.CheckEvery):
		}
	}
}

func (l *writerLock) gauge(others int) {
	if m, ok := l.s.metrics.(WritersMetrics); ok {
		m.ConcurrentWriters(l.s.name, others)
	}
}

// writers is the Sink's writer lock, taken at most once (ClaimWriter) and released by Close.
type writers struct {
	once sync.Once
	lock *writerLock
}

// stop releases the lock if ClaimWriter took it, and keeps a later ClaimWriter from
// taking one.
func (w *writers) stop() {
	w.once.Do(func() {})
	w.lock.stop()
}
