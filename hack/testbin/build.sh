#!/usr/bin/env bash
# Builds the kube-apiserver and etcd that kube-cdc's tests run against, from the versions
# pinned in this module, into a cache outside the repository. Does nothing when both
# binaries of the pinned versions are already there.
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

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; then
  echo "$dir"
  exit 0
fi

export CGO_ENABLED=0

if [ ! -x "$dir/etcd" ]; then
  echo "building etcd $etcd into $dir (a few minutes the first time)" >&2
  go build -trimpath -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$dir/etcd.tmp" "$dir/etcd"
fi

if [ ! -x "$dir/kube-apiserver" ]; then
  echo "building kube-apiserver $k8s into $dir (about 11 minutes the first time)" >&2
  minor=$(echo "$k8s" | cut -d. -f2)
  pkg=k8s.io/component-base/version
  cpkg=k8s.io/client-go/pkg/version
  ld="-s -w"
  for p in $pkg $cpkg; do
    ld="$ld -X $p.gitVersion=$k8s -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  go build -trimpath -tags=providerless -ldflags "$ld" -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
fi
echo "$dir"
