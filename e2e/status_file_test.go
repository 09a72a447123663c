package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The daemon holds its file checkpoint store's lock for as long as it runs, and status and
// check are run exactly then: they must read it without that lock, and say what run holds.
func TestStatusAndCheckBesideARunningDaemonReadItsFileCheckpointStore(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "sfk")
	createConfigMaps(t, ns, 0, 3, nil)
	var newest int64
	for _, v := range listedConfigMaps(t, ns) {
		_, rv, _ := strings.Cut(v, "@")
		newest = max(newest, rvInt(rv))
	}
	k := testenv.NewKafka(t)
	state := filepath.Join(t.TempDir(), "state.db")
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes: {kubeconfig: %q}
resources: [{name: configmaps, namespaces: [%s]}]
sinks:
  - name: stream
    type: kafka
    kafka: {brokers: [%q], createTopics: true}
    checkpoint: {type: file, path: %q}
metrics: {address: %q}
`, kube.Kubeconfig, ns, k.Addr(), state, addr))
	d := start(t, "run", "-c", cfg)
	// Flushed to the file (the Kafka sink groups checkpoint writes for 100 ms) once the
	// gauge has moved: wait for the status that shows it rather than for a time.
	rv := waitMetricAbove(t, d, addr, "kube_cdc_checkpoint_resource_version", map[string]string{"sink": "stream", "resource": "configmaps"}, float64(newest-1), 60*time.Second)
	row := regexp.MustCompile(`stream\s+configmaps\s+namespace=` + regexp.QuoteMeta(ns) + `\s+` + strconv.FormatInt(int64(rv), 10) + `\s+-\s+3\b`)
	var out string
	eventually(t, 30*time.Second, func() error {
		code, o := runCLI(t, "status", "-c", cfg)
		if out = o; code != 0 {
			return fmt.Errorf("status beside the daemon: exit %d\n%s", code, o)
		}
		if !row.MatchString(o) {
			return fmt.Errorf("status beside the daemon: no row with checkpoint %v and 3 live keys:\n%s", rv, o)
		}
		return nil
	})
	if code, out := runCLI(t, "check", "-c", cfg); code != 0 ||
		!regexp.MustCompile(`sink stream\s+ok\s+kafka reachable; checkpoint file `+regexp.QuoteMeta(state)+` in use by a running kube-cdc`).MatchString(out) {
		t.Errorf("check beside the daemon: exit %d, want 0 and the sink ok with its file in use:\n%s", code, out)
	}
	select {
	case <-d.done:
		t.Fatalf("the daemon exited while status and check ran:\n%s", d.log())
	default:
	}

	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Without a daemon the file itself is read, to the same numbers.
	code, after := runCLI(t, "status", "-c", cfg)
	if code != 0 || !row.MatchString(after) {
		t.Errorf("status after the stop: exit %d, want the row status showed beside the daemon (%s):\n%s", code, out, after)
	}
	if code, out := runCLI(t, "check", "-c", cfg); code != 0 ||
		!regexp.MustCompile(`sink stream\s+ok\s+kafka reachable; checkpoint file `+regexp.QuoteMeta(state)+`\s*\n`).MatchString(out) {
		t.Errorf("check after the stop: exit %d, want the sink ok with its file:\n%s", code, out)
	}
}
