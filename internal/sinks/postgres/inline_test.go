package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// A steady watch's batch is one statement sent without pgx's Exec (roundtrip.Executor): it
// must end as Exec's would when the server goes away or the caller gives up while the
// statement waits, and leave the sink able to write the batch again, exactly once.
func TestASingleStatementWriteCutOffWhileItWaitsFailsRetryablyAndItsRetryLandsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, dsn string, cancel context.CancelFunc)
		want func(error) bool
		// rolledBack: the cut statement cannot commit. A client that gives up does not
		// stop the server's statement: once the lock is free it may commit, as with
		// pgx's Exec; the retry then changes nothing.
		rolledBack bool
	}{
		{
			name: "its context is cancelled",
			cut:  func(t *testing.T, _ string, cancel context.CancelFunc) { cancel() },
			want: func(err error) bool { return errors.Is(err, context.Canceled) },
		},
		{
			name:       "its backend is terminated",
			rolledBack: true,
			cut: func(t *testing.T, dsn string, _ context.CancelFunc) {
				db := strings.TrimPrefix(mustURL(t, dsn).Path, "/")
				if err := pg.TerminateBackends(testCtx(t), db); err != nil {
					t.Fatal(err)
				}
			},
			want: func(err error) bool { return err != nil && !retry.IsTerminal(err) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One connection, on which the two-change statement is prepared before the
			// lock is taken: preparing it would wait for the lock too, inside pgx.
			s, dsn := newSink(t, Options{MaxConns: 1})
			write(t, s, batch(5, cm("a", "uid-a", 4, change.OpCreate), cm("a", "uid-a", 5, change.OpUpdate)))
			b := batch(7, cm("a", "uid-a", 6, change.OpUpdate), cm("b", "uid-b", 7, change.OpCreate))
			if !s.inlines(&batchWrite{staged: b.Changes}) {
				t.Fatal("the batch would not be written as one statement: the test tests nothing")
			}

			waitBlocked, unblock := blockWrites(t, dsn)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- s.Write(ctx, b) }()
			waitBlocked()
			tc.cut(t, dsn, cancel)
			var err error
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				t.Fatal("the Write did not return while PostgreSQL held its statement")
			}
			if !tc.want(err) {
				t.Fatalf("Write = %v (terminal %v)", err, retry.IsTerminal(err))
			}
			t.Logf("Write: %v", err)
			if tc.rolledBack {
				if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 2 {
					t.Fatalf("changes rows after the cut Write = %d, want 2", n)
				}
			}
			unblock()
			// At the first try: the connection the cut left in an unknown state is gone.
			write(t, s, b)
			if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 4 {
				t.Errorf("changes rows = %d, want 4", n)
			}
			if r := mustObject(t, dsn, "a"); r.RV != 6 {
				t.Errorf("row a = %+v, want RV 6", r)
			}
			if rv := checkpoint(t, s, configmaps); rv != 7 {
				t.Errorf("checkpoint = %d, want 7", rv)
			}
			// And so are writes after it.
			for rv := change.RV(8); rv < 12; rv++ {
				write(t, s, batch(rv, cm("a", "uid-a", rv, change.OpUpdate)))
			}
		})
	}
}

// The single statement is prepared on the connection unless the DSN asks pgx for another
// query mode (a transaction-pooling pgbouncer cannot keep prepared statements): then it
// goes through pgx's Exec in that mode, and lands all the same.
func TestASingleStatementIsPreparedOnlyWhenTheDSNLetsPgxPrepare(t *testing.T) {
	t.Parallel()
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
				dsn += "&default_query_exec_mode=" + tc.mode
				if !strings.Contains(dsn, "?") {
					dsn = strings.Replace(dsn, "&", "?", 1)
				}
			}
			s, _ := newSink(t, Options{DSN: dsn, Migrate: true, MaxConns: 1})
			write(t, s, batch(5, cm("a", "uid-a", 5, change.OpCreate)))
			write(t, s, batch(6, cm("a", "uid-a", 6, change.OpUpdate)))
			if r := mustObject(t, dsn, "a"); r.RV != 6 {
				t.Errorf("row a = %+v, want RV 6", r)
			}
			c, err := s.pool.Acquire(testCtx(t)) // the one connection the writes used
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			var n int
			if err := c.QueryRow(testCtx(t), `SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'kube_cdc_inline_%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if got := n > 0; got != tc.prepared {
				t.Errorf("%d kube_cdc_inline statements prepared on the connection, want prepared %v", n, tc.prepared)
			}
		})
	}
}
