package testenv

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPostgresRestartKeepsTheData(t *testing.T) {
	if _, ok := os.LookupEnv(PostgresDSNEnv); ok {
		t.Log("an external server cannot be restarted; starting a private one for this test")
		t.Setenv(PostgresDSNEnv, "")
	}
	pg := NewPostgres(t)
	dsn := pg.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	execSQL(t, ctx, dsn, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')")
	if err := pg.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "before restart" {
		t.Fatalf("after restart: v=%q err=%v, want the row written before", v, err)
	}
}

var (
	sharedPGOnce sync.Once
	sharedPG     *Postgres
	sharedPGErr  error
)

// sharedPostgres is the package's PostgreSQL server for tests that neither restart nor
// stop it, started on first use and stopped after all tests.
func sharedPostgres(t *testing.T) *Postgres {
	t.Helper()
	sharedPGOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sharedPG, sharedPGErr = StartPostgres(ctx)
		if sharedPGErr == nil {
			afterAllTests(sharedPG.Stop)
		}
	})
	if sharedPGErr != nil {
		t.Fatalf("start PostgreSQL: %v", sharedPGErr)
	}
	return sharedPG
}

func TestTerminateBackendsKillsEveryConnectionToTheDatabase(t *testing.T) {
	pg := sharedPostgres(t)
	dsn := pg.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	db := conn.Config().Database
	if err := pg.TerminateBackends(ctx, db); err != nil {
		t.Fatalf("TerminateBackends: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query on a terminated connection succeeded")
	}
	// The database itself is still there for new connections.
	execSQL(t, ctx, dsn, "SELECT 1")
}

func TestNewDatabaseRejectsAWrongPassword(t *testing.T) {
	pg := sharedPostgres(t)
	dsn := pg.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = "wrong"
	_, err = pgx.ConnectConfig(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "28P01") {
		t.Fatalf("connect with a wrong password: err=%v, want SQLSTATE 28P01", err)
	}
}

func TestPostgresMissingBinariesSayHowToInstallThem(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := postgresBinDir(t.TempDir() + "/*/bin")
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("error %q does not say how to install PostgreSQL", err)
	}
}

func execSQL(t *testing.T, ctx context.Context, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// A template is prepared once, on first use; each copy starts with what preparing left
// and is a database of its own.
func TestATemplatesCopiesEachStartFromThePreparedDatabaseWhichIsPreparedOnce(t *testing.T) {
	pg := sharedPostgres(t)
	prepared := 0
	tm := pg.NewTemplate(func(ctx context.Context, dsn string) error {
		prepared++
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('prepared')")
		return err
	})
	defer tm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := tm.NewDatabase(t), tm.NewDatabase(t)
	if a == b {
		t.Fatalf("two copies share the DSN %s", a)
	}
	if prepared != 1 {
		t.Errorf("prepared %d times, want once", prepared)
	}
	execSQL(t, ctx, a, "INSERT INTO kept VALUES ('in a')")
	for dsn, want := range map[string]string{a: "in a,prepared", b: "prepared"} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(ctx, "SELECT string_agg(v, ',' ORDER BY v) FROM kept").Scan(&got)
		conn.Close(ctx)
		if err != nil || got != want {
			t.Errorf("%s: kept = %q (%v), want %q", conn.Config().Database, got, err, want)
		}
	}
}
