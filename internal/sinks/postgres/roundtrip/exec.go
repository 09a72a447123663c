package roundtrip

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Executor runs small statements on a pool's connections in one round trip (Exec).
type Executor struct {
	pool *pgxpool.Pool
	// prepares: the pool's DSN lets pgx keep prepared statements (its default
	// default_query_exec_mode, cache_statement); a DSN that asks for another mode (a
	// transaction-pooling pgbouncer) keeps Exec on pgx's Exec in that mode.
	prepares bool
}

// New returns the Executor of pool.
func New(pool *pgxpool.Pool) *Executor {
	cc := pool.Config().ConnConfig
	return &Executor{pool: pool, prepares: cc.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement && cc.StatementCacheCapacity > 0}
}

// exchangeMaxBytes bounds the parameters of a statement sent by Exec: a message
// this small goes into the socket's send buffer at once, so its write cannot wait on a
// server that is itself waiting for the client to read. Larger statements go through
// pgx's Exec, whose writes guard against that deadlock.
const exchangeMaxBytes = 64 << 10

// Exec runs sql (a statement that returns nothing the caller needs), prepared
// once per connection under name, as one Bind, Execute and Sync in one write, and reads
// its results to the ReadyForQuery.
//
// Why not pool.Exec: a steady watch writes a change or two per statement, so what pgx
// does around each round trip is paid per change, and the costliest part is not the
// encoding but its timers. pgconn arms a 15 ms timer around every write (to start a
// background reader should the write block: flushWithPotentialWriteReadDeadlock) and
// registers the context for every query; on a mostly idle process, arming the timer
// wakes a sleeping thread to watch it, which then wakes again when it would have fired.
// That was 14% of the client's CPU per write (BenchmarkWriteOfOneChange). Here the
// parameters are encoded by pgx (ExtendedQueryBuilder, the same codecs) and the
// protocol is pgconn's own (Frontend, ReceiveMessage, the same message handling), but
// the write has no timer (the statement is small: exchangeMaxBytes) and the context is
// watched once, by a deadline that interrupts a blocked read.
//
// Errors are what pool.Exec returns: a *pgconn.PgError for an ErrorResponse (the
// connection stays usable), a connection error otherwise (the connection is closed, and
// the pool drops it). A statement too large for the exchange, a connection pgx is not
// done with, or a DSN that asks pgx not to prepare statements (default_query_exec_mode
// other than cache_statement, as behind a transaction-pooling pgbouncer) goes through
// pgx's Exec instead.
func (e *Executor) Exec(ctx context.Context, name, sql string, args []any) error {
	_, err := e.ExecTag(ctx, name, sql, args)
	return err
}

// ExecTag is Exec that also returns the statement's command tag ("SELECT 3", "INSERT 0
// 1"): a statement can tell the caller a count that way without returning rows to read.
func (e *Executor) ExecTag(ctx context.Context, name, sql string, args []any) (pgconn.CommandTag, error) {
	if !e.prepares {
		return e.pool.Exec(ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		return tag, err
	}
	defer c.Release()
	conn := c.Conn()
	sd, err := conn.Prepare(ctx, name, sql)
	if err != nil {
		return tag, err
	}
	var q pgx.ExtendedQueryBuilder
	if err := q.Build(conn.TypeMap(), sd, args); err != nil {
		return tag, err
	}
	size := 0
	for _, v := range q.ParamValues {
		size += len(v)
	}
	pc := conn.PgConn()
	if size > exchangeMaxBytes || pc.IsBusy() {
		return conn.Exec(ctx, sql, args...)
	}
	if err := ctx.Err(); err != nil {
		return tag, err
	}
	f := pc.Frontend()
	f.SendBind(&pgproto3.Bind{PreparedStatement: sd.Name, ParameterFormatCodes: q.ParamFormats, Parameters: q.ParamValues,
		ResultFormatCodes: q.ResultFormats})
	f.SendExecute(&pgproto3.Execute{})
	f.SendSync(&pgproto3.Sync{})

	// A cancelled context interrupts whatever read or write is under way; the
	// connection is then in an unknown state and is closed below.
	stop := context.AfterFunc(ctx, func() { _ = pc.Conn().SetDeadline(time.Unix(1, 0)) })
	var pgErr *pgconn.PgError
	connErr := f.Flush()
	if connErr == nil {
		pgErr, tag, connErr = readResults(pc)
	}
	interrupted := !stop()
	if interrupted || connErr != nil {
		// Nothing more can be read from the connection in order: closing it makes the
		// pool drop it on Release.
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if interrupted {
			// Closing the socket does not stop the server's statement: one waiting for a
			// lock would commit once it got it, beside the caller's retry of the same
			// batch, and both would pass the changes insert's guard (each reads the
			// tables as they were before either committed): the retry's rows twice. Ask
			// the server to cancel it first, as pgx does for a cancelled query.
			_ = pc.CancelRequest(closeCtx)
		}
		_ = pc.Close(closeCtx)
	}
	switch {
	case connErr != nil && interrupted:
		return tag, fmt.Errorf("%w: %w", context.Cause(ctx), connErr)
	case connErr != nil:
		return tag, connErr
	case pgErr != nil:
		return tag, pgErr
	}
	return tag, nil // the ReadyForQuery came: done, even if the context ended just after
}

// readResults reads a statement's results up to the ReadyForQuery that ends them. It
// returns the server's error, if it sent one (the first: the server then skips to the
// Sync), the statement's command tag, and the error that ended the reading before the
// ReadyForQuery, if any.
func readResults(pc *pgconn.PgConn) (*pgconn.PgError, pgconn.CommandTag, error) {
	var pgErr *pgconn.PgError
	var tag pgconn.CommandTag
	for {
		// context.Background: Exec watches the context itself, once.
		msg, err := pc.ReceiveMessage(context.Background())
		if err != nil {
			return pgErr, tag, err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.CommandComplete:
			tag = pgconn.NewCommandTag(string(m.CommandTag))
		case *pgproto3.ReadyForQuery:
			return pgErr, tag, nil
		}
	}
}
