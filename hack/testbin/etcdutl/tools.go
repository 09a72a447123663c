//go:build tools

// Package etcdutl pins etcd's offline tool, etcdutl, at the etcd version of the parent
// module (../go.mod), for tests that restore etcd the way Kubernetes' docs recommend
// (`etcdutl snapshot restore --bump-revision … --mark-compacted`). It is a module of its
// own: etcdutl's go.mod has replace directives, so `go install …@version` refuses it, and
// its requirements must not move the versions kube-apiserver is built with.
package etcdutl

import (
	_ "go.etcd.io/etcd/etcdutl/v3"
)
