//go:build rollingupgrade

package rolling

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// One control plane, one PostgreSQL server and the two binaries serve the package.
var (
	kube               *testenv.Kube
	pg                 *testenv.Postgres
	oldBin, newBin     string
	oldVersion         string // what hack/version says this tree is: the release leading
	newVersion         string // a newer version, with one more migration
	extraMigration     = "999_rolling_upgrade"
	oldKnowsUpTo       string // the newest migration of this tree
	errNoMigrationFile = "no migrations/*.sql in the tree"
)

// Lease timing of both replicas: short, so the test is quick; the same ratios as the
// defaults (15s/10s/2s).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// takeoverBound is how soon the standby must lead once the leader got SIGTERM: a
	// leader that stops releases the Lease, but a standby that missed the release waits
	// out the lease; two retry periods to notice, and slack for two busy cores.
	takeoverBound = leaseDuration + 4*time.Second
	// writesPerSecond is the load: four writers of their own ConfigMaps.
	writesPerSecond = 100
	writers         = 4
	keysPerWriter   = 10
)

func TestMain(m *testing.M) {
	os.Exit(mainWithServers(m))
}

func mainWithServers(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kube-cdc-rolling-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	began := time.Now()
	if err := buildBinaries(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "built kube-cdc %s and %s in %v\n", oldVersion, newVersion, time.Since(began).Round(time.Millisecond))
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
	return m.Run()
}

// buildBinaries builds the old and the new kube-cdc into dir. Both come from this tree
// with -trimpath, so the Go build cache serves every package but the migrations one and
// the link: the new binary differs only by testdata/999_rolling_upgrade.sql, overlaid into
// migrations/, and its version.
func buildBinaries(ctx context.Context, dir string) error {
	root := testenv.RepoRoot()
	out, err := goCmd(ctx, root, "run", "./hack/version")
	if err != nil {
		return fmt.Errorf("hack/version: %w", err)
	}
	oldVersion = strings.TrimSpace(out)
	newVersion, err = nextMinor(oldVersion)
	if err != nil {
		return err
	}
	sqls, _ := filepath.Glob(filepath.Join(root, "migrations", "*.sql"))
	if len(sqls) == 0 {
		return fmt.Errorf("%s", errNoMigrationFile)
	}
	slices.Sort(sqls)
	oldKnowsUpTo = strings.TrimSuffix(filepath.Base(sqls[len(sqls)-1]), ".sql")
	if oldKnowsUpTo >= extraMigration {
		return fmt.Errorf("the tree's newest migration %s sorts after the test's %s: rename testdata/%s.sql", oldKnowsUpTo, extraMigration, extraMigration)
	}
	overlay := map[string]map[string]string{"Replace": {
		filepath.Join(root, "migrations", extraMigration+".sql"): filepath.Join(root, "internal", "upgradetest", "rolling", "testdata", extraMigration+".sql"),
	}}
	ob, _ := json.Marshal(overlay)
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, ob, 0o600); err != nil {
		return err
	}
	const versionVar = "github.com/kube-cdc/kube-cdc/internal/version.Version"
	oldBin, newBin = filepath.Join(dir, "kube-cdc-old"), filepath.Join(dir, "kube-cdc-new")
	if _, err := goCmd(ctx, root, "build", "-trimpath", "-ldflags", "-X "+versionVar+"="+oldVersion, "-o", oldBin, "./cmd/kube-cdc"); err != nil {
		return err
	}
	_, err = goCmd(ctx, root, "build", "-trimpath", "-overlay", overlayPath, "-ldflags", "-X "+versionVar+"="+newVersion, "-o", newBin, "./cmd/kube-cdc")
	return err
}

func goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// nextMinor is the next minor release after v ("0.1.0", "0.1.1-0.2026…-abc" → "0.2.0"),
// marked as this test's build.
func nextMinor(v string) (string, error) {
	m := regexp.MustCompile(`^(\d+)\.(\d+)\.`).FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("hack/version said %q, not a semantic version", v)
	}
	minor, _ := strconv.Atoi(m[2])
	return fmt.Sprintf("%s.%d.0-rolling-upgrade-test", m[1], minor+1), nil
}

