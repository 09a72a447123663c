package postgres

import (
	"time"

	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// Defaults of Options; the config layer reads them.
const (
	DefaultSchema   = "kube_cdc"
	DefaultMigrate  = true // the config layer's: a false Options.Migrate is an explicit choice
	DefaultMaxConns = 4
	// DefaultPartitionsAhead is how many months of changes partitions exist ahead of the
	// current one (migration 012).
	DefaultPartitionsAhead = schema.DefaultPartitionsAhead
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
	// StreamsEvents says, to Check, that a resource this sink writes is Kubernetes Events,
	// so that run writes the events table (with Events.Table). Not a config key: the
	// command that checks sets it.
	StreamsEvents bool `koanf:"-"`
	// RetentionByPartition makes retention drop whole months only: no row is deleted one
	// by one, and a row stays until its month is entirely older than Retention (up to a
	// month longer). Default false: retention is exact, deleting the rows of the month the
	// cutoff falls in, which every minute's run does as the cutoff sweeps through it, so
	// nearly every row is then deleted one by one before its month is dropped
	// (docs/operations.md, "Partitioned history").
	RetentionByPartition bool `koanf:"retentionByPartition"`
	// PartitionsAhead is how many monthly partitions of changes the sink keeps created
	// ahead of the current month (at start and every hour). Default
	// DefaultPartitionsAhead; rows of a month not created yet go to changes_default.
	PartitionsAhead int `koanf:"partitionsAhead"`
	// ChangedPaths is when a watch update's changed paths (history()'s changed column)
	// are computed: ChangedPathsWrite (the default, "") stores them in changes.changed as
	// the update is written, which keeps history() a read of rows but costs the write
	// ~25 µs of database time per update (docs/benchmarks.md); ChangedPathsRead stores
	// nothing and history() computes them when read (~18 µs per version shown).
	ChangedPaths string `koanf:"changedPaths"`
	// Events is how Kubernetes Events are stored (events.go): by default one row per
	// event in the events table, with its own retention.
	Events EventsOptions `koanf:"events"`
}

// The values of Options.ChangedPaths.
const (
	ChangedPathsWrite = "write"
	ChangedPathsRead  = "read"
)

func (o Options) storesChangedPaths() bool { return o.ChangedPaths != ChangedPathsRead }

// upkeep is the schema upkeep's share of the options.
func (o Options) upkeep() schema.Options {
	return schema.Options{Retention: o.Retention, RetentionByPartition: o.RetentionByPartition, PartitionsAhead: o.PartitionsAhead}
}
