package postgres

import "time"

// Defaults of Options; the config layer reads them.
const (
	DefaultSchema   = "kube_cdc"
	DefaultMigrate  = true // the config layer's: a false Options.Migrate is an explicit choice
	DefaultMaxConns = 4
)

// Options configures the PostgreSQL sink: the `sinks[].postgres` config keys.
type Options struct {
	// DSN is a libpq connection string or URL. Required.
	DSN string `koanf:"dsn"`
	// Schema holds kube-cdc's tables. Default DefaultSchema.
	Schema string `koanf:"schema"`
	// Migrate applies pending migrations at start. Default DefaultMigrate (true).
	Migrate bool `koanf:"migrate"`
	// HardDelete deletes the objects row on delete instead of setting deleted_at. Default false.
	HardDelete bool `koanf:"hardDelete"`
	// Retention deletes changes rows older than this; 0 keeps them forever. Default 0.
	Retention time.Duration `koanf:"retention"`
	// MaxConns caps the connection pool. Default DefaultMaxConns.
	MaxConns int32 `koanf:"maxConns"`

	// Noise says, to Check, that a resource this sink writes has ignore paths
	// (resources[].history; SetIgnorePaths), so that run counts the changes it leaves
	// out in history_skipped. Not a config key: the command that checks sets it.
	Noise bool `koanf:"-"`
}
