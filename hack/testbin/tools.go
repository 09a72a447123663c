//go:build tools

// Package testbin pins the versions of kube-apiserver and etcd that kube-cdc's tests run
// against. `make testbin` builds them from this module into a cache outside the repository.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
