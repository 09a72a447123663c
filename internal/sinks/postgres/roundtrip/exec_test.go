package roundtrip

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const insert = `INSERT INTO t (k, v) VALUES ($1, $2)`

// newPool is a pool of one connection on dsn (a fresh database), with table t made.
func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(testCtx(t), `CREATE TABLE t (k int PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func rows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// prepared is how many statements named name are prepared on the pool's one connection.
func prepared(t *testing.T, pool *pgxpool.Pool, name string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM pg_prepared_statements WHERE name = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A server error is a *pgconn.PgError, as pgx's Exec returns it, and the connection it
// came on stays usable: the exchange read on to the ReadyForQuery.
func TestAStatementsServerErrorIsAPgErrorAndTheConnectionGoesOn(t *testing.T) {
	pool := newPool(t, pg.NewDatabase(t))
	e := New(pool)
	ctx := testCtx(t)
	if err := e.Exec(ctx, "insert_t", insert, []any{1, "a"}); err != nil {
		t.Fatal(err)
	}
	err := e.Exec(ctx, "insert_t", insert, []any{1, "b"})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a duplicate key: %v, want a *pgconn.PgError with SQLSTATE 23505", err)
	}
	if err := e.Exec(ctx, "insert_t", insert, []any{2, "c"}); err != nil {
		t.Fatalf("the statement after the server's error: %v", err)
	}
	if n := rows(t, pool); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
	if n := prepared(t, pool, "insert_t"); n != 1 {
		t.Errorf("%d statements insert_t prepared on the connection, want 1", n)
	}
}

// A statement the server holds (here: behind a lock) ends when the caller gives up or
// the backend is terminated, with the error pgx's Exec would return, and the connection
// it left in an unknown state is dropped: the next statement runs on a new one.
func TestAStatementCutOffWhileItWaitsFailsAndTheNextRunsOnANewConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, dsn string, cancel context.CancelFunc)
		want func(error) bool
	}{
		{
			name: "its context is cancelled",
			cut:  func(t *testing.T, _ string, cancel context.CancelFunc) { cancel() },
			want: func(err error) bool { return errors.Is(err, context.Canceled) },
		},
		{
			name: "its backend is terminated",
			cut: func(t *testing.T, dsn string, _ context.CancelFunc) {
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatal(err)
				}
				if err := pg.TerminateBackends(testCtx(t), strings.TrimPrefix(u.Path, "/")); err != nil {
					t.Fatal(err)
				}
			},
			want: func(err error) bool { return err != nil && !errors.Is(err, context.Canceled) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pg.NewDatabase(t)
			pool := newPool(t, dsn)
			e := New(pool)
			// Prepared before the lock is taken: preparing would wait for the lock too,
			// inside pgx.
			if err := e.Exec(testCtx(t), "insert_t", insert, []any{1, "a"}); err != nil {
				t.Fatal(err)
			}
			var pid uint32
			c, err := pool.Acquire(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			pid = c.Conn().PgConn().PID()
			c.Release()

			blocker, err := pgx.Connect(testCtx(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer blocker.Close(context.Background())
			if _, err := blocker.Exec(testCtx(t), "BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- e.Exec(ctx, "insert_t", insert, []any{2, "b"}) }()
			waitForLockWait(t, dsn)
			tc.cut(t, dsn, cancel)
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				t.Fatal("Exec did not return while PostgreSQL held its statement")
			}
			if !tc.want(err) {
				t.Fatalf("Exec = %v", err)
			}
			t.Logf("Exec: %v", err)
			blocker.Close(context.Background())
			// The cut statement never commits: left to wait, it would take the lock now
			// and insert its row beside the caller's retry (1d8d366).
			waitNoOtherActive(t, dsn)
			var cut int
			if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM t WHERE k = 2`).Scan(&cut); err != nil {
				t.Fatal(err)
			}
			if cut != 0 {
				t.Errorf("the cut statement's row was inserted once the lock was released")
			}

			if err := e.Exec(testCtx(t), "insert_t", insert, []any{3, "c"}); err != nil {
				t.Fatalf("the statement after the cut one: %v", err)
			}
			c, err = pool.Acquire(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			if c.Conn().PgConn().PID() == pid {
				t.Errorf("the cut statement's connection (backend %d) is still in the pool", pid)
			}
		})
	}
}

// waitNoOtherActive waits until no other session of dsn's database runs a statement.
func waitNoOtherActive(t *testing.T, dsn string) {
	t.Helper()
	watcher, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active int
		if err := watcher.QueryRow(testCtx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'`).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("another session still runs a statement")
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// waitForLockWait waits until a session of dsn's database waits for a lock.
func waitForLockWait(t *testing.T, dsn string) {
	t.Helper()
	watcher, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := watcher.QueryRow(testCtx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement never waited for the lock")
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// The statement is prepared under its name unless the DSN asks pgx for another query
// mode (a transaction-pooling pgbouncer cannot keep prepared statements): then it goes
// through pgx's Exec in that mode, and runs all the same.
func TestAStatementIsPreparedOnlyWhenTheDSNLetsPgxPrepare(t *testing.T) {
	for _, tc := range []struct {
		mode     string // default_query_exec_mode, "" for pgx's default
		prepared bool
	}{
		{"", true},
		{"simple_protocol", false},
		{"exec", false},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			dsn := pg.NewDatabase(t)
			if tc.mode != "" {
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				dsn += sep + "default_query_exec_mode=" + tc.mode
			}
			pool := newPool(t, dsn)
			e := New(pool)
			for k := range 3 {
				if err := e.Exec(testCtx(t), "insert_t", insert, []any{k, "a"}); err != nil {
					t.Fatal(err)
				}
			}
			if n := rows(t, pool); n != 3 {
				t.Errorf("%d rows, want 3", n)
			}
			if got := prepared(t, pool, "insert_t") > 0; got != tc.prepared {
				t.Errorf("insert_t prepared on the connection: %v, want %v", got, tc.prepared)
			}
		})
	}
}

// ExecTag returns the statement's command tag: a count the statement tells without rows
// to read.
func TestExecTagReturnsTheStatementsCommandTag(t *testing.T) {
	pool := newPool(t, pg.NewDatabase(t))
	e := New(pool)
	ctx := testCtx(t)
	for range 2 { // prepared, then from the connection's cache
		tag, err := e.ExecTag(ctx, "three", `SELECT g FROM generate_series(1, $1::int) g`, []any{3})
		if err != nil {
			t.Fatal(err)
		}
		if tag.String() != "SELECT 3" || tag.RowsAffected() != 3 {
			t.Errorf("tag %q, want SELECT 3", tag)
		}
	}
}
