package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Two writers (issue 9, finding 7): two `kube-cdc run` on the same database, cluster and
// sink without leader election would both write everything. The PostgreSQL sink's writer
// lock makes the second one refuse, naming the first, or wait for it with --wait; these
// tests run the binary.

// writersApp is the application_name kube-cdc gives its PostgreSQL sessions, for a
// daemon of this machine.
func writersApp(t *testing.T, d *daemon) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return "kube-cdc/" + host + "/" + strconv.Itoa(d.cmd.Process.Pid)
}

// writersGauge waits until d's kube_cdc_concurrent_writers{sink="warehouse"} is want and
// returns how long that took.
func writersGauge(t *testing.T, d *daemon, addr string, want float64, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	eventually(t, within, func() error {
		select {
		case <-d.done:
			return fmt.Errorf("kube-cdc exited:\n%s", d.log())
		default:
		}
		_, body, err := opsGet("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		samples, err := opsParseMetrics(body)
		if err != nil {
			return err
		}
		got, ok := opsMetric(samples, "kube_cdc_concurrent_writers", map[string]string{"sink": "warehouse"})
		if !ok || got != want {
			return fmt.Errorf("kube_cdc_concurrent_writers = %v (present %v), want %v", got, ok, want)
		}
		return nil
	})
	return time.Since(began)
}

// writersLines are the lines of log that contain s.
func writersLines(log, s string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func TestASecondWriterOfOneSinkIsRefusedNamingTheFirstOrWithWaitTakesOverAfterACrashAndARestart(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "w")
	priv := privatePostgres(t) // restarted below, while other tests run
	dsn := priv.NewDatabase(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	for i := range 5 {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addrA, addrB := opsFreeAddr(t), opsFreeAddr(t)
	cfgA := writeConfig(t, opsConfigYAML(dsn, ns, addrA, ""))
	cfgB := writeConfig(t, opsConfigYAML(dsn, ns, addrB, ""))

	// One daemon alone: it holds the lock and status names it.
	a := start(t, "run", "-c", cfgA)
	waitSynced(t, dsn)
	writersGauge(t, a, addrA, 0, 15*time.Second)
	code, out := runCLI(t, "status", "-c", cfgA)
	if code != 0 || !strings.Contains(out, "sink warehouse: written by "+writersApp(t, a)+" (") || strings.Contains(out, "waiting to take over") {
		t.Errorf("status with one daemon: exit %d, want it to name %s alone:\n%s", code, writersApp(t, a), out)
	}

	// A second one refuses to start, with one line naming the first, and writes nothing.
	conn := connect(t, dsn)
	before := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`)
	refused := start(t, "run", "-c", cfgB)
	code, stderr := refused.wait(60 * time.Second)
	last := strings.TrimSpace(stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 1 || !strings.HasPrefix(last, "kube-cdc: sink warehouse (cluster e2e, schema kube_cdc): another kube-cdc process writes this sink: "+writersApp(t, a)+" (backend pid") ||
		!strings.Contains(last, "holds the writer lock") || !strings.Contains(last, "--wait") {
		t.Errorf("the second daemon: exit %d, want 1 and a last line naming %s as the holder and --wait:\n%s", code, writersApp(t, a), stderr)
	}
	if n := len(writersLines(stderr, "another kube-cdc process writes this sink")); n != 1 {
		t.Errorf("the refusal is said %d times, want once:\n%s", n, stderr)
	}
	if after := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`); after != before {
		t.Errorf("changes went from %d to %d rows while only the first daemon ran and nothing changed", before, after)
	}

	// With --wait, it names the holder once and waits, not ready, listed by status.
	b := start(t, "run", "-c", cfgB, "--wait")
	opsWaitLog(t, b, "waiting for its writer lock", 30*time.Second)
	if w := writersLines(b.log(), "waiting for its writer lock"); len(w) != 1 || !strings.Contains(w[0], "holder=\""+writersApp(t, a)+" (backend pid") {
		t.Errorf("the waiting daemon's lines, want one naming %s as the holder:\n%s", writersApp(t, a), strings.Join(w, "\n"))
	}
	writersGauge(t, b, addrB, 1, 15*time.Second)
	writersGauge(t, a, addrA, 1, 20*time.Second) // the holder looks every 10s
	if w := writersLines(a.log(), "waits to take this sink over"); len(w) != 1 || !strings.Contains(w[0], writersApp(t, b)+" (backend pid") {
		t.Errorf("the holder's lines, want one naming the waiter %s:\n%s", writersApp(t, b), strings.Join(w, "\n"))
	}
	if code, _, err := opsGet("http://" + addrB + "/readyz"); err != nil || code != 503 {
		t.Errorf("the waiting daemon's /readyz: %d, %v; want 503", code, err)
	}
	code, out = runCLI(t, "status", "-c", cfgA)
	if code != 0 || !strings.Contains(out, "sink warehouse: written by "+writersApp(t, a)+" (") ||
		!strings.Contains(out, "sink warehouse: waiting to take over (--wait): "+writersApp(t, b)+" (") {
		t.Errorf("status with a holder and a waiter: exit %d, want both named:\n%s", code, out)
	}

	// The holder crashes: its session, and the lock, die with it; the waiter takes over
	// and streams what changed meanwhile.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if _, err := cms.Create(ctx, configMap(ns, "after-crash", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := writersGauge(t, b, addrB, 0, 30*time.Second)
	t.Logf("the waiting daemon was alone %v after the first one's SIGKILL", took.Round(time.Millisecond))
	opsWaitLog(t, b, "took the writer lock", 10*time.Second)
	eventually(t, 30*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = 'after-crash'`, ns); n != 1 {
			return fmt.Errorf("%d changes rows of after-crash, want 1", n)
		}
		return nil
	})

	// A PostgreSQL restart drops the lock with every session; the survivor takes it again.
	if err := priv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		code, out := runCLI(t, "status", "-c", cfgB)
		if code != 0 || !strings.Contains(out, "sink warehouse: written by "+writersApp(t, b)+" (") || strings.Contains(out, "waiting") {
			return fmt.Errorf("status after the restart: exit %d, want %s alone:\n%s", code, writersApp(t, b), out)
		}
		return nil
	})
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// A cold standby on the same host (issue 24): `kube-cdc run --wait` with the very config
// of the running daemon, metrics address included, waits for the writer lock instead of
// dying on the address in use, and serves that address once it has taken over. Without
// --wait, the same second run is refused for the writer lock, naming the first, not for
// the address; a process whose only conflict is the address is told how to fix it.
func TestASecondRunWithTheSameConfigOnTheSameHostWaitsForTheWriterLockAndTakesOverTheMetricsAddress(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "w")
	dsn := pg.NewDatabase(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	for i := range 3 {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, opsConfigYAML(dsn, ns, addr, ""))
	a := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	writersGauge(t, a, addr, 0, 15*time.Second)

	// Without --wait: refused for the writer lock, which is what the user must act on.
	refused := start(t, "run", "-c", cfg)
	code, stderr := refused.wait(60 * time.Second)
	if code != 1 || !strings.Contains(stderr, "another kube-cdc process writes this sink: "+writersApp(t, a)) || strings.Contains(stderr, "address already in use") {
		t.Errorf("a second run of the same config: exit %d, want 1 naming %s as the writer, not the metrics address:\n%s", code, writersApp(t, a), stderr)
	}

	// With --wait: it waits, and the holder sees it waiting.
	b := start(t, "run", "-c", cfg, "--wait")
	opsWaitLog(t, b, "waiting for its writer lock", 30*time.Second)
	if w := writersLines(b.log(), "metrics address in use"); len(w) != 1 || !strings.Contains(w[0], addr) {
		t.Errorf("the standby's lines about the metrics address, want one naming %s:\n%s", addr, strings.Join(w, "\n"))
	}
	writersGauge(t, a, addr, 1, 20*time.Second) // the holder looks every 10s
	select {
	case <-b.done:
		t.Fatalf("the standby exited while the first daemon ran:\n%s", b.log())
	default:
	}

	// The first one stops: the standby takes the lock, then the address, and streams.
	if code := a.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("the first daemon's exit code %d after SIGTERM, want 0", code)
	}
	opsWaitLog(t, b, "took the writer lock", 30*time.Second)
	writersGauge(t, b, addr, 0, 30*time.Second) // only b can answer on addr now
	if _, err := cms.Create(ctx, configMap(ns, "after-takeover", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	eventually(t, 30*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = 'after-takeover'`, ns); n != 1 {
			return fmt.Errorf("%d changes rows of after-takeover, want 1", n)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		if code, body, err := opsGet("http://" + addr + "/readyz"); err != nil || code != 200 {
			return fmt.Errorf("/readyz on %s after the takeover: %d %q %v", addr, code, body, err)
		}
		return nil
	})

	// A process that may write (a stdout sink) but finds the address taken says how to
	// fix that.
	other := start(t, "run", "-c", writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: out
    type: stdout
metrics:
  address: %q
`, kube.Kubeconfig, ns, addr)))
	code, stderr = other.wait(60 * time.Second)
	last := strings.TrimSpace(stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 1 || !strings.Contains(last, "address already in use") || !strings.Contains(last, "give each process its own metrics.address") {
		t.Errorf("a run whose metrics address is taken: exit %d, want 1 and a last line naming the fix:\n%s", code, stderr)
	}
	if out := other.out.String(); out != "" {
		t.Errorf("the run that could not serve its metrics wrote changes before it stopped:\n%s", out)
	}

	// An address held by something other than a kube-cdc fails the start at once, --wait
	// or not, rather than the takeover later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := start(t, "run", "-c", writeConfig(t, opsConfigYAML(dsn, ns, ln.Addr().String(), "")), "--wait")
	code, stderr = held.wait(60 * time.Second)
	last = strings.TrimSpace(stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 1 || !strings.Contains(last, "address already in use") || !strings.Contains(last, "give each process its own metrics.address") ||
		strings.Contains(stderr, "waiting for its writer lock") {
		t.Errorf("a standby whose metrics address another program holds: exit %d, want 1 before waiting, with a last line naming the fix:\n%s", code, stderr)
	}

	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// The same for leader election (issue 24): a standby on its leader's host with the same
// metrics address campaigns instead of dying on the address, and serves it once it leads.
func TestALeaderElectionStandbyOnItsLeadersHostWithTheSameMetricsAddressServesItOnceItLeads(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "le")
	dsn := pg.NewDatabase(t)
	if _, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, "cm", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := opsFreeAddr(t)
	a := start(t, "run", "-c", opsLeaderConfig(t, dsn, ns, "replica-a", addr))
	opsWaitLog(t, a, "became the leader", 30*time.Second)
	waitSynced(t, dsn)
	b := start(t, "run", "-c", opsLeaderConfig(t, dsn, ns, "replica-b", addr))
	opsWaitLog(t, b, "campaigning for the lease", 30*time.Second)
	opsWaitLog(t, b, "metrics address in use by a kube-cdc", 10*time.Second)

	if code := a.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("the leader's exit code %d after SIGTERM, want 0", code)
	}
	opsWaitLog(t, b, "became the leader", 30*time.Second)
	// Only b can answer on addr now; it streams.
	eventually(t, 30*time.Second, func() error {
		code, body, err := opsGet("http://" + addr + "/metrics")
		if err != nil || code != 200 || !strings.Contains(body, "kube_cdc_streaming 1\n") {
			return fmt.Errorf("/metrics on %s after the takeover: %d, %v, streaming 1 %v", addr, code, err, strings.Contains(body, "kube_cdc_streaming 1\n"))
		}
		return nil
	})
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("the new leader's exit code %d after SIGTERM, want 0", code)
	}
}
