package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
)

// The names the read side and the audit store (reader.go, history.go, asof.go,
// status.go, audit.go) still call from this package. They move out of it (issue 30);
// their new homes call dial and schema directly, and this file goes with the last of
// them.

func classify(err error, password string) error { return pgdb.Classify(err, password) }

func verifySchema(ctx context.Context, q schema.Querier, name string) error {
	return schema.Verify(ctx, q, name)
}

var errUnverifiable = schema.ErrUnverifiable

func setApplicationName(cc *pgconn.Config) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = pgdb.ApplicationName()
	}
}

// Writer is writerlock.Writer, which Reader.Writers returns.
type Writer = writerlock.Writer

// Migrate is schema.Migrate, for NewAuditStore and for the tests of ui, upgradetest and
// bench/internal/historygen, until they call schema.Migrate.
func Migrate(ctx context.Context, dsn, name string) ([]string, error) {
	return schema.Migrate(ctx, dsn, name)
}
