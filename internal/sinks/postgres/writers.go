package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// The writer lock: detecting two kube-cdc processes that write the same sink.
//
// Two `kube-cdc run` with the same database, schema, cluster and sink name and no leader
// election (a standby never opens its sinks) both write every change. Nothing breaks — the
// writes are idempotent and RV-guarded, checkpoints only move forward — but the load doubles
// and nobody notices. So each running sink (ClaimWriter) takes a session advisory lock keyed
// by (schema, cluster, sink) on a connection of its own, outside the pool so that it stays
// held, and keeps it for the sink's lifetime:
//
//   - A process that finds the lock taken waits for it (pg_advisory_lock, woken every
//     writerWarnEvery by lock_timeout), so pg_locks lists it as a waiter, and the holder
//     sees it too. Both log a warning naming the other sessions (application_name
//     "kube-cdc/<host>/<pid>", backend pid, client address), once and again every
//     writerWarnEvery while it lasts, and set the ConcurrentWriters gauge to how many
//     others there are; `kube-cdc status` lists them (Writers).
//   - The second writer keeps writing. The lock detects a misconfiguration, it does not
//     fence: refusing would turn a harmless, wasteful setup into an outage the moment the
//     holder hangs without dying (its session, and the lock, would outlive its usefulness),
//     while leader election already is the fencing mechanism (internal/leader).
//   - A session lock dies with its connection: a crashed holder's lock is released when
//     PostgreSQL sees the connection close (server-side TCP keepalives, set short on this
//     connection, cover a vanished host), and the waiter takes it over at once. A lost
//     connection (a restarted server) is reopened with backoff and the lock taken again.
//
// Keys differ per database by construction (advisory locks are per database), so the key
// hashes only the schema, cluster and sink name.

// writerWarnEvery is how often a warning is repeated while another writer is there, and
// how long one wait for the lock lasts before the others are looked at again.
var writerWarnEvery = time.Minute

// writerCheckEvery is how often the holder looks for waiters (and so notices a dead
// connection).
var writerCheckEvery = 10 * time.Second

// writerBackoff paces reconnects of the lock's connection.
var writerBackoff = retry.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second}

// WritersMetrics is the optional metrics hook of the writer lock, probed on the Metrics
// given to SetMetrics; *metrics.Metrics implements it.
type WritersMetrics interface {
	// ConcurrentWriters records how many other processes write sink: 0 when this one is
	// alone.
	ConcurrentWriters(sink string, others int)
}

// Writer is a session holding or waiting for a sink's writer lock: one running kube-cdc
// writing the sink.
type Writer struct {
	Application string    // application_name, "kube-cdc/<host>/<pid>" unless the DSN sets one
	PID         int       // the server process (backend) serving the session
	Client      string    // client address and port; "" for a Unix socket or when hidden
	Since       time.Time // when the session started; zero when hidden
	Holds       bool      // it holds the lock; otherwise it waits for it (and writes anyway)
}

func (w Writer) String() string {
	var b strings.Builder
	b.WriteString(orElse(w.Application, "?"))
	fmt.Fprintf(&b, " (backend pid %d", w.PID)
	if w.Client != "" {
		b.WriteString(", from " + w.Client)
	}
	if w.Holds {
		b.WriteString(", holds the writer lock")
	} else {
		b.WriteString(", waits for the writer lock")
	}
	if !w.Since.IsZero() {
		b.WriteString(", connected " + w.Since.UTC().Format(time.RFC3339))
	}
	b.WriteString(")")
	return b.String()
}

func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// writerKey is the advisory lock key of (schema, cluster, sink); the prefix keeps it apart
// from the migration lock and from other applications' advisory locks.
func writerKey(schema, cluster, sink string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kube-cdc writer\x00" + schema + "\x00" + cluster + "\x00" + sink))
	return int64(h.Sum64())
}

// writersQuery lists the sessions other than this one that hold or wait for the lock. A
// bigint advisory key shows in pg_locks as classid (high half), objid (low half) and
// objsubid 1. pg_stat_activity hides the address and start of other roles' sessions from
// a role without pg_read_all_stats: they read as NULL.
const writersQuery = `SELECT l.pid, coalesce(a.application_name, ''),
		coalesce(host(a.client_addr) || ':' || a.client_port, ''), a.backend_start, l.granted
	FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.objsubid = 1
	  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.pid <> pg_backend_pid()
	ORDER BY l.granted DESC, a.backend_start, l.pid`

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryWriters(ctx context.Context, q querier, key int64) ([]Writer, error) {
	u := uint64(key)
	rows, err := q.Query(ctx, writersQuery, int64(u>>32), int64(u&0xffffffff))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Writer, error) {
		var (
			w     Writer
			since *time.Time
		)
		err := row.Scan(&w.PID, &w.Application, &w.Client, &since, &w.Holds)
		if since != nil {
			w.Since = *since
		}
		return w, err
	})
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

// applicationName names this process to PostgreSQL, "kube-cdc/<host>/<pid>", cut to the
// 63 bytes the server keeps by shortening the host, so the pid survives.
func applicationName() string {
	host, _ := os.Hostname()
	pid := "/" + strconv.Itoa(os.Getpid())
	const prefix, limit = "kube-cdc/", 63
	if room := limit - len(prefix) - len(pid); len(host) > room {
		host = host[:max(room, 0)]
	}
	return prefix + orElse(host, "?") + pid
}

