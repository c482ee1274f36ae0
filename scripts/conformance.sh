#!/usr/bin/env bash
# Runs the Gateway API conformance cases (data kept outside the repo, in
# ../shared/conformance/gateway-api) against portcullis serve + the real
# Envoy + echo backends on loopback. Prints PASS/FAIL/SKIP per test and the
# summary; exits non-zero when a test fails. Needs to bind ports 80/443 on
# 127.0.1.N (root or CAP_NET_BIND_SERVICE), as the upstream Gateways ask.
# `--mode controller` runs the same cases against portcullis controller and
# a real kube-apiserver (scripts/install-kube.sh; without it every case is
# SKIPPED, a failure under PORTCULLIS_REQUIRE_KUBE).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
export ENVOY_BIN="${ENVOY_BIN:-$PWD/.tools/bin/envoy}"
cases="${PORTCULLIS_CONFORMANCE_CASES:-}"
if [ -z "$cases" ]; then
  for c in ../shared/conformance/gateway-api /work/shared/conformance/gateway-api; do
    if [ -f "$c/index.json" ]; then cases="$c"; break; fi
  done
fi
if [ -z "$cases" ]; then
  echo "conformance: cases not found (looked in ../shared/conformance/gateway-api); set PORTCULLIS_CONFORMANCE_CASES" >&2
  exit 2
fi
# The ListenerSet cases (README there) live beside the others.
extra="${PORTCULLIS_CONFORMANCE_EXTRA_CASES:-$(dirname "$cases")/gateway-api-listenerset}"
mode=file
prev=
for a in "$@"; do
  case "$a" in --mode=*) mode="${a#--mode=}" ;; esac
  if [ "$prev" = --mode ]; then mode="$a"; fi
  prev="$a"
done
work="$PWD/target/conformance"
if [ "$mode" != file ]; then work="$PWD/target/conformance-$mode"; fi
rm -rf "$work"
mkdir -p "$work"
dirs=("$cases")
if [ -f "$extra/index.json" ]; then dirs+=("$extra"); fi
echo "conformance ($mode mode): cases from ${dirs[*]}; Envoy and control-plane logs in $work" >&2
# The runner is built in the test profile: `cargo test --workspace` has
# already built it (crates/conformance/tests builds the binary), so this is a
# link at most, where a release build cost ~10 minutes of CI; the cases are
# small and pass in 15 s (file) and 35 s (controller) unoptimised.
# The runner's stderr (Envoy's and the control plane's logs) goes to a file;
# a failure prints its tail, so a build error or a panic is never silent.
status=0
cargo run --quiet --bin conformance -- "${dirs[@]}" --work-dir "$work" "$@" 2>"$work.stderr.log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "conformance ($mode mode): exit $status; last lines of $work.stderr.log:" >&2
  tail -n 60 "$work.stderr.log" >&2 || true
  df -h . >&2 || true
  exit "$status"
fi
