package pgdb

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Writer is a session holding or waiting for a sink's writer lock: one running kube-cdc
// writing the sink.
type Writer struct {
	Application string    // application_name, "kube-cdc/<host>/<pid>" unless the DSN sets one
	PID         int       // the server process (backend) serving the session
	Client      string    // client address and port; "" for a Unix socket or when hidden
	Since       time.Time // when the session started; zero when hidden
	Holds       bool      // it holds the lock (and writes); otherwise it waits for it (--wait)
}

func (w Writer) String() string {
	var b strings.Builder
	app := w.Application
	if app == "" {
		app = "?"
	}
	b.WriteString(app)
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

// WriterKey is the advisory lock key of (schema, cluster, sink); the prefix keeps it apart
// from the migration lock and from other applications' advisory locks.
func WriterKey(schema, cluster, sink string) int64 {
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

// Querier is what Writers reads through: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Writers lists the sessions, other than q's own, that hold or wait for the writer lock
// key: the holder first, then the waiters by when they connected.
func Writers(ctx context.Context, q Querier, key int64) ([]Writer, error) {
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
