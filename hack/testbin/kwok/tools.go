//go:build tools

// Package kwok pins KWOK (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok), which simulates
// nodes and pod lifecycles against a real apiserver, for internal/testenv's cluster mode.
// It is a module of its own so that its Kubernetes libraries never move the versions
// kube-apiserver and the controllers are built with (../go.mod).
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
