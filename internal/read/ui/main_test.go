package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/read/ui"
	"github.com/kube-cdc/kube-cdc/internal/status"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// One apiserver, one PostgreSQL database and one kube-cdc daemon (the real binary,
// streaming ConfigMaps, Secrets, Pods, Services and Deployments into the database) serve every test of the package;
// each test writes in namespaces of its own. The tests do not run in parallel: one of
// them hides or adds views in the shared schema for a while.
var (
	kube    *testenv.Kube
	dsn     string
	binary  string
	cfgPath string
	runUI   string        // the daemon's ui.address
	pool    *pgxpool.Pool // the UI store's read-only pool
	st      *store.Store
)

const (
	cluster   = "ui-test"
	schema    = "kube_cdc"
	digestKey = "ui-test-digest-key-0123456789abcdef"
)

func TestMain(m *testing.M) { os.Exit(mainWithServers(m)) }

func mainWithServers(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kube-cdc-ui-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "kube-cdc")
	if err := testenv.GoBuild(binary, "./cmd/kube-cdc"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = testenv.StartKube(ctx, testenv.KubeOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kube.Stop()
	pg, err := testenv.StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pg.Stop()
	dsn = pg.AdminDSN()
	port, err := testenv.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runUI = fmt.Sprintf("127.0.0.1:%d", port)
	cfgPath = filepath.Join(dir, "config.yaml")
	config := fmt.Sprintf(`cluster: %s
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
  - name: secrets
  - name: pods
  - name: services
  - name: deployments.apps
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
ui:
  address: %q
`, cluster, kube.Kubeconfig, dsn, runUI)
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logPath := filepath.Join(dir, "kube-cdc.log")
	logf, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	daemon := exec.Command(binary, "run", "-c", cfgPath)
	daemon.Stdout, daemon.Stderr = logf, logf
	daemon.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	if err := daemon.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	// Without ping: the daemon migrates the schema meanwhile (the loop below waits).
	if st, err = ui.Connect(ctx, store.Options{DSN: dsn, Schema: schema, Cluster: cluster, Sink: "warehouse"}, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	pool = st.Pool()
	// The daemon has migrated and synced once it has a checkpoint of every resource: a
	// test's objects written before a resource's first LIST ends would arrive as one
	// snapshot, not as the creates and updates the tests expect.
	resources := strings.Count(config[strings.Index(config, "\nresources:"):strings.Index(config, "\nsinks:")], "- name: ")
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.checkpoints WHERE cluster = $1`, cluster).Scan(&n)
		if err == nil && n >= resources {
			break
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "kube-cdc wrote no checkpoints:", err, testenv.Tail(logPath, 40))
			return 1
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
	defer closeBrowser()
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, testenv.Tail(logPath, 40))
	}
	return code
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newServer serves the UI over the shared schema, with a status page read as
// `kube-cdc ui` reads it: through the UI's read-only pool.
func newServer(t *testing.T, mod func(*ui.Options)) *httptest.Server {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{File: cfgPath, Environ: []string{"KUBE_CDC_TRANSFORMS__DIGESTKEY=" + digestKey}})
	if err != nil {
		t.Fatal(err)
	}
	o := ui.Options{Store: st, Cluster: cluster,
		Status: func(ctx context.Context) (*status.Report, error) {
			return status.Read(ctx, cfg, nil, func() ([]status.ScopedResource, error) { return nil, nil },
				status.Stores{Open: func(context.Context, *config.Config, config.Sink) (*store.Store, func(), error) {
					return st, func() {}, nil
				}})
		}}
	if mod != nil {
		mod(&o)
	}
	h, err := ui.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and returns the status code and the body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// namespace creates a namespace for the test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := kube.Clientset().CoreV1().Namespaces().Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// recorded waits until the sink holds the change of the key at rv.
func recorded(t *testing.T, resource, ns, name, rv string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM kube_cdc.changes
			WHERE cluster = $1 AND resource = $2 AND namespace = $3 AND name = $4 AND resource_version = $5::bigint`,
			cluster, resource, ns, name, rv).Scan(&n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s/%s at rv %s: not in the sink within 90s (%v)", resource, ns, name, rv, err)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval
	}
}

// exec runs SQL as the admin (the UI's own pool is read-only).
func execSQL(t *testing.T, sql string) {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(testCtx(t), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// eventually polls cond until it holds, failing the test after 90 s.
func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond(testCtx(t)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90s", what)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval
	}
}

// statusOf GETs u with the headers and returns the status code.
func statusOf(t *testing.T, u string, headers map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
