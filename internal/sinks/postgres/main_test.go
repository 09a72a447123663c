package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// pg is the package's shared server; every test gets its own database (NewDatabase).
// migrated is a database of pg migrated once: tests whose subject is not migrating a fresh
// database take a copy of it (migrated.NewDatabase, newSink) rather than migrating their
// own, which cost most of a short test's time.
var (
	pg       *testenv.Postgres
	migrated *testenv.Template
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := testenv.StartPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL for the postgres sink tests:", err)
		os.Exit(1)
	}
	pg = p
	migrated = p.NewTemplate(func(ctx context.Context, dsn string) error {
		_, err := schema.Migrate(ctx, dsn, "kube_cdc")
		return err
	})
	code := m.Run()
	migrated.Close()
	if code != 0 && p.LogPath() != "" {
		fmt.Fprintln(os.Stderr, testenv.Tail(p.LogPath(), 40))
	}
	p.Stop()
	os.Exit(code)
}
