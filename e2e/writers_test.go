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
// sink without leader election both write everything. The PostgreSQL sink's writer lock
// makes them say so; these tests run the binary.

const writersWarning = "another process writes the same sink"

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

func TestTwoWritersOfOneSinkWarnNamingEachOtherAndTheSurvivorTakesOverAfterACrashAndARestart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "w")
	dsn := pg.NewDatabase(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	for i := range 5 {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addrA, addrB := opsFreeAddr(t), opsFreeAddr(t)
	cfgA := writeConfig(t, opsConfigYAML(dsn, ns, addrA, ""))
	cfgB := writeConfig(t, opsConfigYAML(dsn, ns, addrB, ""))

	// One daemon alone: it holds the lock, says nothing, and status names it.
	a := start(t, "run", "-c", cfgA)
	waitSynced(t, dsn)
	writersGauge(t, a, addrA, 0, 15*time.Second)
	code, out := runCLI(t, "status", "-c", cfgA)
	if code != 0 || !strings.Contains(out, "sink warehouse: written by "+writersApp(t, a)+" (") || strings.Contains(out, "WARNING") {
		t.Errorf("status with one daemon: exit %d, want it to name %s and warn of nothing:\n%s", code, writersApp(t, a), out)
	}

	// The second one warns at once, naming the first; the first warns at its next look.
	b := start(t, "run", "-c", cfgB)
	opsWaitLog(t, b, writersWarning, 30*time.Second)
	warned := writersLines(b.log(), writersWarning)
	if len(warned) != 1 || !strings.Contains(warned[0], "sink=warehouse") || !strings.Contains(warned[0], "cluster=e2e") ||
		!strings.Contains(warned[0], writersApp(t, a)+" (backend pid") || !strings.Contains(warned[0], "holds the writer lock") {
		t.Errorf("the second daemon's warnings, want one naming the sink, the cluster and %s as the holder:\n%s",
			writersApp(t, a), strings.Join(warned, "\n"))
	}
	writersGauge(t, b, addrB, 1, 15*time.Second)
	writersGauge(t, a, addrA, 1, 20*time.Second) // the holder looks every 10s
	if w := writersLines(a.log(), writersWarning); len(w) != 1 || !strings.Contains(w[0], writersApp(t, b)+" (backend pid") {
		t.Errorf("the first daemon's warnings, want one naming %s:\n%s", writersApp(t, b), strings.Join(w, "\n"))
	}
	code, out = runCLI(t, "status", "-c", cfgA)
	if code != 0 || !strings.Contains(out, "WARNING: sink warehouse: 2 kube-cdc processes write it") ||
		!strings.Contains(out, writersApp(t, a)) || !strings.Contains(out, writersApp(t, b)) {
		t.Errorf("status with two daemons: exit %d, want a warning naming both:\n%s", code, out)
	}

	// Both keep writing: a change lands, once.
	if _, err := cms.Create(ctx, configMap(ns, "while-two", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	eventually(t, 30*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = 'while-two'`, ns); n != 1 {
			return fmt.Errorf("%d changes rows of while-two, want 1", n)
		}
		return nil
	})

	// The holder crashes: its session, and the lock, die with it; the waiter takes over.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	took := writersGauge(t, b, addrB, 0, 10*time.Second)
	t.Logf("the second daemon was alone %v after the first one's SIGKILL", took.Round(time.Millisecond))
	opsWaitLog(t, b, "no other process writes the sink any more", 10*time.Second)

	// A PostgreSQL restart drops the lock with every session; the survivor takes it again.
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		code, out := runCLI(t, "status", "-c", cfgB)
		if code != 0 || !strings.Contains(out, "sink warehouse: written by "+writersApp(t, b)+" (") || strings.Contains(out, "WARNING") {
			return fmt.Errorf("status after the restart: exit %d, want %s alone:\n%s", code, writersApp(t, b), out)
		}
		return nil
	})
	if w := writersLines(b.log(), writersWarning); len(w) != 1 {
		t.Errorf("the survivor warned %d times, want once (before the crash):\n%s", len(w), strings.Join(w, "\n"))
	}
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
