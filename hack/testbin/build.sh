#!/usr/bin/env bash
# Builds, from the versions pinned in this module, the binaries kube-cdc's tests run
# against: kube-apiserver and etcd for every test; etcdutl, etcd's offline tool for
# `etcdutl snapshot restore --bump-revision` (in the module etcdutl/ at etcd's version);
# kube-controller-manager, kube-scheduler and KWOK (in the module kwok/) for testenv's
# cluster mode. They go into a cache outside the
# repository. Does nothing when the binaries of the pinned versions are already there.
#
#   KUBE_CDC_TESTBIN   the directory to build into (default: $XDG_CACHE_HOME or ~/.cache,
#                      then kube-cdc/testbin/<versions>/)
#
# Prints the directory on stdout; with --print-dir, only prints it and builds nothing.
set -euo pipefail
cd "$(dirname "$0")"

# The sum database does not always know k8s.io/kubernetes tags; go.sum pins its hash anyway.
export GONOSUMDB=${GONOSUMDB:-k8s.io/kubernetes}

k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
dir=${KUBE_CDC_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-cdc/testbin/kube-apiserver-${k8s}_etcd-${etcd}}
if [ "${1:-}" = "--print-dir" ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"

kwok=$(cd kwok && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
# KWOK's version is not in the directory's name (that would rebuild the apiserver): a stamp
# file beside the binary says which version it is.
kwok_ok() { [ -x "$dir/kwok" ] && [ "$(cat "$dir/kwok.version" 2>/dev/null)" = "$kwok" ]; }

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -x "$dir/etcdutl" ] &&
  [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kube-scheduler" ] && kwok_ok; then
  echo "$dir"
  exit 0
fi

export CGO_ENABLED=0

if [ ! -x "$dir/etcd" ]; then
  echo "building etcd $etcd into $dir (a few minutes the first time)" >&2
  go build -trimpath -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$dir/etcd.tmp" "$dir/etcd"
fi

if [ ! -x "$dir/etcdutl" ]; then
  utl=$(cd etcdutl && go list -m -f '{{.Version}}' go.etcd.io/etcd/etcdutl/v3)
  if [ "$utl" != "$etcd" ]; then
    echo "hack/testbin/etcdutl pins etcdutl $utl, but etcd is $etcd: run (cd hack/testbin/etcdutl && go get go.etcd.io/etcd/etcdutl/v3@$etcd && go mod tidy)" >&2
    exit 1
  fi
  echo "building etcdutl $etcd into $dir" >&2
  (cd etcdutl && go build -trimpath -o "$dir/etcdutl.tmp" go.etcd.io/etcd/etcdutl/v3)
  mv "$dir/etcdutl.tmp" "$dir/etcdutl"
fi

minor=$(echo "$k8s" | cut -d. -f2)
pkg=k8s.io/component-base/version
cpkg=k8s.io/client-go/pkg/version
ld="-s -w"
for p in $pkg $cpkg; do
  ld="$ld -X $p.gitVersion=$k8s -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
# The control plane: the apiserver for every test; the controller-manager and the scheduler
# for testenv's cluster mode (Deployments that make ReplicaSets and Pods, Pods scheduled onto
# KWOK's nodes). Most of their packages are the apiserver's, so each after the first takes
# a few minutes.
for bin in kube-apiserver kube-controller-manager kube-scheduler; do
  if [ ! -x "$dir/$bin" ]; then
    echo "building $bin $k8s into $dir (about 7 minutes for the first of them on 2 cores; 14 minutes for every test binary, measured 2026-11-27)" >&2
    go build -trimpath -tags=providerless -ldflags "$ld" -o "$dir/$bin.tmp" "k8s.io/kubernetes/cmd/$bin"
    mv "$dir/$bin.tmp" "$dir/$bin"
  fi
done

if ! kwok_ok; then
  echo "building kwok $kwok into $dir (a few minutes the first time)" >&2
  (cd kwok && go build -trimpath -o "$dir/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
  mv "$dir/kwok.tmp" "$dir/kwok"
  echo "$kwok" >"$dir/kwok.version"
fi
echo "$dir"
