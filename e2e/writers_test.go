package e2e

import (
	"context"
	"fmt"
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
