//! HTTPProxy end to end: `portcullis serve --httpproxy-gateway infra/gw`,
//! the real Envoy, echo backends on loopback, real HTTP.
//! - the seed design's include-tree examples: `example.com/foo/bar`
//!   reaches the first child's service; the duplicate child is reported
//!   in `/api/status` (error on the child, warning on the root);
//! - a missing include answers 502 for its conditions;
//! - an invalid child's paths answer 500 instead of the root's catch-all
//!   200, and fixing the child restores 200 without a restart;
//! - the metrics (duplicates per root, proxies by status) and `portcullis
//!   get httpproxies` / `describe httpproxy` against the admin API;
//! - a TLS root: its own SNI chain with the delegated certificate, HTTP
//!   redirected to HTTPS except `permitInsecure`.

mod common;

use std::time::Duration;

use common::httpproxy::{certificate, delegated_tls_root, https_gateway, tls_get, tls_secret};
use common::{echo_pod, free_port, gateway, http, loopback, service_at, start_with, wait_for, work_dir};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

/// A Service `default/NAME` on the echo backend at `port`, after `---`.
fn service(name: &str, port: u16) -> String {
    format!("---\n{}\n", service_at("default", name, loopback(port)))
}

/// The seed's first example (`split: false`: both children under `/foo`
/// with route `/bar`) or second (`split: true`: child1 `/foo` + `/`,
/// child2 `/` + `/foo`); plus a missing include at `/missing`, a child
/// `/broken` whose `broken_field` line makes it invalid (empty: valid),
/// and a catch-all route on the root.
fn manifests(gw_port: u16, ports: [u16; 3], split: bool, broken_field: &str) -> String {
    let (inc2, r1, r2) = if split {
        ("/", "/", "/foo")
    } else {
        ("/foo", "/bar", "/bar")
    };
    format!(
        r#"{gateway}apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: example-root, namespace: default}}
spec:
  virtualhost: {{fqdn: example.com}}
  includes:
  - name: example-child1
    conditions: [{{prefix: /foo}}]
  - name: example-child2
    conditions: [{{prefix: {inc2}}}]
  - name: missing
    conditions: [{{prefix: /missing}}]
  - name: broken
    conditions: [{{prefix: /broken}}]
  routes:
  - services: [{{name: catchall, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: example-child1, namespace: default}}
spec:
  routes:
  - conditions: [{{prefix: {r1}}}]
    services: [{{name: s1, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: example-child2, namespace: default}}
spec:
  routes:
  - conditions: [{{prefix: {r2}}}]
    services: [{{name: s2, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: broken, namespace: default}}
spec:
  routes:
  - services: [{{name: s1, port: 80}}]
{broken_field}
{s1}{s2}{catchall}"#,
        gateway = gateway(gw_port),
        s1 = service("s1", ports[0]),
        s2 = service("s2", ports[1]),
        catchall = service("catchall", ports[2]),
    )
}

/// The `status` of HTTPProxy `default/NAME` from `/api/status`.
fn proxy_status(admin: u16, name: &str) -> Option<serde_json::Value> {
    let (_, _, body) = http(admin, "admin", "/api/status")?;
    let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
    doc["status"]
        .as_array()?
        .iter()
        .find(|s| s["kind"] == "HTTPProxy" && s["metadata"]["name"] == name)
        .map(|s| s["status"].clone())
}

fn serves(gw_port: u16, path: &str, pod: &str) -> bool {
    http(gw_port, "example.com", path).is_some_and(|(s, _, b)| s == 200 && b.contains(pod))
}

#[test]
fn include_tree_duplicates_missing_includes_and_invalid_children_through_envoy() {
    let s1 = echo_pod("default", "s1-pod");
    let s2 = echo_pod("default", "s2-pod");
    let catchall = echo_pod("default", "catchall-pod");
    let ports = [s1.port(), s2.port(), catchall.port()];
    let dir = work_dir("httpproxy-e2e");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    // `loadBalancerPolicy` is a Contour field portcullis does not
    // implement: the child is invalid (never served without it).
    let broken = "    loadBalancerPolicy: {strategy: Cookie}";
    std::fs::write(&file, manifests(gw_port, ports, false, broken)).expect("write");
    let _serve = start_with(&dir, xds, admin, &["--httpproxy-gateway", "infra/gw"], &[]);

    wait_for("Envoy to serve example.com", Duration::from_secs(60), || {
        serves(gw_port, "/other", "catchall-pod")
    });
    // Seed example 1: /foo/bar reaches the first child's service, always.
    for _ in 0..5 {
        let (status, _, body) = http(gw_port, "example.com", "/foo/bar").expect("foo/bar");
        assert_eq!(status, 200);
        assert!(body.contains("s1-pod"), "{body}");
    }
    // The duplicate child is reported; the root keeps Valid=True with a
    // warning naming it. (Envoy is fed before the status and the metrics
    // are published.)
    wait_for("the first status", Duration::from_secs(10), || {
        proxy_status(admin, "example-child2").is_some()
    });
    let child2 = proxy_status(admin, "example-child2").expect("child2 status");
    assert_eq!(child2["currentStatus"], "invalid", "{child2}");
    assert_eq!(
        child2["conditions"][0]["errors"][0]["message"],
        "duplicate match conditions defined on route matching path prefix: \"/foo/bar\"",
        "{child2}"
    );
    let root = proxy_status(admin, "example-root").expect("root status");
    assert_eq!(
        root["conditions"][0]["warnings"][0]["message"],
        "duplicate match conditions defined in included HTTPProxy \"default/example-child2\"",
        "{root}"
    );
    assert_eq!(root["loadBalancer"]["ingress"][0]["ip"], "127.0.0.1", "{root}");

    // Metrics: duplicates per root, proxies by status.
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    for line in [
        "portcullis_httpproxy_duplicate_routes_current{root=\"default/example-root\"} 1",
        "portcullis_httpproxies{status=\"valid\"} 1",
        "portcullis_httpproxies{status=\"invalid\"} 3",
        "portcullis_httpproxies{status=\"orphaned\"} 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    // The CLI, from the running admin API.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .args(["--admin", &format!("127.0.0.1:{admin}")])
            .output()
            .expect("run portcullis");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let table = cli(&["get", "httpproxies"]);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .map(|l| l.split_whitespace().take(5).collect::<Vec<_>>().join(" "))
    };
    assert_eq!(
        row("example-root").as_deref(),
        Some("default example-root example.com root invalid"),
        "{table}"
    );
    assert_eq!(
        row("example-child1").as_deref(),
        Some("default example-child1 - child valid"),
        "{table}"
    );
    assert_eq!(
        row("example-child2").as_deref(),
        Some("default example-child2 - child invalid"),
        "{table}"
    );
    let described = cli(&["describe", "httpproxy", "default/example-child2"]);
    for expected in [
        "    default/example-root -> default/example-child2",
        "    [default/example-root] path prefix: \"/foo/bar\" -> route spec.routes[0]: DUPLICATE, not programmed; default/example-child1 route spec.routes[0] wins",
        "    RouteError/DuplicateMatchConditions: duplicate match conditions defined on route matching path prefix: \"/foo/bar\"",
    ] {
        assert!(
            described.lines().any(|l| l == expected),
            "{expected:?} in\n{described}"
        );
    }

    // A missing include answers 502 for its conditions.
    assert_eq!(http(gw_port, "example.com", "/missing/x").map(|r| r.0), Some(502));
    // The invalid child's paths answer 500, not the root's catch-all 200.
    let (status, _, body) = http(gw_port, "example.com", "/broken/page").expect("broken");
    assert_eq!((status, body.as_str()), (500, BODY));
    let broken_status = proxy_status(admin, "broken").expect("broken status");
    assert_eq!(broken_status["currentStatus"], "invalid");

    // Fixing the child restores 200 without a restart.
    std::fs::write(&file, manifests(gw_port, ports, false, "")).expect("fix");
    wait_for("the fix to reach Envoy", Duration::from_secs(30), || {
        serves(gw_port, "/broken/page", "s1-pod")
    });
    // Envoy is fed before the status is published.
    wait_for("the status to follow the fix", Duration::from_secs(10), || {
        proxy_status(admin, "broken").is_some_and(|s| s["currentStatus"] == "valid")
    });

    // Seed example 2: /foo + / and / + /foo are the same route; the first
    // child's serves /foo/bar and /foo/ (its `/foo/` prefix), the second
    // child is the duplicate.
    std::fs::write(&file, manifests(gw_port, ports, true, "")).expect("example 2");
    wait_for("example 2 to be reported", Duration::from_secs(30), || {
        proxy_status(admin, "example-child2").is_some_and(|s| {
            s["conditions"][0]["errors"][0]["message"]
                == "duplicate match conditions defined on route matching path prefix: \"/foo\""
        })
    });
    wait_for("example 2 to reach Envoy", Duration::from_secs(30), || {
        serves(gw_port, "/foo/bar", "s1-pod")
    });
    assert!(serves(gw_port, "/foo/", "s1-pod"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS root through the real Envoy: its own SNI filter chain on the
/// Gateway's HTTPS listener presents the delegated Secret's certificate
/// (not the listener's own), serves the tree over TLS; on the HTTP
/// listener its routes redirect to HTTPS except the `permitInsecure` one.
#[test]
fn tls_root_gets_its_own_sni_chain_and_http_redirects() {
    let backend = echo_pod("team", "secure-pod");
    let dir = work_dir("httpproxy-tls-e2e");
    let (http_port, https_port) = (free_port(), free_port());
    let (xds, admin) = (free_port(), free_port());
    let (gw_cert, gw_key, gw_der) = certificate("listener.example.net");
    let (cert, key, der) = certificate("secure.example.com");
    let manifests = format!(
        "{gateway}{gw_secret}{secret}{root}{svc}",
        gateway = https_gateway(http_port, https_port),
        gw_secret = tls_secret("infra", "listener-cert", &gw_cert, &gw_key),
        secret = tls_secret("certs", "secure", &cert, &key),
        root = delegated_tls_root(
            "  - conditions: [{prefix: /.well-known}]\n    permitInsecure: true\n    services: [{name: s, port: 80}]\n"
        ),
        svc = service_at("team", "s", backend.addr()),
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start_with(&dir, xds, admin, &["--httpproxy-gateway", "infra/gw"], &[]);

    wait_for(
        "Envoy to serve secure.example.com over TLS",
        Duration::from_secs(60),
        || tls_get(https_port, "secure.example.com", "/app").is_some_and(|r| r.0 == 200),
    );
    let (status, body, presented) = tls_get(https_port, "secure.example.com", "/app").expect("tls");
    assert_eq!(status, 200);
    assert!(body.contains("secure-pod"), "{body}");
    assert_eq!(
        presented, der,
        "the delegated Secret's certificate, chosen by SNI"
    );
    // Another SNI gets the listener's own chain and certificate.
    let (_, _, other) = tls_get(https_port, "other.example.net", "/").expect("other SNI");
    assert_eq!(other, gw_der);
    // Plain HTTP: redirect to HTTPS, except the permitInsecure route.
    let (status, head, _) = http(http_port, "secure.example.com", "/app").expect("http");
    assert_eq!(status, 301, "{head}");
    assert!(
        head.lines()
            .any(|l| l.eq_ignore_ascii_case("location: https://secure.example.com/app")),
        "{head}"
    );
    let (status, _, body) = http(http_port, "secure.example.com", "/.well-known/x").expect("insecure");
    assert_eq!(status, 200);
    assert!(body.contains("secure-pod"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Offline (`-f`), `get httpproxies` takes the serving settings of `serve`:
/// with them, the root whose FQDN an HTTPRoute keeps and the root outside
/// the root namespaces are invalid; without them, both are valid.
#[test]
fn offline_get_httpproxies_takes_the_serving_settings() {
    let input = common::fixture_input("httpproxy-fqdn-conflict");
    let get = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["get", "httpproxies", "-f"])
            .arg(&input)
            .args(extra)
            .output()
            .expect("run portcullis");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let status = |name: &str| {
            table
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .and_then(|l| l.split_whitespace().nth(4))
                .map(str::to_string)
        };
        (status("shared"), status("rogue"))
    };
    assert_eq!(
        get(&[
            "--httpproxy-gateway",
            "infra/edge",
            "--root-namespaces",
            "default"
        ]),
        (Some("invalid".into()), Some("invalid".into()))
    );
    assert_eq!(get(&[]), (Some("valid".into()), Some("valid".into())));
}
