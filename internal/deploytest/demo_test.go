package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `make demo` runs hack/demo: it must show rows the watch wrote (not only the first
// LIST's snapshot), one object's history, and stop everything on Ctrl-C with exit 0.
// Ctrl-C is a SIGINT to the foreground process group; the demo runs here in a group of
// its own, as a terminal's job would.
func TestTheDemoShowsWatchedChangesAPodRolloutOnKWOKNodesAndCtrlCStopsEverythingWithExit0(t *testing.T) {
	dir := t.TempDir()
	bin, demo := filepath.Join(dir, "kube-cdc"), filepath.Join(dir, "demo")
	for out, pkg := range map[string]string{bin: "./cmd/kube-cdc", demo: "./hack/demo"} {
		if err := testenv.GoBuild(out, pkg); err != nil {
			t.Fatal(err)
		}
	}
	// Every process the demo starts inherits this variable: none may have it after the exit.
	marker := "KUBE_CDC_DEMO_TEST=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var out lockedBuffer
	cmd := exec.Command(demo, "-kube-cdc", bin)
	cmd.Env = append(os.Environ(), marker)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range marked(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	deadline := time.After(5 * time.Minute)
	for !strings.Contains(out.String(), "Ctrl-C stops everything.") {
		select {
		case err := <-done:
			t.Fatalf("the demo exited before it was ready (%v):\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the demo was not ready within 5 minutes:\n%s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	text := out.String()
	// changes columns: id resource namespace name op resource_version snapshot inferred changed_by
	for _, row := range []string{
		`(?m)^\d+\s+configmaps\s+shop\s+cart-config\s+create\s+\d+\s+true\s+false\s`,   // the first LIST's snapshot
		`(?m)^\d+\s+configmaps\s+shop\s+promo-config\s+create\s+\d+\s+false\s+false\s`, // watched
		`(?m)^\d+\s+configmaps\s+shop\s+checkout-config\s+update\s+\d+\s+false\s+false\s+shop-deployer/Update`,
		`(?m)^\d+\s+widgets\s+shop\s+sprocket\s+update\s+\d+\s+false\s+false\s+painter/Update`,
		`(?m)^\d+\s+configmaps\s+shop\s+search-config\s+delete\s+\d+\s+false\s+false\s`,
		`(?m)^\d+\s+widgets\s+shop\s+gear\s+delete\s+\d+\s+false\s+false\s`,
		`(?m)^== kube-cdc history configmaps checkout-config -n shop ==$`,
		`(?m)^\+\s+timeout: 30s$`, // the history's diff of the second update
		// Who made them, from the apiserver's audit events (the receiver, migration 014).
		`(?m)^#\d+\s+\S+\s+update\s+rv \d+\s+by dev-b@example\.com \(kubectl/v1\.36\.5\)\s+manager shop-deployer/Update$`,
		`(?m)^#\d+\s+\S+\s+update\s+rv \d+\s+by dev-c@example\.com \(kubectl/v1\.36\.5\)\s+manager shop-deployer/Update$`,
		`(?m)^warehouse\s+configmaps\s+all\s+[1-9]\d*\s`,
		// A Deployment rolled out and scaled on KWOK's nodes: pods scheduled and Running,
		// and the pods' versions as the watch saw them move from Pending to Running.
		`(?m)^web-\S+\s+node-\d\s+Running\s+10\.\S+\s+\[web:2\]\s+ReplicaSet\s+web-`,
		`(?m)^\d+\s+web-\S+\s+create\s+\d+\s+Pending\s`,
		`(?m)^\d+\s+web-\S+\s+update\s+\d+\s+Running\s+node-\d\s+web:2$`,
		`(?m)^\d+\s+web-\S+\s+delete\s+\d+\s`,
		`(?m)^web\s+4\s+4\s+4\s+\[web:2\]$`,
		`(?m)^== kube-cdc history deployments.apps web -n shop ==$`,
	} {
		if !regexp.MustCompile(row).MatchString(text) {
			t.Errorf("the demo's output has no line matching %s", row)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after Ctrl-C the demo exited with %v, want 0:\n%s", err, tail(out.String(), 30))
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the demo did not stop within 2 minutes of Ctrl-C:\n%s", tail(out.String(), 30))
	}
	if left := marked(marker); len(left) > 0 {
		t.Errorf("processes the demo started still run after it exited: %v", describe(left))
	}
}

// marked lists the processes whose environment holds marker.
func marked(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or a zombie
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func describe(pids []int) string {
	var parts []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return strings.Join(parts, "; ")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
