package pgdb

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connectTimeout is how long a connect waits for the server unless the DSN says.
const connectTimeout = 10 * time.Second

// PoolConfig parses dsn into a pool configuration: the application name that names this
// process to other writers and to `kube-cdc status` (ApplicationName), and a connect
// timeout. It returns the DSN's password, which every error is to be scrubbed of
// (Classify). A malformed DSN is retry.Terminal.
func PoolConfig(dsn string) (*pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, "", Classify(err, "")
	}
	configure(&cfg.ConnConfig.Config)
	return cfg, cfg.ConnConfig.Password, nil
}

// Connect opens one connection to dsn, configured as PoolConfig configures a pool's,
// for a command's work on one session (migrations, which hold a session lock). It
// returns the DSN's password with it; its errors are classified (Classify).
func Connect(ctx context.Context, dsn string) (*pgx.Conn, string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, "", Classify(err, "")
	}
	configure(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, cfg.Password, Classify(err, cfg.Password)
	}
	return conn, cfg.Password, nil
}

func configure(cc *pgconn.Config) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" { // the DSN (or PGAPPNAME) did not choose one
		cc.RuntimeParams["application_name"] = ApplicationName()
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = connectTimeout
	}
}

// ApplicationName names this process to PostgreSQL, "kube-cdc/<host>/<pid>", cut to the
// 63 bytes the server keeps by shortening the host, so the pid survives.
func ApplicationName() string {
	host, _ := os.Hostname()
	pid := "/" + strconv.Itoa(os.Getpid())
	const prefix, limit = "kube-cdc/", 63
	if room := limit - len(prefix) - len(pid); len(host) > room {
		host = host[:max(room, 0)]
	}
	if host == "" {
		host = "?"
	}
	return prefix + host + pid
}
