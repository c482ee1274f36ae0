#!/usr/bin/env bash
# The main job, end to end: installs the pinned Envoy into .tools/, builds
# portcullis and the echo backend, starts the echo backend (the quickstart's
# Service endpoint, 127.0.0.1:18081), then `portcullis serve
# examples/quickstart`, which starts Envoy for the Gateway. Prints a curl
# line that works, runs it once, and keeps serving until Ctrl-C.
#
#   QUICKSTART_EXIT=1 ./scripts/quickstart.sh   # check once and stop
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
cargo build --quiet --release -p portcullis -p echo
export ENVOY_BIN="${ENVOY_BIN:-$PWD/.tools/bin/envoy}"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

target/release/echo --listen 127.0.0.1:18081 --namespace app --pod echo-quickstart >/dev/null &
pids+=($!)
target/release/portcullis serve examples/quickstart &
pids+=($!)

for _ in $(seq 1 200); do
  curl -fsS http://127.0.0.1:19000/readyz >/dev/null 2>&1 && \
  curl -fsS -o /dev/null -H 'Host: echo.example.com' http://127.0.0.1:8080/api/hello 2>/dev/null && break
  sleep 0.1
done

cat <<'MSG'

portcullis is serving examples/quickstart. Try:

  curl -H 'Host: echo.example.com' http://127.0.0.1:8080/api/hello

Also:  curl -i -H 'Host: echo.example.com' -H 'x-debug: on' http://127.0.0.1:8080/api/hello   (403: policy.yaml)
       target/release/portcullis get gateways    (and: get routes, get policies, describe route echo)
       curl http://127.0.0.1:19000/metrics       (and /api/status, /api/config_dump)
Edit examples/quickstart/*.yaml and the change reaches Envoy within about 50 ms.

MSG
curl -fsS -H 'Host: echo.example.com' http://127.0.0.1:8080/api/hello
echo
target/release/portcullis get gateways
if [ "${QUICKSTART_EXIT:-0}" = 1 ]; then exit 0; fi
echo "Ctrl-C to stop."
wait
