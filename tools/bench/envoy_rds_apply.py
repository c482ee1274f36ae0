#!/usr/bin/env python3
"""Envoy's own cost of applying one RouteConfiguration of N virtual hosts.

Issue 15's propagation target (file write -> Envoy answers 200, median
<= 50 ms at 10,000 routes) is bounded below by what Envoy spends applying
the 10,000-host route configuration the edit changes. This measures that
cost alone, without portcullis: a real Envoy (ENVOY_BIN, default
.tools/bin/envoy) reads its route configuration by filesystem RDS from a
binary DiscoveryResponse (`.pb`: no JSON or YAML parsing in the way), in
the propagation bench's shape (one host per route, one prefix route to one
cluster). Each of REPS updates changes one host; the Envoy process's CPU
time over the update (every thread's, from /proc schedstat, minus the same
window idle) is the apply cost. CPU time rather than wall time, so that a
loaded 2-core machine distorts it less.

VARIANT is one of
  base     the bootstrap portcullis writes (no stats configuration);
  novhost  stats_matcher rejecting `vhost.` stats (Envoy creates a
           catch-all virtual cluster's stats per virtual host);
  notags   use_all_default_tags: false (no tag-extraction regexes per stat);
  both     the two together.

  python3 tools/bench/envoy_rds_apply.py 10000 base 9
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENVOY = os.environ.get("ENVOY_BIN", os.path.join(ROOT, ".tools", "bin", "envoy"))
TYPE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(tag, payload):
    """A length-delimited protobuf field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def number(tag, n):
    return varint(tag << 3) + varint(n)


def discovery_response(n, version, changed):
    """DiscoveryResponse{version_info, resources: [RouteConfiguration "rc"]}
    (field numbers from envoy/config/route/v3 and service/discovery/v3)."""
    rc = field(1, "rc")
    for i in range(n):
        # RouteMatch: path_separated_prefix (14), or prefix (1) for the edit.
        m = field(1, f"/v{version}") if i == changed else field(14, "/app")
        # RouteAction: cluster (1), cluster_not_found_response_code (20) = 500.
        action = field(1, "app/echo/80") + number(20, 1)
        route = field(1, m) + field(2, action) + field(14, f"httproute/app/r{i}/rule/0/match/0")
        rc += field(2, field(1, f"app/r{i}/0") + field(2, f"r{i}.example.com") + field(3, route))
    # validate_clusters: false (an empty BoolValue), ignore_port_in_host_matching.
    rc += field(7, b"") + number(14, 1)
    return field(1, str(version)) + field(2, field(1, TYPE) + field(2, rc)) + field(4, TYPE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bootstrap(admin, listener, rds_path, variant):
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "http",
        "rds": {
            "route_config_name": "rc",
            "config_source": {"path_config_source": {"path": rds_path}, "resource_api_version": "V3"},
        },
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            }
        ],
    }
    endpoint = {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}
    b = {
        "node": {"id": "bench", "cluster": "bench"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {
            "clusters": [
                {
                    "name": "app/echo/80",
                    "connect_timeout": "1s",
                    "type": "STATIC",
                    "load_assignment": {"cluster_name": "app/echo/80", "endpoints": [{"lb_endpoints": [endpoint]}]},
                }
            ],
            "listeners": [
                {
                    "name": "http",
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": listener}},
                    "filter_chains": [{"filters": [{"name": "hcm", "typed_config": hcm}]}],
                }
            ],
        },
    }
    no_vhost = {"exclusion_list": {"patterns": [{"prefix": "vhost."}]}}
    if variant == "novhost":
        b["stats_config"] = {"stats_matcher": no_vhost}
    elif variant == "notags":
        b["stats_config"] = {"use_all_default_tags": False}
    elif variant == "both":
        b["stats_config"] = {"use_all_default_tags": False, "stats_matcher": no_vhost}
    elif variant != "base":
        sys.exit(f"unknown variant {variant!r}: base, novhost, notags or both")
    return b


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    variant = sys.argv[2] if len(sys.argv) > 2 else "base"
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    work = tempfile.mkdtemp(prefix="envoy-rds-apply-")
    rds = os.path.join(work, "rds.pb")
    admin, listener = free_port(), free_port()

    def write(version, changed):
        tmp = rds + ".tmp"
        with open(tmp, "wb") as f:
            f.write(discovery_response(n, version, changed))
        return tmp

    os.rename(write(0, -1), rds)
    with open(os.path.join(work, "bootstrap.json"), "w") as f:
        json.dump(bootstrap(admin, listener, rds, variant), f)
    envoy = subprocess.Popen(
        [ENVOY, "-c", os.path.join(work, "bootstrap.json"), "--concurrency", "2", "-l", "error",
         "--base-id", str(os.getpid() % 60000)],
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, "envoy.log"), "w"),
    )

    def applied():
        url = f"http://127.0.0.1:{admin}/stats?filter=http.http.rds.rc.update_success$"
        try:
            return int(urllib.request.urlopen(url, timeout=2).read().decode().split(":")[1])
        except Exception:
            return -1

    def cpu_ns():
        total = 0
        for t in os.listdir(f"/proc/{envoy.pid}/task"):
            try:
                with open(f"/proc/{envoy.pid}/task/{t}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
        return total

    try:
        start = time.time()
        while applied() < 1:
            if envoy.poll() is not None or time.time() - start > 120:
                sys.exit(f"Envoy did not apply the first configuration (log: {work}/envoy.log)")
            time.sleep(0.01)
        time.sleep(1.0)
        c0 = cpu_ns()
        time.sleep(1.0)
        idle = cpu_ns() - c0
        costs = []
        for version in range(1, reps + 1):
            tmp = write(version, version % n)
            before = applied()
            c0 = cpu_ns()
            os.rename(tmp, rds)
            time.sleep(1.0)
            cost = cpu_ns() - c0 - idle
            if applied() != before + 1:
                sys.exit(f"update {version} was not applied within 1 s (log: {work}/envoy.log)")
            costs.append(cost / 1e6)
    finally:
        envoy.terminate()
        envoy.wait()
    print(
        f"variant={variant} hosts={n} updates={reps} apply_cpu_median_ms={statistics.median(costs):.1f} "
        f"min_ms={min(costs):.1f} max_ms={max(costs):.1f}"
    )


if __name__ == "__main__":
    main()
