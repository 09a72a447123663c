package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// takeTerminal makes the demo the terminal's foreground process group, so that Ctrl-C
// sends SIGINT to the demo alone and not to `make` and `go run` above it. GNU make, on a
// SIGINT, waits for its recipe and then kills itself with the same signal, whatever the
// recipe did ("make: *** [Makefile:…: demo] Interrupt", exit 130); kept in a background
// group, it sees only the demo's exit status, 0 after a clean stop. The servers and
// kube-cdc run in process groups of their own, so the demo stops them in order.
//
// The returned function gives the terminal back to the group that had it. Without a
// terminal on stdin (a script, a test) nothing changes: a SIGINT to the demo's group
// reaches the demo the same way.
func takeTerminal() (restore func()) {
	fd := os.Stdin.Fd()
	prev, err := foreground(fd)
	if err != nil || prev != syscall.Getpgrp() {
		return func() {} // no terminal, or the demo runs in the background already
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		return func() {}
	}
	// A process outside the foreground group that sets it gets SIGTTOU (which stops it)
	// unless it ignores the signal.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	if err := setForeground(fd, syscall.Getpgrp()); err != nil {
		_ = syscall.Setpgid(0, prev) // back into make's group, where Ctrl-C finds us
		return func() {}
	}
	return func() {
		signal.Ignore(syscall.SIGTTOU)
		_ = setForeground(fd, prev)
		signal.Reset(syscall.SIGTTOU)
	}
}

func foreground(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func setForeground(fd uintptr, pgrp int) error {
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}
