package testenv

// This package's tests share servers that are expensive to start (an etcd and a
// kube-apiserver take seconds): a test file starts its shared server lazily, on first use,
// and registers its Stop with afterAllTests; the one TestMain below runs every registered
// function, newest first, after all tests have run. Do not add another TestMain to this
// package: register with afterAllTests instead.

import (
	"os"
	"sync"
	"testing"
)

var (
	afterAllMu    sync.Mutex
	afterAllFuncs []func()
)

// afterAllTests registers f to run once all of the package's tests have finished.
func afterAllTests(f func()) {
	afterAllMu.Lock()
	defer afterAllMu.Unlock()
	afterAllFuncs = append(afterAllFuncs, f)
}

func TestMain(m *testing.M) {
	code := m.Run()
	afterAllMu.Lock()
	funcs := afterAllFuncs
	afterAllMu.Unlock()
	for i := len(funcs) - 1; i >= 0; i-- {
		funcs[i]()
	}
	os.Exit(code)
}
