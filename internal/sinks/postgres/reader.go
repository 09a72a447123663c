package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// The read side (internal/read/store) owns every read of the schema; it imports no sink,
// so the sink hands it the two things only the sink knows.

// VerifySchema refuses a schema a newer kube-cdc migrated, as New does: an older
// kube-cdc's queries may not mean the same against it. A role that may not read
// schema_migrations reads on (nil). For store.Options.VerifySchema.
func VerifySchema(ctx context.Context, pool *pgxpool.Pool, name string) error {
	if err := schema.Verify(ctx, pool, name); err != nil && !errors.Is(err, schema.ErrUnverifiable) {
		return err
	}
	return nil
}

// ReadJoinStats is the audit store's JoinStats for cluster in schema, through a pool the
// caller opened (the read store's, read only): what `kube-cdc status` shows of the actor
// join.
func ReadJoinStats(ctx context.Context, pool *pgxpool.Pool, schemaName, cluster string, since time.Time) (audit.JoinStats, error) {
	password := pool.Config().ConnConfig.Password
	a := auditstore.New(pool, auditstore.Options{Schema: schemaName, Cluster: cluster,
		Classify: func(err error) error { return pgdb.Classify(err, password) }})
	return a.JoinStats(ctx, since)
}
