package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// kubeProc is one child process (etcd or kube-apiserver) in its own process group, with
// stdout and stderr appended to a log file so restarts keep one continuous log.
type kubeProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	waitErr error         // valid after exited is closed
}

func startKubeProc(name, logPath string, bin string, args ...string) (*kubeProc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s starting at %s: %s %q\n", name, time.Now().Format(time.RFC3339Nano), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so Stop reaches any children; Pdeathsig kills the server if the
	// test binary dies without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &kubeProc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// exitErr reports whether the process has already exited, and how.
func (p *kubeProc) exitErr() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, Tail(p.logPath, 30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace. It returns once the
// process has exited.
func (p *kubeProc) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	start := time.Now()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		p.note("=== %s exited %s after SIGTERM", p.name, time.Since(start).Round(time.Millisecond))
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		p.note("=== %s did not exit within %s of SIGTERM; killed", p.name, grace)
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
}

// note appends a line to the log, between runs, for whoever reads it after a failure.
func (p *kubeProc) note(format string, args ...any) {
	f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}
