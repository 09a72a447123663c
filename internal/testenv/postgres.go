package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSNEnv names the environment variable that points the tests at an existing
// PostgreSQL server (a superuser's DSN) instead of starting a private one.
const PostgresDSNEnv = "KUBE_CDC_TEST_POSTGRES_DSN"

// postgresSuperuser is the role initdb creates; tests connect as it over TCP with a
// password, so a wrong password is rejected as it would be in production.
const postgresSuperuser = "kubecdc"

// Postgres is a PostgreSQL server for tests: a private one under a temporary directory
// (listening on 127.0.0.1 and a unix socket there), or the server named by
// KUBE_CDC_TEST_POSTGRES_DSN.
type Postgres struct {
	adminDSN string // superuser, database "postgres"
	external bool

	// Private servers only.
	bin      string // directory holding initdb and postgres
	dir      string // temporary directory: data/, socket, log
	port     int
	cred     *syscall.Credential // non-nil when running as root: run the server as "postgres"
	password string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartPostgres starts a private PostgreSQL server, or connects to the server named by
// KUBE_CDC_TEST_POSTGRES_DSN when that is set. Call Stop when done (TestMain's cleanup).
func StartPostgres(ctx context.Context) (*Postgres, error) {
	if dsn := os.Getenv(PostgresDSNEnv); dsn != "" {
		p := &Postgres{adminDSN: dsn, external: true}
		if err := p.waitReady(ctx, 10*time.Second); err != nil {
			return nil, fmt.Errorf("%s: %w", PostgresDSNEnv, err)
		}
		return p, nil
	}
	bin, err := postgresBinDir("/usr/lib/postgresql/*/bin")
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin}
	if err := p.init(); err != nil {
		p.removeDir()
		return nil, err
	}
	if err := p.start(ctx); err != nil {
		tail := Tail(p.LogPath(), 30)
		p.Stop()
		return nil, fmt.Errorf("%w\n%s", err, tail)
	}
	return p, nil
}

// NewPostgres starts a server for one test and stops it when the test ends, printing the
// tail of the server log if the test failed.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPostgres(ctx)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && !p.external {
			t.Log(Tail(p.LogPath(), 50))
		}
		p.Stop()
	})
	return p
}

// AdminDSN is a superuser's DSN for the "postgres" database.
func (p *Postgres) AdminDSN() string { return p.adminDSN }

// LogPath is the server's log file ("" for an external server).
func (p *Postgres) LogPath() string {
	if p.external {
		return ""
	}
	return filepath.Join(p.dir, "postgres.log")
}

// NewDatabase creates a fresh database for t and returns a superuser's DSN for it. When t
// ends, its connections are ended; on a private server the database stays until Stop
// removes the server, an external server's is dropped.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	return p.newDatabase(t, "")
}