// setApplicationName sets application_name unless the DSN (or PGAPPNAME) chose one.
func setApplicationName(cc *pgconn.Config) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = applicationName()
	}
}

// writerLock holds a sink's writer lock in the background until stop.
type writerLock struct {
	s      *Sink
	key    int64
	cfg    *pgx.ConnConfig
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the run goroutine.
	others  int       // other writers at the last look; -1 before the first
	warned  time.Time // last warning
	holding bool
}

// ClaimWriter starts holding the sink's writer lock in the background, warning while
// another process writes the same sink (see writerLock); Close releases it. Only a sink
// that streams claims it — `kube-cdc status` does not. Calling it again does nothing.
func (s *Sink) ClaimWriter() {
	s.writers.once.Do(func() {
		cfg := s.pool.Config().ConnConfig.Copy()
		// The wait for the lock ends every writerWarnEvery to look again; no other timeout
		// of the DSN may end it. Short server-side keepalives free the lock of a holder
		// whose host vanished within about a minute.
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(writerWarnEvery.Milliseconds(), 10)
		cfg.RuntimeParams["statement_timeout"] = "0"
		cfg.RuntimeParams["tcp_keepalives_idle"] = "30"
		cfg.RuntimeParams["tcp_keepalives_interval"] = "10"
		cfg.RuntimeParams["tcp_keepalives_count"] = "3"
		// Stopping while waiting cancels the wait on the server (a cancel request), so the
		// session leaves the queue at once instead of lingering as a waiter.
		cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 2 * time.Second}
		}
		ctx, cancel := context.WithCancel(context.Background())
		l := &writerLock{s: s, key: writerKey(s.opts.Schema, s.cluster, s.name), cfg: cfg,
			cancel: cancel, done: make(chan struct{}), others: -1}
		s.writers.lock = l
		go l.run(ctx)
	})
}

// stop releases the lock (closing its connection) and waits for that. Safe on nil.
func (l *writerLock) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *writerLock) run(ctx context.Context) {
	defer close(l.done)
	for attempt := 0; ; attempt++ {
		connected, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			attempt = 0
		}
		l.holding = false
		d := writerBackoff.Delay(attempt)
		l.s.log.Debug("writer lock: connection lost, reconnecting", "sink", l.s.name,
			"in", d.Round(time.Millisecond).String(), "error", classify(err, l.s.password))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// session connects, takes the lock (waiting for it while another session holds it) and
// holds it until the connection fails or ctx ends. connected says whether it got as far
// as a connection.
func (l *writerLock) session(ctx context.Context) (connected bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	// PostgreSQL 14+: notice a vanished client even while waiting for the lock, so a
	// killed waiter does not linger in the queue. Older servers lack it; nothing is lost.
	_, _ = conn.Exec(ctx, "SELECT set_config('client_connection_check_interval', '5s', false)")
	for !l.holding {
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&l.holding); err != nil {
			return true, err
		}
		if l.holding {
			break
		}
		if err := l.look(ctx, conn); err != nil {
			return true, err
		}
		_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			l.holding = true
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_timeout: look again
		default:
			return true, err
		}
	}
	l.s.log.Debug("holding the writer lock", "sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema)
	for {
		if err := l.look(ctx, conn); err != nil {
			return true, err
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(writerCheckEvery):
		}
	}
}

// look lists the other writers, sets the gauge and warns when another writer appears
// and every writerWarnEvery while there is one; it logs once when the last one is gone.
func (l *writerLock) look(ctx context.Context, conn *pgx.Conn) error {
	others, err := queryWriters(ctx, conn, l.key)
	if err != nil {
		return err
	}
	if m, ok := l.s.metrics.(WritersMetrics); ok {
		m.ConcurrentWriters(l.s.name, len(others))
	}
	was := l.others
	l.others = len(others)
	if len(others) == 0 {
		if was > 0 {
			l.s.log.Info("no other process writes the sink any more", "sink", l.s.name,
				"cluster", l.s.cluster, "schema", l.s.opts.Schema, "holds_writer_lock", l.holding)
		}
		return nil
	}
	if was > 0 && time.Since(l.warned) < writerWarnEvery {
		return nil
	}
	l.warned = time.Now()
	names := make([]string, len(others))
	for i, w := range others {
		names[i] = w.String()
	}
	l.s.log.Warn("another process writes the same sink: both write every change (correct, since writes are idempotent, "+
		"but twice the load); run one kube-cdc per database, cluster and sink, or enable leaderElection",
		"sink", l.s.name, "cluster", l.s.cluster, "schema", l.s.opts.Schema,
		"others", strings.Join(names, "; "), "this", l.cfg.RuntimeParams["application_name"],
		"holds_writer_lock", l.holding)
	return nil
}

// writers is the Sink's writer lock, started at most once (ClaimWriter) and stopped by Close.
type writers struct {
	once sync.Once
	lock *writerLock
}

// stop stops the lock if ClaimWriter started it, and keeps a later ClaimWriter from
// starting one.
func (w *writers) stop() {
	w.once.Do(func() {})
	w.lock.stop()
}
