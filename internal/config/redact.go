package config

import (
	"net/url"
	"regexp"
	"strings"
)

const mask = "xxxxx"

// Redacted returns a deep enough copy of c to log: DSN and SASL passwords are masked.
func (c *Config) Redacted() *Config {
	r := *c
	r.Resources = append([]Resource(nil), c.Resources...)
	r.Sinks = append([]Sink(nil), c.Sinks...)
	for i := range r.Sinks {
		s := &r.Sinks[i]
		if s.Postgres != nil {
			pg := *s.Postgres
			pg.DSN = RedactDSN(pg.DSN)
			s.Postgres = &pg
		}
		if s.Kafka != nil {
			k := *s.Kafka
			k.Brokers = append([]string(nil), k.Brokers...)
			if k.SASL.Password != "" {
				k.SASL.Password = mask
			}
			s.Kafka = &k
		}
	}
	return &r
}

var kvPasswordValue = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN masks the password of a PostgreSQL URL or key=value connection string.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), mask)
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, mask)
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	if pws := dsnPasswords(dsn); len(pws) > 0 && strings.Contains(dsn, "://") {
		dsn = strings.Replace(dsn, ":"+pws[0]+"@", ":"+mask+"@", 1)
	}
	return kvPasswordValue.ReplaceAllString(dsn, "${1}"+mask)
}