// replica is one kube-cdc process of the pair.
type replica struct {
	t        *testing.T
	name     string // "old" or "new", and the how-many-th start
	cmd      *exec.Cmd
	logPath  string
	metrics  string // address of /metrics
	done     chan struct{}
	started  time.Time
	exitCode int
}

// config is the config of a replica: the ConfigMaps of ns into the database dsn, under
// the Lease of ns, debug logs (the probes before a watch are debug lines).
func config(t *testing.T, dsn, ns, identity, metrics string) string {
	t.Helper()
	yaml := fmt.Sprintf(`cluster: rolling
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
  address: %q
log:
  level: debug
leaderElection:
  enabled: true
  namespace: %s
  name: kube-cdc
  identity: %s
  leaseDuration: %s
  renewDeadline: %s
  retryPeriod: %s
`, kube.Kubeconfig, ns, dsn, metrics, ns, identity, leaseDuration, renewDeadline, retryPeriod)
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// startReplica runs `bin run -c cfg`; it is killed at cleanup if still running.
func startReplica(t *testing.T, name, bin, cfg, metrics string) *replica {
	t.Helper()
	r := &replica{t: t, name: name, metrics: metrics, done: make(chan struct{}), logPath: filepath.Join(t.TempDir(), name+".log")}
	logf, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "run", "-c", cfg)
	r.cmd.Stderr = logf
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+kube.Kubeconfig)
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		r.exitCode = r.cmd.ProcessState.ExitCode()
		logf.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", r.name, testenv.Tail(r.logPath, 40))
		}
	})
	return r
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

func (r *replica) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// waitLog waits until the replica's log holds s and returns when it was seen.
func (r *replica) waitLog(s string, timeout time.Duration) time.Time {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(r.log(), s) {
			return time.Now()
		}
		if !r.running() {
			if strings.Contains(r.log(), s) {
				return time.Now()
			}
			r.t.Fatalf("%s exited (%d) before logging %q:\n%s", r.name, r.exitCode, s, testenv.Tail(r.logPath, 30))
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s did not log %q within %v:\n%s", r.name, s, timeout, testenv.Tail(r.logPath, 30))
		}
		time.Sleep(20 * time.Millisecond) // polling the log file, not waiting for time to pass
	}
}

// stop sends SIGTERM and waits for the exit; it returns the exit code.
func (r *replica) stop() int {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	return r.wait(60 * time.Second)
}

// wait waits for the process to exit by itself and returns its exit code.
func (r *replica) wait(timeout time.Duration) int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		r.t.Fatalf("%s did not exit within %v:\n%s", r.name, timeout, testenv.Tail(r.logPath, 30))
	}
	return r.exitCode
}

// write is a write the apiserver acknowledged.
type write struct {
	name, op, uid string
	rv            int64 // 0 for a delete: the apiserver does not return its RV
}

func (w write) String() string {
	if w.op == "delete" {
		return fmt.Sprintf("%s delete uid %s", w.name, w.uid)
	}
	return fmt.Sprintf("%s %s@%d uid %s", w.name, w.op, w.rv, w.uid)
}

// load writes ConfigMaps of ns at writesPerSecond, from writers goroutines that each own
// keysPerWriter names (so each key's writes are sequential and their order is known):
// a create, updates, and every seventh write of a key a delete.
type load struct {
	mu     sync.Mutex
	writes []write
	err    error
	stopc  chan struct{}
	wg     sync.WaitGroup
}

