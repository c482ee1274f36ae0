#!/usr/bin/env bash
# Builds the Kubernetes control plane that Kubernetes mode's tests run
# against — kube-apiserver and kube-controller-manager from the Go module
# k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3, at the versions
# pinned in tools/kube/go.mod — into .tools/bin/. Test tooling only: the
# product is Rust. Idempotent: skips the build when the binaries were built
# from the same go.mod/go.sum (a stamp in .tools/kube.stamp).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tools/kube"
bin="$root/.tools/bin"
stamp="$root/.tools/kube.stamp"
want="$(cat "$src/go.mod" "$src/go.sum" "$src/cmd/etcd/main.go" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "install-kube: no Go toolchain on this machine: cannot build kube-apiserver and etcd" >&2
  exit 1
fi
mkdir -p "$bin"
cd "$src"
start=$(date +%s)
# The version Kubernetes' own build stamps in (clients read it from /version).
version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="$(echo "$version" | cut -d. -f2)"
pkg=k8s.io/component-base/version
ldflags="-X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
# No VCS stamping: the build does not depend on the clone's git state.
# Go's build cache (~/.cache/go-build) is shared by every clone on the
# machine: the first build took 13.4 min here (2 cores shared with other
# builds); after it, about 40 s.
go build -buildvcs=false -ldflags "$ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  ./cmd/etcd
echo "$want" >"$stamp"
echo "install-kube: built kube-apiserver, kube-controller-manager and etcd in $(($(date +%s) - start)) s"
"$bin/kube-apiserver" --version
"$bin/etcd" --version | sed -n 1p
