package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The read side (internal/read/store) owns every read of the schema; it imports no sink,
// so the sink hands it the two things only the sink knows.

// VerifySchema refuses a schema a newer kube-cdc migrated, as New does: an older
// kube-cdc's queries may not mean the same against it. A role that may not read
// schema_migrations reads on (nil). For store.Options.VerifySchema.
func VerifySchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := verifySchema(ctx, pool, schema); err != nil && !errors.Is(err, errUnverifiable) {
		return err
	}
	return nil
}

// ReadJoinStats is AuditStore.JoinStats for cluster in schema, through a pool the caller
// opened (the read store's, read only): what `kube-cdc status` shows of the actor join.
func ReadJoinStats(ctx context.Context, pool *pgxpool.Pool, schema, cluster string, since time.Time) (JoinStats, error) {
	a := &AuditStore{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), cluster: cluster, password: pool.Config().ConnConfig.Password}
	return a.JoinStats(ctx, since)
}

// Actor is the user behind a change, as the audit store joins it (ExactActors).
type Actor struct {
	Username     string
	Impersonator string // who impersonated Username; "" when nobody did
	UserAgent    string
	Verb         string
	Subresource  string
	AuditID      string
	Match        string        // "exact" or "nearest"
	Distance     time.Duration // a nearest match's distance in time; 0 when exact
}