func startLoad(ns string) *load {
	l := &load{stopc: make(chan struct{})}
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	every := time.Second * writers / writesPerSecond
	for w := range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			ctx := context.Background()
			tick := time.NewTicker(every)
			defer tick.Stop()
			live := map[string]string{} // name → uid
			for i := 0; ; i++ {
				select {
				case <-l.stopc:
					return
				case <-tick.C:
				}
				name := fmt.Sprintf("w%d-%d", w, i%keysPerWriter)
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}
				uid, exists := live[name]
				var err error
				switch {
				case !exists:
					var c *corev1.ConfigMap
					if c, err = cms.Create(ctx, cm, metav1.CreateOptions{}); err == nil {
						live[name] = string(c.UID)
						l.record(write{name, "create", string(c.UID), rv(c.ResourceVersion)})
					}
				case (i/keysPerWriter)%7 == 6:
					if err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(types.UID(uid))}}); err == nil {
						delete(live, name)
						l.record(write{name, "delete", uid, 0})
					}
				default:
					var c *corev1.ConfigMap
					if c, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
						l.record(write{name, "update", string(c.UID), rv(c.ResourceVersion)})
					}
				}
				if err != nil {
					l.fail(fmt.Errorf("%s: %w", name, err))
					return
				}
			}
		}()
	}
	return l
}

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (l *load) record(w write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

// waitWrites waits until the load has made n writes more than mark, failing on a writer's
// error.
func (l *load) waitWrites(t *testing.T, mark, n int) {
	t.Helper()
	eventually(t, time.Duration(n)*time.Second/writesPerSecond+30*time.Second, func() error {
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
		if got := l.count() - mark; got < n {
			return fmt.Errorf("%d writes since the mark, want %d", got, n)
		}
		return nil
	})
}

func (l *load) stop(t *testing.T) []write {
	t.Helper()
	close(l.stopc)
	l.wg.Wait()
	if l.err != nil {
		t.Fatalf("writer: %v", l.err)
	}
	return slices.Clone(l.writes)
}

// eventually polls cond until it returns nil or timeout has passed.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
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

func queryInt(t *testing.T, conn *pgx.Conn, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// lists is how many LIST requests of configmaps the apiserver has answered.
func lists(t *testing.T) float64 {
	t.Helper()
	n, err := kube.RequestCount(context.Background(), "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// probes counts the one-object LISTs a replica made before watching (debug lines of
// internal/source): they are no relist, and the apiserver counts them as LISTs.
func probes(log string) float64 {
	return float64(strings.Count(log, "asked the server for its resource version before watching") +
		strings.Count(log, "asked the server for the newest object the sink holds"))
}

// relists is the sum of a replica's kube_cdc_relists_total, from its /metrics.
func (r *replica) relists(t *testing.T) float64 {
	t.Helper()
	resp, err := httpGet("http://" + r.metrics + "/metrics")
	if err != nil {
		t.Fatalf("/metrics of %s: %v", r.name, err)
	}
	if !strings.Contains(resp, "kube_cdc_streaming 1\n") {
		t.Fatalf("/metrics of %s does not say it streams (kube_cdc_streaming 1)", r.name)
	}
	var sum float64
	for line := range strings.Lines(resp) {
		if rest, ok := strings.CutPrefix(line, "kube_cdc_relists_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("/metrics of %s: %q: %v", r.name, line, err)
			}
			sum += f
		}
	}
	return sum
}

// checkpoint is the stored checkpoint of the ConfigMaps of ns (the database's only
// resource).
func checkpoint(t *testing.T, conn *pgx.Conn, ns string) int64 {
	t.Helper()
	return queryInt(t, conn, `SELECT coalesce(max(resource_version), 0) FROM kube_cdc.checkpoints WHERE resource = 'configmaps'`)
}

func TestARollingUpgradeUnderLoadHandsOverWithinTheLeaseMigratesResumesWithoutAListAndTheOldVersionRefusesTheNewSchema(t *testing.T) {
	began := time.Now()
	ctx := context.Background()
	const ns = "rolling"
	if _, err := kube.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	conn := connect(t, dsn)
	oldAddr, newAddr := freeAddr(t), freeAddr(t)
	oldCfg, newCfg := config(t, dsn, ns, "old", oldAddr), config(t, dsn, ns, "new", newAddr)

	// The old version leads and has synced; the new one stands by.
	old := startReplica(t, "old "+oldVersion, oldBin, oldCfg, oldAddr)
	old.waitLog("became the leader", 60*time.Second)
	old.waitLog("msg=synced", 60*time.Second)
	next := startReplica(t, "new "+newVersion, newBin, newCfg, newAddr)
	next.waitLog("campaigning for the lease", 60*time.Second)

	// 100 writes/s; the old leader streams them.
	l := startLoad(ns)
	l.waitWrites(t, 0, 3*writesPerSecond)
	eventually(t, 30*time.Second, func() error {
		if n := queryInt(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND NOT snapshot`, ns); n < 2*writesPerSecond {
			return fmt.Errorf("%d watched changes written by the old leader", n)
		}
		return nil
	})
	for _, s := range []string{"became the leader", "applied migrations", "wrote batch", "relisted"} {
		if strings.Contains(next.log(), s) {
			t.Fatalf("the new standby logged %q while the old one led:\n%s", s, next.log())
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM kube_cdc.schema_migrations WHERE version = $1`, extraMigration); n != 0 {
		t.Fatalf("schema_migrations holds %s while the old version leads", extraMigration)
	}

	// The upgrade: SIGTERM to the old leader. The new one takes over and migrates, and
	// resumes from the old one's checkpoint without a LIST.
	listsBefore := lists(t)
	atStop := l.count()
	stopped := time.Now()
	if code := old.stop(); code != 0 {
		t.Errorf("the old leader exited %d after SIGTERM, want 0", code)
	}
	exited := time.Since(stopped)
	led := next.waitLog("became the leader", takeoverBound+10*time.Second).Sub(stopped)
	wrote := next.waitLog("wrote batch", 60*time.Second).Sub(stopped)
	atLead := l.count()
	t.Logf("takeover: the old leader exited %v after SIGTERM; the new one led after %v and wrote its first batch (migrated, resumed) after %v; %d writes were made between the SIGTERM and the lead",
		exited.Round(time.Millisecond), led.Round(time.Millisecond), wrote.Round(time.Millisecond), atLead-atStop)
	if led > takeoverBound {
		t.Errorf("the new replica led %v after the old leader's SIGTERM, want within the lease duration (%v) and a few seconds (%v)", led, leaseDuration, takeoverBound)
	}
	migrated := next.log()
	if i, j := strings.Index(migrated, "became the leader"), strings.Index(migrated, "applied migrations"); j < i || !strings.Contains(migrated, extraMigration) {
		t.Errorf("the new leader did not apply %s after it led (lead at %d, migration at %d)", extraMigration, i, j)
	}
	var appliedBy string
	if err := conn.QueryRow(ctx, `SELECT applied_by FROM kube_cdc.schema_migrations WHERE version = $1`, extraMigration).Scan(&appliedBy); err != nil || appliedBy != newVersion {
		t.Errorf("schema_migrations %s applied by %q (%v), want %q", extraMigration, appliedBy, err, newVersion)
	}
	l.waitWrites(t, atLead, 3*writesPerSecond)
	waitCheckpointPast(t, conn, ns, l, l.count())
	if n := next.relists(t); n != 0 {
		t.Errorf("the new leader's kube_cdc_relists_total is %v after the takeover, want 0 (it resumes from the checkpoint with a watch)", n)
	}
	if relisted(next.log()) {
		t.Errorf("the new leader relisted after the takeover:\n%s", next.log())
	}
	if after := lists(t); after-listsBefore != probes(next.log()) {
		t.Errorf("the apiserver counted %v LIST requests of configmaps during the takeover, want only the new leader's %v one-object probes before its watch", after-listsBefore, probes(next.log()))
	}

	// The old version started again stands by; when it leads (the new leader stopped, a
	// rollback), it refuses the migrated schema in one line naming both versions, and
	// writes nothing.
	oldAgain := startReplica(t, "old "+oldVersion+" restarted", oldBin, oldCfg, oldAddr)
	oldAgain.waitLog("campaigning for the lease", 60*time.Second)
	atRollback := l.count()
	if code := next.stop(); code != 0 {
		t.Errorf("the new leader exited %d after SIGTERM, want 0", code)
	}
	rowsAtRollback := queryInt(t, conn, `SELECT count(*) FROM kube_cdc.changes`)
	cpAtRollback := checkpoint(t, conn, ns)
	refusedAt := time.Now()
	// It exits, or writes (then it is stopped, and the checks below say what it did).
	eventually(t, takeoverBound+30*time.Second, func() error {
		if oldAgain.running() && !strings.Contains(oldAgain.log(), "wrote batch") {
			return fmt.Errorf("the old version neither exited nor wrote since the new leader stopped")
		}
		return nil
	})
	if oldAgain.running() {
		t.Errorf("the old version leads and writes to the new schema; stopping it (exit %d)", oldAgain.stop())
	}
	code := oldAgain.exitCode
	refusal := lastLine(oldAgain.log())
	t.Logf("the old version, leading again, exited %d after %v: %s", code, time.Since(refusedAt).Round(time.Millisecond), refusal)
	if code == 0 {
		t.Errorf("the old version exited 0 on the new schema, want a refusal")
	}
	if !strings.Contains(oldAgain.log(), "became the leader") {
		t.Errorf("the old version did not lead after the new leader stopped: its refusal was not tested")
	}
	for _, want := range []string{"will not write", extraMigration, "kube-cdc " + newVersion, "this kube-cdc " + oldVersion} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the old version's last line does not say %q: %s", want, refusal)
		}
	}
	if strings.Contains(oldAgain.log(), "wrote batch") {
		t.Errorf("the old version wrote a batch to the new schema:\n%s", oldAgain.log())
	}
	if n, cp := queryInt(t, conn, `SELECT count(*) FROM kube_cdc.changes`), checkpoint(t, conn, ns); n != rowsAtRollback || cp != cpAtRollback {
		t.Errorf("while the old version led, changes went from %d to %d rows and the checkpoint from %d to %d: it wrote", rowsAtRollback, n, cpAtRollback, cp)
	}

	// The new version again: it resumes from its checkpoint, past everything written while
	// nobody wrote, with no LIST and nothing left to migrate.
	listsBefore = lists(t)
	again := startReplica(t, "new "+newVersion+" restarted", newBin, newCfg, newAddr)
	again.waitLog("became the leader", takeoverBound+30*time.Second)
	atResume := l.count()
	l.waitWrites(t, atResume, 3*writesPerSecond)
	writes := l.stop(t)
	waitCheckpointPast(t, conn, ns, l, len(writes))
	t.Logf("%d writes: %d before the upgrade's SIGTERM, %d until the new one led, %d under it, %d from the rollback until the new one led again, %d after",
		len(writes), atStop, atLead-atStop, atRollback-atLead, atResume-atRollback, len(writes)-atResume)
	if n := again.relists(t); n != 0 {
		t.Errorf("the restarted new leader's kube_cdc_relists_total is %v, want 0", n)
	}
	if log := again.log(); relisted(log) || strings.Contains(log, "applied migrations") {
		t.Errorf("the restarted new leader relisted or migrated again:\n%s", log)
	}
	if after := lists(t); after-listsBefore != probes(again.log()) {
		t.Errorf("the apiserver counted %v LIST requests of configmaps after the rollback, want only the new leader's %v one-object probes", after-listsBefore, probes(again.log()))
	}
	checkChanges(t, conn, ns, writes)
	if code := again.stop(); code != 0 {
		t.Errorf("the new leader exited %d after SIGTERM, want 0", code)
	}
	t.Logf("the rolling upgrade test took %v", time.Since(began).Round(time.Millisecond))
}

// waitCheckpointPast waits until the ConfigMaps' checkpoint covers the first n writes.
func waitCheckpointPast(t *testing.T, conn *pgx.Conn, ns string, l *load, n int) {
	t.Helper()
	l.mu.Lock()
	var target int64
	for _, w := range l.writes[:n] {
		target = max(target, w.rv)
	}
	l.mu.Unlock()
	eventually(t, 60*time.Second, func() error {
		if cp := checkpoint(t, conn, ns); cp < target {
			return fmt.Errorf("checkpoint %d, want at least %d", cp, target)
		}
		return nil
	})
}

// relisted says whether a replica's log tells of a relist (internal/source and the
// pipeline's progress lines).
func relisted(log string) bool {
	return strings.Contains(log, "msg=relisted") || strings.Contains(log, "msg=relisting")
}

func ptr[T any](v T) *T { return &v }

var httpClient = &http.Client{Timeout: 5 * time.Second}

func httpGet(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// row is a changes row of the test's namespace.
type row struct {
	id       int64
	name     string
	uid      string
	rv       int64
	op       string
	snapshot bool
	inferred bool
}

// checkChanges checks the delivery contract across both versions and the rollback: every
// acknowledged write is exactly one changes row, nothing else was written but the initial
// sync's snapshot (nothing relisted, nothing inferred), no (key, rv, op) twice, and each
// key's rows in id order are its writes in the order the apiserver acknowledged them.
func checkChanges(t *testing.T, conn *pgx.Conn, ns string, writes []write) {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT id, name, uid, resource_version, op, snapshot, inferred
		FROM kube_cdc.changes WHERE namespace = $1 ORDER BY id`, ns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.name, &x.uid, &x.rv, &x.op, &x.snapshot, &x.inferred)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	type keyRVOp struct {
		name string
		rv   int64
		op   string
	}
	seen := map[keyRVOp]int64{}
	byKey := map[string][]row{}
	for _, r := range got {
		if first, ok := seen[keyRVOp{r.name, r.rv, r.op}]; ok {
			t.Errorf("(%s, %d, %s) twice: changes rows %d and %d", r.name, r.rv, r.op, first, r.id)
		}
		seen[keyRVOp{r.name, r.rv, r.op}] = r.id
		if r.inferred {
			t.Errorf("changes row %d (%s %s@%d) is an inferred delete: a delete was missed and guessed by a relist", r.id, r.name, r.op, r.rv)
		}
		if r.snapshot {
			t.Errorf("changes row %d (%s %s@%d) is a snapshot: the namespace was empty at the first sync, so something relisted", r.id, r.name, r.op, r.rv)
			continue
		}
		byKey[r.name] = append(byKey[r.name], r)
	}
	wantByKey := map[string][]write{}
	for _, w := range writes {
		wantByKey[w.name] = append(wantByKey[w.name], w)
	}
	lost, extra, disorder := 0, 0, 0
	for name, want := range wantByKey {
		have := byKey[name]
		for i, w := range want {
			if i >= len(have) {
				lost += len(want) - i
				t.Errorf("%s: %d acknowledged writes from %v on are not in changes", name, len(want)-i, w)
				break
			}
			h := have[i]
			if h.op != w.op || h.uid != w.uid || (w.op != "delete" && h.rv != w.rv) || (i > 0 && h.rv <= have[i-1].rv) {
				disorder++
				t.Errorf("%s: write %d is %v, changes row %d is %s@%d uid %s (per-key order by id is the order of the writes, RVs growing)", name, i, w, h.id, h.op, h.rv, h.uid)
				break
			}
		}
		if len(have) > len(want) {
			extra += len(have) - len(want)
			t.Errorf("%s: %d changes rows, %d acknowledged writes", name, len(have), len(want))
		}
	}
	for name := range byKey {
		if _, ok := wantByKey[name]; !ok {
			t.Errorf("%s: changes rows of a name nobody wrote", name)
		}
	}
	t.Logf("%d acknowledged writes, %d changes rows: %d lost, %d extra, %d keys out of order", len(writes), len(got), lost, extra, disorder)
}
