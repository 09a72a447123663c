package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
)

// NewAuditStore connects to the database of opts (a PostgreSQL sink's options), applying
// pending migrations first when opts.Migrate is set (else refusing a schema newer than
// the binary), and returns the audit store (internal/sinks/postgres/auditstore) that
// stores events as cluster's. It claims no writer lock: every replica stores the events
// it receives.
func NewAuditStore(ctx context.Context, cluster string, opts Options) (*auditstore.Store, error) {
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("audit store: %w", classify(err, ""))
	}
	password := cfg.ConnConfig.Password
	if opts.Migrate {
		if _, err := Migrate(ctx, opts.DSN, opts.Schema); err != nil {
			return nil, fmt.Errorf("audit store: %w", err)
		}
	}
	cfg.MaxConns = 2
	setApplicationName(&cfg.ConnConfig.Config)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit store: %w", classify(err, password))
	}
	if !opts.Migrate {
		// Migrate verified the schema; without it, refuse a newer one all the same.
		if err := verifySchema(ctx, pool, opts.Schema); err != nil && !errors.Is(err, errUnverifiable) {
			pool.Close()
			return nil, fmt.Errorf("audit store: %w", classify(err, password))
		}
	}
	return auditstore.New(pool, auditstore.Options{Schema: opts.Schema, Cluster: cluster,
		Classify: func(err error) error { return classify(err, password) }}), nil
}