// newDatabase is NewDatabase copying template ("": the server's default, template1).
func (p *Postgres) newDatabase(t testing.TB, template string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if err := p.admin(ctx, create); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() && !p.external {
			t.Log(Tail(p.LogPath(), 30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !p.external {
			// A private server's databases go with its directory (Stop): ending the test's
			// connections is enough. DROP DATABASE forces a checkpoint and waits for every
			// backend of the server to absorb a barrier: with tests in parallel one took
			// over 30 s.
			if err := p.TerminateBackends(ctx, name); err != nil {
				t.Errorf("end the connections to database %s: %v", name, err)
			}
			return
		}
		if err := p.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(p.adminDSN, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Template is a database prepared once (migrated, typically) that its NewDatabase copies
// for each test: CREATE DATABASE … TEMPLATE copies the prepared files, a fraction of what
// preparing each test's database again costs (a migration of kube-cdc's schema is most
// of a short sink test's time). A test that is about preparing (migrating a fresh
// database) uses Postgres.NewDatabase instead.
type Template struct {
	p       *Postgres
	prepare func(ctx context.Context, dsn string) error

	once sync.Once
	name string // set once prepared
	err  error
}

// NewTemplate returns a template whose database is created and handed to prepare on
// first use (so a package's tests that never use it pay nothing). prepare must close
// every connection it opens; the template takes no connections afterwards. Call Close
// before the server stops (TestMain) so an external server keeps no template behind.
func (p *Postgres) NewTemplate(prepare func(ctx context.Context, dsn string) error) *Template {
	return &Template{p: p, prepare: prepare}
}

// NewDatabase creates a copy of the prepared template for t and returns a superuser's
// DSN for it; as with Postgres.NewDatabase, its connections end with t. If preparing failed,
// every caller fails with that error.
func (tm *Template) NewDatabase(t testing.TB) string {
	t.Helper()
	tm.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tm.name, tm.err = tm.create(ctx)
	})
	if tm.err != nil {
		t.Fatalf("prepare the template database: %v", tm.err)
	}
	return tm.p.newDatabase(t, tm.name)
}

func (tm *Template) create(ctx context.Context) (string, error) {
	name := "template_" + randomHex(6)
	quoted := pgx.Identifier{name}.Sanitize()
	if err := tm.p.admin(ctx, "CREATE DATABASE "+quoted); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := withDatabase(tm.p.adminDSN, name)
	if err != nil {
		return "", err
	}
	if err := tm.prepare(ctx, dsn); err != nil {
		_ = tm.p.admin(ctx, "DROP DATABASE "+quoted+" WITH (FORCE)")
		return "", err
	}
	// A copy fails while anyone is connected to its template: refuse new connections,
	// then end any prepare left open.
	if err := tm.p.admin(ctx, "ALTER DATABASE "+quoted+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("close database %s to connections: %w", name, err)
	}
	if err := tm.p.TerminateBackends(ctx, name); err != nil {
		return "", err
	}
	return name, nil
}

// Close drops the template database if it was created.
func (tm *Template) Close() {
	tm.once.Do(func() { tm.err = errors.New("the template is closed") })
	if tm.name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = tm.p.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{tm.name}.Sanitize()+" WITH (FORCE)")
}

// TerminateBackends ends every connection to database db at once (as an administrator
// would, or a failover) and waits until they are gone.
func (p *Postgres) TerminateBackends(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, p.adminDSN)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Signal all first, then wait: terminating one by one would let a session blocked by
	// another run on (and commit) between the two. The sessions waiting for a lock are
	// signalled before the others: signalled in one statement, the lock's holder could end
	// before its waiter was signalled (the statement's backend preempted between the two
	// kills, under load), and the waiter ran on and committed (seen with two make tests at
	// once: TestASingleStatementWriteCutOff…/its_backend_is_terminated, "Write = <nil>").
	const others = `FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`
	for _, which := range []string{` AND wait_event_type = 'Lock'`, ``} {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) `+others+which, db); err != nil {
			return fmt.Errorf("terminate backends of %s: %w", db, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) `+others, db).Scan(&left); err != nil {
			return fmt.Errorf("wait for the backends of %s to end: %w", db, err)
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d backends of %s still running: %w", left, db, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Restart stops the server (fast shutdown: connections are closed) and starts it again
// on the same port with the same data.
func (p *Postgres) Restart(ctx context.Context) error { return p.RestartAfter(ctx, nil) }

// RestartAfter is Restart that calls whileDown (when not nil) while the server is down,
// and starts it again once whileDown returns, whatever it returned; its error is returned.
func (p *Postgres) RestartAfter(ctx context.Context, whileDown func(context.Context) error) error {
	if p.external {
		return errors.New("cannot restart the external PostgreSQL server named by " + PostgresDSNEnv)
	}
	if err := p.shutdown(); err != nil {
		return err
	}
	var downErr error
	if whileDown != nil {
		downErr = whileDown(ctx)
	}
	if err := p.start(ctx); err != nil {
		return fmt.Errorf("%w\n%s", err, Tail(p.LogPath(), 30))
	}
	return downErr
}

// Stop shuts a private server down and removes its directory. It does nothing to an
// external server.
func (p *Postgres) Stop() {
	if p.external {
		return
	}
	_ = p.shutdown()
	p.removeDir()
}

// postgresBinDir finds initdb and postgres in the directories matching pattern (the
// newest major version first), else on $PATH.
func postgresBinDir(pattern string) (string, error) {
	const hint = "install PostgreSQL server binaries (Debian: apt-get install postgresql)"
	dirs, _ := filepath.Glob(pattern)
	// Prefer the newest major version.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	if pg, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(pg))
	}
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres not found in %s or $PATH: %s, or set %s to a superuser's DSN", pattern, hint, PostgresDSNEnv)
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// init creates the temporary directory and the cluster in it.
func (p *Postgres) init() error {
	dir, err := os.MkdirTemp("", "kube-cdc-postgres-")
	if err != nil {
		return err
	}
	p.dir = dir
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, so PostgreSQL must run as the postgres user, but: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			return err
		}
	}
	p.password = randomHex(12)
	pwfile := filepath.Join(dir, "pwfile")
	if err := p.writeOwned(pwfile, p.password+"\n"); err != nil {
		return err
	}
	if err := p.writeOwned(p.LogPath(), ""); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(p.bin, "initdb"),
		"-D", filepath.Join(dir, "data"),
		"-U", postgresSuperuser, "--pwfile", pwfile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	out, err := cmd.CombinedOutput()
	_ = os.Remove(pwfile)
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if p.port, err = FreePort(); err != nil {
		return err
	}
	p.adminDSN = fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable",
		postgresSuperuser, p.password, p.port)
	return nil
}

