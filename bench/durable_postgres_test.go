package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// testenv's PostgreSQL runs with fsync=off and synchronous_commit=off: a commit costs no
// WAL flush there, which flatters one-autocommit-per-row writers (baseline B) most. The
// durable server is a second private PostgreSQL with the production defaults (fsync and
// synchronous_commit on), started on first use, for the initial-sync comparison.
var (
	durableOnce sync.Once
	durable     *durablePG
	durableErr  error
)

type durablePG struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	n    int
}

func durablePostgres(b *testing.B) *durablePG {
	b.Helper()
	durableOnce.Do(func() { durable, durableErr = startDurablePG() })
	if durableErr != nil {
		b.Fatalf("durable PostgreSQL: %v", durableErr)
	}
	return durable
}

func startDurablePG() (*durablePG, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(bins) == 0 {
		return nil, fmt.Errorf("no /usr/lib/postgresql/*/bin")
	}
	bin := bins[len(bins)-1]
	dir, err := os.MkdirTemp("", "kube-cdc-bench-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "bench",
		"--auth", "trust", "-E", "UTF8", "--locale", "C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	p := &durablePG{dir: dir, done: make(chan struct{})}
	if p.port, err = testenv.FreePort(); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(os.TempDir(), fmt.Sprintf("kube-cdc-bench-pg-%d.log", p.port)))
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(p.port), "-h", "127.0.0.1", "-k", dir,
		"-c", "max_connections=200", "-c", "shared_buffers=64MB", // fsync, synchronous_commit: defaults (on)
		// BenchmarkDatabaseShare: commit times for the latency, statements per change.
		"-c", "track_commit_timestamp=on", "-c", "shared_preload_libraries=pg_stat_statements",
		"-c", "pg_stat_statements.track_planning=on")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(context.Background(), p.dsn("postgres"))
		if err == nil {
			conn.Close(context.Background())
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *durablePG) dsn(db string) string {
	return fmt.Sprintf("postgres://bench@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// newDatabase creates a fresh database and returns its DSN.
func (p *durablePG) newDatabase(b testing.TB) string {
	b.Helper()
	p.n++
	name := fmt.Sprintf("bench_%d", p.n)
	conn, err := pgx.Connect(context.Background(), p.dsn("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	return p.dsn(name)
}

func (p *durablePG) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	os.RemoveAll(p.dir)
}

func stopDurable() {
	if durable != nil {
		durable.stop()
	}
}
