package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// pg is the package's shared server; every test gets its own database (NewDatabase).
var pg *testenv.Postgres

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := testenv.StartPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL for the integration tests:", err)
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

// cluster is the cluster name the sinks write under.
const cluster = "test"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func count(t *testing.T, dsn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := connect(t, dsn).QueryRow(testCtx(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// eventually polls cond until it holds, failing the test when it does not within timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// countingMetrics is the PostgreSQL sink's metrics hook, counting.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countingMetrics) Quarantined(sink, resource string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[sink+"/"+resource] += n
}

func (m *countingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}

// syncBuffer collects log lines from concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