func (p *Postgres) writeOwned(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if p.cred != nil {
		return os.Chown(path, int(p.cred.Uid), int(p.cred.Gid))
	}
	return nil
}

// start runs the postmaster and waits until it accepts connections.
func (p *Postgres) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.LogPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(filepath.Join(p.bin, "postgres"),
		"-D", filepath.Join(p.dir, "data"),
		"-p", strconv.Itoa(p.port),
		"-h", "127.0.0.1",
		"-k", p.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning",
		"-c", "log_connections=off",
		"-c", "log_checkpoints=off",
		// pg_xact_commit_timestamp(xmin) tells when a row became visible, to the
		// microsecond: the lag benchmarks measure to it rather than to their polls.
		"-c", "track_commit_timestamp=on",
	)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: p.cred,
		Setpgid:    true, // a ^C to the test run is for the test binary; we shut down in order
		// If the test binary dies, an immediate shutdown keeps no server behind.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	ready := make(chan error, 1)
	go func() { ready <- p.waitReady(ctx, time.Minute) }()
	select {
	case err := <-ready:
		return err
	case <-done:
		return fmt.Errorf("postgres exited during start-up: %v", cmd.ProcessState)
	}
}

// waitReady polls until a superuser connection succeeds.
func (p *Postgres) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, p.adminDSN)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.WithoutCancel(ctx))
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("PostgreSQL not ready within %v: %w", limit, redactErr(err, p.password))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// shutdown asks for a fast shutdown (roll back, close connections, checkpoint) and
// kills the server if that takes too long.
func (p *Postgres) shutdown() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return errors.New("postgres did not shut down within 30s; killed it")
}

func (p *Postgres) removeDir() {
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

func (p *Postgres) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// databaseName derives a unique, readable database name from a test name.
func databaseName(test string) string {
	base := strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(test), "_"), "_")
	if len(base) > 50 {
		base = base[:50]
	}
	return "t_" + base + "_" + randomHex(4)
}

// withDatabase returns dsn with its database replaced by db; dsn is a URL or a
// key=value connection string.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("parse the PostgreSQL DSN: invalid URL")
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	// Later keys win in key=value strings.
	return dsn + " dbname=" + db, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redactErr(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "***"))
}
