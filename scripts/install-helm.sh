#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, the version pinned in tools/helm/go.mod) into
# .tools/bin/ for the chart's tests (crates/portcullis/tests/helm_e2e.rs).
# Test tooling only: the product is Rust. Idempotent: skips the build when
# the binary was built from the same go.mod/go.sum (a stamp in
# .tools/helm.stamp). PORTCULLIS_TOOLS_DIR overrides .tools (the tests then
# need HELM_BIN=$PORTCULLIS_TOOLS_DIR/bin/helm).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tools/helm"
tools="${PORTCULLIS_TOOLS_DIR:-$root/.tools}"
bin="$tools/bin"
stamp="$tools/helm.stamp"
want="$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$bin/helm" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "install-helm: no Go toolchain on this machine: cannot build helm" >&2
  exit 1
fi
mkdir -p "$bin"
cd "$src"
start=$(date +%s)
version="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
# helm's Makefile stamps the version and the Kubernetes version its client
# libraries speak (the default .Capabilities.KubeVersion of `helm template`
# and the API versions `helm lint` checks against).
kube="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
kminor="$(echo "$kube" | cut -d. -f2)"
ldflags="-X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
done
# Go's build cache (~/.cache/go-build) is shared with scripts/install-kube.sh:
# most of helm's dependencies (client-go, apimachinery) are already built.
go build -buildvcs=false -ldflags "$ldflags" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
echo "$want" >"$stamp"
echo "install-helm: built helm $version in $(($(date +%s) - start)) s"
