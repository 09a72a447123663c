package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It is chosen at
// random below the kernel's ephemeral range (net.ipv4.ip_local_port_range), not by the
// kernel: a port from that range, free when returned, can become the source port of any
// outgoing connection (a busy test machine makes thousands) before the server it was
// chosen for binds it, which then fails with "address already in use". Below the range
// only another caller of FreePort can take it. Falls back to the kernel's choice when the
// range starts too low to leave room.
func FreePort() (int, error) {
	const lowest = 10000
	if first := ephemeralStart(); first-lowest >= 1000 {
		for range 200 {
			p := lowest + rand.IntN(first-lowest)
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue // in use
			}
			l.Close()
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range (32768 when it cannot
// be read: Linux's default).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first <= 0 {
		return 32768
	}
	return first
}

// RepoRoot is the kube-cdc checkout this package was compiled from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// TestbinDir returns the directory holding the kube-apiserver and etcd binaries: the
// KUBE_CDC_TESTBIN environment variable, else the cache directory hack/testbin/build.sh
// builds into. It fails with instructions when the binaries are not there.
func TestbinDir() (string, error) {
	dir := os.Getenv("KUBE_CDC_TESTBIN")
	if dir == "" {
		out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "testbin", "build.sh"), "--print-dir").Output()
		if err != nil {
			return "", fmt.Errorf("locate the test binaries with hack/testbin/build.sh --print-dir: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make testbin` (builds kube-apiserver and etcd from the Go module proxy, about 15 minutes the first time) or set KUBE_CDC_TESTBIN to a directory holding both", b, dir)
		}
	}
	return dir, nil
}

// Tail returns the last n lines of the file at path, for failure reports.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s ---\n%s", len(lines), path, bytes.Join(lines, []byte("\n")))
}

// GoBuild builds the package pkg (a path relative to the repository root, such as
// "./cmd/kube-cdc") into the file out, for tests that run kube-cdc's own binaries.
func GoBuild(out, pkg string) error {
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Dir = RepoRoot()
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
