package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

// Validate checks the options as the config layer leaves them (defaults filled). Its
// error reads "<key>: <reason>", the key under sinks[].postgres ("dsn", "schema"), so
// that the config layer can name the whole key; no message shows the DSN's password.
func (o Options) Validate() error {
	if o.DSN == "" {
		return errors.New("dsn: required")
	}
	if _, err := pgconn.ParseConfig(o.DSN); err != nil {
		return fmt.Errorf("dsn: malformed DSN: %s", dsnError(o.DSN, err))
	}
	if !identifier.MatchString(o.Schema) {
		return fmt.Errorf("schema: %q is not a plain SQL identifier", o.Schema)
	}
	if o.MaxConns <= 0 {
		return fmt.Errorf("maxConns: must be greater than 0, got %d", o.MaxConns)
	}
	if o.Retention < 0 {
		return fmt.Errorf("retention: must not be negative, got %v", o.Retention)
	}
	if o.PartitionsAhead < 0 {
		return fmt.Errorf("partitionsAhead: must not be negative, got %d", o.PartitionsAhead)
	}
	if o.ChangedPaths != "" && o.ChangedPaths != ChangedPathsWrite && o.ChangedPaths != ChangedPathsRead {
		return fmt.Errorf("changedPaths: must be %q or %q, got %q", ChangedPathsWrite, ChangedPathsRead, o.ChangedPaths)
	}
	if o.Events.Retention < 0 {
		return fmt.Errorf("events.retention: must not be negative, got %v", o.Events.Retention)
	}
	return nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// dsnError words pgconn's parse error without the connection string, and scrubs
// anything that looks like the DSN's password from what is left.
func dsnError(dsn string, err error) string {
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			if i := strings.Index(rest, "`: "); i >= 0 {
				msg = rest[i+3:]
			}
		}
	}
	return pgdb.ScrubPassword(msg, dsnPasswords(dsn)...)
}

var kvPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// dsnPasswords finds password candidates in a DSN that may be malformed.
func dsnPasswords(dsn string) []string {
	var out []string
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		pw := strings.Trim(m[1], "'")
		if pw != "" {
			out = append(out, pw)
		}
	}
	return out
}
