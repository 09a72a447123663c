package pgdb

import (
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config parses dsn into a pool configuration named after this process (SetApplicationName)
// that gives up connecting after 10 s unless the DSN sets connect_timeout. It returns the
// DSN's password, which the caller scrubs from its errors (Classify); a DSN that does not
// parse is a terminal error.
func Config(dsn string) (*pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, "", Classify(err, "")
	}
	SetApplicationName(&cfg.ConnConfig.Config)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	return cfg, cfg.ConnConfig.Password, nil
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

// SetApplicationName sets application_name unless the DSN (or PGAPPNAME) chose one.
func SetApplicationName(cc *pgconn.Config) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = ApplicationName()
	}
}
