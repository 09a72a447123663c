package roundtrip

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// pg is the package's shared server; every test gets its own database (NewDatabase).
var pg *testenv.Postgres

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := testenv.StartPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL for the roundtrip tests:", err)
		os.Exit(1)
	}
	pg = p
	code := m.Run()
	if code != 0 && p.LogPath() != "" {
		fmt.Fprintln(os.Stderr, testenv.Tail(p.LogPath(), 40))
	}
	p.Stop()
	os.Exit(code)
}
