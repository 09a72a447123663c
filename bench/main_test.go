package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// One apiserver+etcd, one PostgreSQL and one Kafka broker serve every benchmark; the
// kube-cdc binary and the informer baseline are built once.
var (
	kube      *testenv.Kube
	pg        *testenv.Postgres
	kfk       *testenv.Kafka
	binDir    string
	daemonBin string // kube-cdc
	informBin string // bench/internal/informerbaseline
	writer    kubernetes.Interface
)

const (
	syncNS     = "bench-sync" // syncObjects ConfigMaps of ~1 KB: initial sync, memory at 20k
	syncObjs   = 20000
	extraNS    = "bench-extra" // extraObjs small ConfigMaps: memory at 100k
	extraObjs  = 80000
	lagObjects = 200 // ConfigMaps the lag benchmarks update, in a namespace of their own
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// `make test` runs every package's tests; this one has only benchmarks, so it
		// starts nothing unless benchmarks were asked for (`make bench`).
		os.Exit(m.Run())
	}
	os.Exit(mainWithServers(m))
}

func mainWithServers(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if binDir, err = os.MkdirTemp("", "kube-cdc-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	daemonBin = filepath.Join(binDir, "kube-cdc")
	informBin = filepath.Join(binDir, "informerbaseline")
	for out, pkg := range map[string]string{daemonBin: "./cmd/kube-cdc", informBin: "./bench/internal/informerbaseline"} {
		if err := testenv.GoBuild(out, pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if kube, err = testenv.StartKube(ctx, testenv.KubeOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kube.Stop()
	if pg, err = testenv.StartPostgres(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pg.Stop()
	if kfk, err = testenv.StartKafka(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kfk.Stop()
	// The writers' client: no client-side rate limit, the apiserver is the bottleneck.
	wc := rest.CopyConfig(kube.Config)
	wc.QPS, wc.Burst = -1, 0
	if writer, err = kubernetes.NewForConfig(wc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopDurable()
	return m.Run()
}

// ---- fixtures ----

var (
	syncOnce, extraOnce sync.Once
	syncErr, extraErr   error
	syncCreate          time.Duration
)

// payload1K is ~1 KB of ConfigMap data (the object is ~1.3 KB as JSON with metadata).
func payload1K(i int) map[string]string {
	line := fmt.Sprintf("key-%06d=%s\n", i, strings.Repeat("x", 50))
	return map[string]string{"config.properties": strings.Repeat(line, 17)[:1000]}
}

// syncFixture creates syncObjs ~1 KB ConfigMaps in syncNS, once per run.
func syncFixture(b *testing.B) {
	b.Helper()
	syncOnce.Do(func() {
		start := time.Now()
		syncErr = createConfigMaps(context.Background(), syncNS, syncObjs, 16, payload1K)
		syncCreate = time.Since(start)
		if syncErr == nil {
			fmt.Printf("bench: fixture: created %d ConfigMaps (~1 KB) in %s in %v (%.0f writes/s)\n",
				syncObjs, syncNS, syncCreate.Round(time.Millisecond), float64(syncObjs)/syncCreate.Seconds())
		}
	})
	if syncErr != nil {
		b.Fatalf("fixture %s: %v", syncNS, syncErr)
	}
}

// extraFixture creates extraObjs small ConfigMaps in extraNS, once per run.
func extraFixture(b *testing.B) {
	b.Helper()
	extraOnce.Do(func() {
		start := time.Now()
		extraErr = createConfigMaps(context.Background(), extraNS, extraObjs, 16, func(i int) map[string]string {
			return map[string]string{"k": strconv.Itoa(i)}
		})
		if extraErr == nil {
			d := time.Since(start)
			fmt.Printf("bench: fixture: created %d small ConfigMaps in %s in %v (%.0f writes/s)\n",
				extraObjs, extraNS, d.Round(time.Millisecond), float64(extraObjs)/d.Seconds())
		}
	})
	if extraErr != nil {
		b.Fatalf("fixture %s: %v", extraNS, extraErr)
	}
}

func createNamespace(ctx context.Context, ns string) error {
	_, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createConfigMaps creates cm-000000… in ns with `writers` concurrent writers.
func createConfigMaps(ctx context.Context, ns string, n, writers int, data func(int) map[string]string) error {
	if err := createNamespace(ctx, ns); err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: ns,
						Labels: map[string]string{"app": "bench", "shard": strconv.Itoa(i % 10)}},
					Data: data(i),
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if _, err = writer.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					errs <- fmt.Errorf("create %s/%s: %w", ns, cm.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ---- the kube-cdc process ----

// daemon is one `kube-cdc run` process.
type daemon struct {
	cmd     *exec.Cmd
	logPath string
	start   time.Time
	done    chan struct{}
}

func startDaemon(b *testing.B, config string) *daemon {
	b.Helper()
	return startDaemonBin(b, daemonBin, config)
}

// migrateFirst runs `kube-cdc migrate` with config, so that a timed sync starts with its
// schema in place, as baseline A's COPY does with its tables: creating the schema is a
// once-per-database step (ten migrations, a few hundred milliseconds 1 ms away), not part
// of a sync.
func migrateFirst(b *testing.B, config string) {
	b.Helper()
	cfg := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(daemonBin, "migrate", "-c", cfg).CombinedOutput(); err != nil {
		b.Fatalf("kube-cdc migrate: %v\n%s", err, out)
	}
}

// startDaemonBin is startDaemon with another kube-cdc binary (BaselineBinEnv).
func startDaemonBin(b *testing.B, bin, config string) *daemon {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		b.Fatal(err)
	}
	var env []string
	if e := os.Getenv(DaemonEnv); e != "" {
		env = append(os.Environ(), strings.Fields(e)...)
	}
	return startProcess(b, filepath.Join(dir, "kube-cdc.log"), env, bin, "run", "-c", cfg)
}

// startProcess starts bin with args (and env, nil: the benchmark's), its output into
// logPath; like a kube-cdc daemon, it is killed with the benchmark and at the cleanup.
func startProcess(b *testing.B, logPath string, env []string, bin string, args ...string) *daemon {
	b.Helper()
	d := &daemon{logPath: logPath, done: make(chan struct{})}
	logf, err := os.Create(d.logPath)
	if err != nil {
		b.Fatal(err)
	}
	d.cmd = exec.Command(bin, args...)
	// Killed with the benchmark (a ^C, a timeout): no daemon outlives it.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.start = time.Now()
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	b.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if b.Failed() {
			b.Logf("%s log:\n%s", filepath.Base(bin), testenv.Tail(d.logPath, 40))
		}
	})
	return d
}

// failIfExited fails b, with the end of the daemon's log, when the daemon has exited
// (nil: no daemon to watch).
func (d *daemon) failIfExited(b *testing.B) {
	b.Helper()
	if d == nil {
		return
	}
	select {
	case <-d.done:
		b.Fatalf("kube-cdc exited early\n%s", readTail(d.logPath))
	default:
	}
}

// stop sends SIGTERM, waits for the exit and returns the process's CPU seconds (user+sys).
func (d *daemon) stop(b *testing.B) float64 {
	b.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		b.Fatalf("kube-cdc did not exit within 60s of SIGTERM\n%s", testenv.Tail(d.logPath, 30))
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		b.Errorf("kube-cdc exited %d\n%s", code, testenv.Tail(d.logPath, 30))
	}
	return cpuSeconds(d.cmd.ProcessState)
}

func cpuSeconds(ps *os.ProcessState) float64 {
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// cpuNow reads a running process's CPU seconds (user+sys) from /proc/PID/stat.
func cpuNow(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the ")" that closes comm: state is field 3; utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func pgDaemonConfig(dsn, ns string) string { return pgDaemonConfigLevel(dsn, ns, "info") }

func pgDaemonConfigLevel(dsn, ns, level string) string {
	return fmt.Sprintf(`cluster: bench
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: ""
log:
  level: %s
`, kube.Kubeconfig, ns, dsn, level)
}

// ---- PostgreSQL helpers ----

func connect(b *testing.B, dsn string) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitSynced polls until the configmaps checkpoint row exists and objects holds want live
// rows of ns; it returns when that was first seen.
func waitSynced(b *testing.B, conn *pgx.Conn, ns string, want int, timeout time.Duration, d *daemon) time.Time {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var ck, n int64
		err := conn.QueryRow(ctx, `SELECT
			coalesce((SELECT max(resource_version) FROM kube_cdc.checkpoints WHERE resource = 'configmaps'), 0),
			(SELECT count(*) FROM kube_cdc.objects WHERE resource = 'configmaps' AND ($1 = '' OR namespace = $1) AND deleted_at IS NULL)`, ns).Scan(&ck, &n)
		if err == nil && ck > 0 && n >= int64(want) {
			return time.Now()
		}
		d.failIfExited(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("not synced within %v", timeout)
	return time.Time{}
}

// ---- statistics ----

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type lagStats struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func summarize(lags []time.Duration) lagStats {
	slices.Sort(lags)
	return lagStats{n: len(lags), p50: percentile(lags, .5), p90: percentile(lags, .9), p99: percentile(lags, .99), max: percentile(lags, 1)}
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

func readTail(path string) string { return testenv.Tail(path, 30) }

// DebugEnv, when set, runs the lag benchmarks' daemons at log level debug (per-batch step
// timings) and keeps their logs in the temporary directory, named in the output.
const DebugEnv = "KUBE_CDC_BENCH_DEBUG"

// BaselineBinEnv names another kube-cdc binary (an earlier commit's `go build
// ./cmd/kube-cdc`): BenchmarkLagAdaptiveBatching then follows the same writes with it too,
// at its defaults, and reports this tree's CPU and latency against it.
const BaselineBinEnv = "KUBE_CDC_BENCH_BASELINE_BIN"

// DaemonEnv holds NAME=VALUE pairs (space-separated) added to every benchmarked kube-cdc
// process's environment, e.g. "GOMAXPROCS=1 GOGC=200", to measure runtime settings.
const DaemonEnv = "KUBE_CDC_BENCH_DAEMON_ENV"

func daemonLogLevel() string {
	if os.Getenv(DebugEnv) != "" {
		return "debug"
	}
	return "info"
}

func keepLog(b *testing.B, d *daemon, name string) {
	if os.Getenv(DebugEnv) == "" {
		return
	}
	b.Cleanup(func() {
		dst := filepath.Join(os.TempDir(), "kube-cdc-bench-"+name+".log")
		if data, err := os.ReadFile(d.logPath); err == nil && os.WriteFile(dst, data, 0o644) == nil {
			fmt.Printf("bench: kube-cdc log kept in %s\n", dst)
		}
	})
}
