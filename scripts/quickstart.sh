#!/usr/bin/env bash
# The main job: translates the quickstart manifests and prints the xDS each
# Gateway gets, the status of every object and the diagnostics; then shows
# the real Envoy accepting the generated configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
cargo build --quiet --release -p portcullis
bin=target/release/portcullis
"$bin" translate -f examples/quickstart -o yaml
echo "---"
echo "# envoy --mode validate on the Gateway's static bootstrap:"
"$bin" translate -f examples/quickstart -o bootstrap --gateway infra/shared > target/quickstart-bootstrap.json
.tools/bin/envoy --mode validate -c target/quickstart-bootstrap.json --log-level warn
