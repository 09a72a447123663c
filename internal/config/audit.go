package config

import (
	"errors"
	"time"
)

// Audit configures the audit receiver: the apiserver's audit events (audit.k8s.io/v1),
// joined to changes to name who made each (internal/audit, the view change_actors).
type Audit struct {
	Webhook AuditWebhook `koanf:"webhook"`
	LogFile AuditLogFile `koanf:"logFile"`
	// Sink is the PostgreSQL sink whose database stores the events. Default "": the first
	// PostgreSQL sink.
	Sink string `koanf:"sink"`
	// ActorsTopic is the Kafka topic (of the first Kafka sink's brokers) the audit inputs
	// also write every stored event to, keyed like the data topics, so a Kafka consumer
	// can join actors that arrive after their records. {cluster} is expanded. Written
	// whenever a Kafka sink is configured. Default kafka.DefaultActorsTopic.
	ActorsTopic string `koanf:"actorsTopic"`
	// Wait is how long the stdout and Kafka sinks wait, per batch, for the actors of its
	// changes whose audit events have not arrived yet, so that their records carry
	// source.user (the Kafka and stdout sinks). Default 0: the actors stored by then, no waiting (PostgreSQL joins
	// later arrivals anyway). Bounded by the apiserver's batch wait plus a little.
	Wait time.Duration `koanf:"wait"`
	// StatsInterval: this often the receiver counts the join of the last StatsWindow
	// (joined and unmatched changes and events: metrics). Default 1m; 0 turns it off.
	// Counting joins every change of the window (about 85 µs of PostgreSQL CPU each).
	StatsInterval time.Duration `koanf:"statsInterval"`
	// StatsWindow is how far back the counts reach. Default 5m.
	StatsWindow time.Duration `koanf:"statsWindow"`
}

// AuditWebhook is the endpoint of the apiserver's webhook backend
// (--audit-webhook-config-file, batch mode).
type AuditWebhook struct {
	// Listen is the receiver's address, its own port (HTTPS). Default "": off.
	Listen string `koanf:"listen"`
	// TLSCertFile and TLSKeyFile are the receiver's serving certificate and key (PEM).
	// Required with listen.
	TLSCertFile string `koanf:"tlsCertFile"`
	TLSKeyFile  string `koanf:"tlsKeyFile"`
	// ClientCAFile admits callers with a client certificate this CA signed (PEM). At least
	// one of clientCAFile and tokenFile is required with listen.
	ClientCAFile string `koanf:"clientCAFile"`
	// TokenFile holds a bearer token (one line) callers may send instead.
	TokenFile string `koanf:"tokenFile"`
	// MaxBodyBytes: a request body over this is answered 413, unread when its
	// Content-Length says so, else read no further. Default 33554432 (32 MiB,
	// audit.DefaultMaxBodyBytes: the apiserver's batches of 400 events at 80 KiB each; with
	// its truncate backend on, batches are at most 10 MiB).
	MaxBodyBytes int64 `koanf:"maxBodyBytes"`
	// MaxInFlight: how many requests are read and stored at once; one more is answered 503
	// with Retry-After: 1, which the apiserver's webhook client waits for and sends again.
	// Default 4 (audit.DefaultMaxInFlight).
	MaxInFlight int `koanf:"maxInFlight"`
}

// AuditLogFile is an apiserver audit log on this host (--audit-log-path,
// --audit-log-format=json), followed across rotation, its position kept in the database.
type AuditLogFile struct {
	// Path of the log file. Default "": off.
	Path string `koanf:"path"`
	// PollInterval: this often the file is looked at for new lines. Default 1s.
	PollInterval time.Duration `koanf:"pollInterval"`
}

func (c *Config) validateAudit() error {
	if c.Audit.LogFile.PollInterval <= 0 {
		return keyErrorf("audit.logFile.pollInterval", "must be greater than 0, got %v", c.Audit.LogFile.PollInterval)
	}
	if c.Audit.LogFile.Path != "" {
		if _, err := c.AuditSink(); err != nil {
			return keyErrorf("audit.sink", "%s", reason(err))
		}
	}
	w := c.Audit.Webhook
	if c.Audit.Wait < 0 {
		return keyErrorf("audit.wait", "must not be negative (0 waits for no actor), got %v", c.Audit.Wait)
	}
	if c.Audit.StatsInterval < 0 {
		return keyErrorf("audit.statsInterval", "must not be negative (0 turns the counts off), got %v", c.Audit.StatsInterval)
	}
	if c.Audit.StatsWindow <= 0 {
		return keyErrorf("audit.statsWindow", "must be greater than 0, got %v", c.Audit.StatsWindow)
	}
	if w.MaxBodyBytes <= 0 {
		return keyErrorf("audit.webhook.maxBodyBytes", "must be greater than 0, got %d", w.MaxBodyBytes)
	}
	if w.MaxInFlight <= 0 {
		return keyErrorf("audit.webhook.maxInFlight", "must be greater than 0, got %d", w.MaxInFlight)
	}
	if w.Listen == "" {
		return nil
	}
	if err := checkAddress(w.Listen); err != nil {
		return keyErrorf("audit.webhook.listen", "%v", err)
	}
	for _, f := range []struct{ key, path string }{
		{"audit.webhook.tlsCertFile", w.TLSCertFile}, {"audit.webhook.tlsKeyFile", w.TLSKeyFile},
	} {
		if f.path == "" {
			return keyErrorf(f.key, "required with audit.webhook.listen: the receiver serves HTTPS only")
		}
	}
	if w.ClientCAFile == "" && w.TokenFile == "" {
		return keyErrorf("audit.webhook.clientCAFile", "required with audit.webhook.listen, or audit.webhook.tokenFile: the receiver admits authenticated callers only")
	}
	// The files are read by run and check (which say FAIL naming the key), not here: a
	// config is valid where the files are not mounted (a laptop rendering the chart's).
	if _, err := c.AuditSink(); err != nil {
		return keyErrorf("audit.sink", "%s", reason(err))
	}
	return nil
}

// reason is err's message without the "config: " of an *Error.
func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

// AuditSink is the PostgreSQL sink whose database stores audit events: audit.sink's, or
// the first PostgreSQL sink.
func (c *Config) AuditSink() (Sink, error) {
	for _, s := range c.Sinks {
		if s.Type == SinkPostgres && (c.Audit.Sink == "" || c.Audit.Sink == s.Name) {
			return s, nil
		}
	}
	if c.Audit.Sink != "" {
		for _, s := range c.Sinks {
			if s.Name == c.Audit.Sink {
				return Sink{}, errorf("sink %q is a %s sink: audit events are stored in a postgres sink's database", s.Name, s.Type)
			}
		}
		return Sink{}, errorf("no postgres sink named %q: audit events are stored in a postgres sink's database", c.Audit.Sink)
	}
	return Sink{}, errorf("the audit receiver stores events in a postgres sink's database, and no postgres sink is configured")
}

// KafkaSink is the first Kafka sink, whose brokers take the actors topic; false when
// there is none.
func (c *Config) KafkaSink() (Sink, bool) {
	for _, s := range c.Sinks {
		if s.Type == SinkKafka {
			return s, true
		}
	}
	return Sink{}, false
}
