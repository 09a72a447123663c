package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// One control plane and one PostgreSQL server serve every test of the package; each test
// works in namespaces and a database of its own. The binary is built once.
//
// Tests that disturb what they run on do so on a control plane of their own
// (privatePlane: an apiserver restart, etcd's history expired) or a PostgreSQL server of
// their own (privatePostgres: a restart), so that they too run in parallel; the time
// travel tests restore or wipe a private etcd. Only the tests that count the shared
// apiserver's LIST requests or set the environment (t.Setenv) run serially, and Go runs
// them before any test that calls t.Parallel.
var (
	kube   *testenv.Kube
	pg     *testenv.Postgres
	binary string
)

// e2eParallel is how many parallel tests run at once unless -parallel says otherwise. They
// mostly wait (on leases, grace periods, brokers coming back), so more of them than the
// default GOMAXPROCS overlap well even on two cores.
const e2eParallel = "6"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", e2eParallel)
	}
	os.Exit(mainWithServers(m))
}

// e2eDigestKey keys the Secret digests of every daemon the tests start (a Secrets stream
// refuses to run without a key); children inherit it from this process's environment.
const e2eDigestKey = "e2e-digest-key-0123456789abcdef"

func mainWithServers(m *testing.M) int {
	os.Setenv("KUBE_CDC_TRANSFORMS__DIGESTKEY", e2eDigestKey)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kube-cdc-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "kube-cdc")
	// The build and the two servers start at once: each mostly waits (on the linker, on
	// etcd and the apiserver's post-start hooks, on initdb).
	var wg sync.WaitGroup
	var buildErr, kubeErr, pgErr error
	wg.Go(func() { buildErr = testenv.GoBuild(binary, "./cmd/kube-cdc") })
	// The apiserver's defaults (history kept ~5 min); tests that need the history gone
	// call ExpireHistory.
	wg.Go(func() { kube, kubeErr = testenv.StartKube(ctx, testenv.KubeOptions{}) })
	wg.Go(func() { pg, pgErr = testenv.StartPostgres(ctx) })
	wg.Wait()
	if kubeErr == nil {
		defer kube.Stop()
	}
	if pgErr == nil {
		defer pg.Stop()
	}
	if err := errors.Join(buildErr, kubeErr, pgErr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// daemon is one kube-cdc process.
type daemon struct {
	t       *testing.T
	cmd     *exec.Cmd
	cfgPath string
	out     *syncBuffer // stdout
	logPath string
	done    chan struct{}
	err     error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeConfig writes a config file for the test and returns its path. A test on a
// private control plane (privatePlane) gets its kubeconfig in place of the shared one.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	if k := kubeFor(t); k != kube {
		yaml = strings.ReplaceAll(yaml, kube.Kubeconfig, k.Kubeconfig)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs `kube-cdc <args>` in the background; it is killed at cleanup if still running.
func start(t *testing.T, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, out: &syncBuffer{}, done: make(chan struct{}), logPath: filepath.Join(t.TempDir(), "kube-cdc.log")}
	logf, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(binary, args...)
	d.cmd.Stdout = d.out
	d.cmd.Stderr = logf
	d.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeFor(t).Kubeconfig)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("kube-cdc %v:\n%s", args, testenv.Tail(d.logPath, 40))
		}
	})
	return d
}

// stop sends sig and waits for the exit; it returns the exit code.
func (d *daemon) stop(sig syscall.Signal) int {
	d.t.Helper()
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("kube-cdc did not exit within 60s of %v\n%s", sig, testenv.Tail(d.logPath, 30))
	}
	return d.cmd.ProcessState.ExitCode()
}

// wait waits for the process to exit by itself and returns its exit code and stderr.
func (d *daemon) wait(timeout time.Duration) (int, string) {
	d.t.Helper()
	select {
	case <-d.done:
	case <-time.After(timeout):
		d.t.Fatalf("kube-cdc did not exit within %v\n%s", timeout, testenv.Tail(d.logPath, 30))
	}
	b, _ := os.ReadFile(d.logPath)
	return d.cmd.ProcessState.ExitCode(), string(b)
}

func (d *daemon) log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not within %v: %v", timeout, err)
}

// namespace creates a namespace named after the test.
func namespace(t *testing.T, suffix string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	// A random tail keeps names unique when the package runs more than once (-count).
	name = strings.Trim(name, "-") + "-" + suffix + "-" + strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36)
	_, err := kubeFor(t).Clientset().CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func count(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// pgConfig writes a config streaming the given resources YAML into the DSN's database
// and returns its path.
func pgConfig(t *testing.T, dsn, resources string, extra string) string {
	t.Helper()
	return writeConfig(t, pgConfigYAML(dsn, resources, extra))
}

func pgConfigYAML(dsn, resources string, extra string) string {
	return fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
%s
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
log:
  level: debug
%s`, kube.Kubeconfig, resources, dsn, extra)
}

// privatePostgres starts a PostgreSQL server for the test alone, stopped at cleanup: the
// test may restart it while others run.
func privatePostgres(t *testing.T) *testenv.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := testenv.StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

var widgetCRDOnce struct {
	sync.Once
	err error
}

// ensureWidgetCRD creates the Widget CRD once per run of the package and waits until it is
// served; tests running in parallel share it. A second run (-count) finds it in place.
func ensureWidgetCRD(t *testing.T) {
	t.Helper()
	widgetCRDOnce.Do(func() {
		err := kube.CreateCRD(context.Background(), widgetCRD())
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		widgetCRDOnce.err = err
	})
	if widgetCRDOnce.err != nil {
		t.Fatal(widgetCRDOnce.err)
	}
}

// planes are the private control planes of the tests running on one, by test name.
var planes sync.Map

// privatePlane starts a control plane (etcd and kube-apiserver) for the test alone, so
// that it may restart the apiserver, expire etcd's history or count the LISTs it serves
// while other tests run. Declared as `kube := privatePlane(t)` it shadows the shared one
// in the test's body; the helpers that take t (start, writeConfig, namespace,
// listedConfigMaps, configMaps …) find it through kubeFor.
func privatePlane(t *testing.T) *testenv.Kube {
	t.Helper()
	k := testenv.NewKube(t, testenv.KubeOptions{})
	planes.Store(t.Name(), k)
	t.Cleanup(func() { planes.Delete(t.Name()) })
	return k
}

// kubeFor is the control plane test t (or the test whose subtest it is) runs on: its
// private one, or the shared one.
func kubeFor(t testing.TB) *testenv.Kube {
	root, _, _ := strings.Cut(t.Name(), "/")
	if k, ok := planes.Load(root); ok {
		return k.(*testenv.Kube)
	}
	return kube
}
