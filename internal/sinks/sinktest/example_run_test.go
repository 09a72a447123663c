package sinktest_test

import (
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/sinks/sinktest"
)

// The harness Example_runTheSuite shows is run, so the example cannot rot.
func TestTheExampleHarnessPassesTheSuite(t *testing.T) {
	sinktest.Run(t, harness())
}
