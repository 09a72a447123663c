package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// NewAuditStore connects to the database of opts (a PostgreSQL sink's options), applying
// pending migrations first when opts.Migrate is set (else refusing a schema newer than
// the binary), and returns the audit store (internal/sinks/postgres/auditstore) that
// stores events as cluster's. It claims no writer lock: every replica stores the events
// it receives.
func NewAuditStore(ctx context.Context, cluster string, opts Options) (*auditstore.Store, error) {
	opts = opts.withDefaults()
	cfg, password, err := pgdb.PoolConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("audit store: %w", err)
	}
	if opts.Migrate {
		if _, err := schema.Migrate(ctx, opts.DSN, opts.Schema); err != nil {
			return nil, fmt.Errorf("audit store: %w", err)
		}
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit store: %w", pgdb.Classify(err, password))
	}
	if !opts.Migrate {
		// Migrate verified the schema; without it, refuse a newer one all the same.
		if err := schema.Verify(ctx, pool, opts.Schema); err != nil && !errors.Is(err, schema.ErrUnverifiable) {
			pool.Close()
			return nil, fmt.Errorf("audit store: %w", pgdb.Classify(err, password))
		}
	}
	return auditstore.New(pool, auditstore.Options{Schema: opts.Schema, Cluster: cluster,
		Classify: func(err error) error { return pgdb.Classify(err, password) }}), nil
}
