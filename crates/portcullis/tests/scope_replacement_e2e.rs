//! TrafficPolicies on a Gateway and on a listener, end to end through
//! `portcullis serve`, the real Envoy and an echo backend (README,
//! "TrafficPolicy"; ARCHITECTURE.md §3, `policy/scope.rs`):
//! - (a) a valid Gateway policy adding a response header is seen on every
//!   host of that Gateway (not on another Gateway's); a listener policy on
//!   `a` setting the same header wins on `a.example.com` (most specific);
//! - (b) making the Gateway policy invalid turns every host of that Gateway
//!   into the replacement 500 while the other Gateway keeps answering 200
//!   — no failed request there during the change — with no NACK, and the
//!   Gateway's status and the scope metrics say why;
//! - (c) an invalid policy on listener `a` turns `a.example.com` into 500
//!   while `b.example.com` on the same port answers 200;
//! - (d) fixing the policy restores 200 without a restart.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{free_port, gateway_with, host_listener, http, service, start, wait_for};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

const VALID_GATEWAY: &str = "  headerModifiers:\n    response:\n      set: [{name: x-scope, value: gateway}, {name: x-gateway, value: \"yes\"}]";
/// A format string Envoy would reject (unclosed `%REQ(`).
const INVALID_GATEWAY: &str =
    "  transformation:\n    response:\n      set: [{name: x-scope, value: \"%REQ(x-user%\"}]";
const VALID_LISTENER: &str =
    "  headerModifiers:\n    response:\n      set: [{name: x-scope, value: listener}]";
/// A CEL expression that does not parse.
const INVALID_LISTENER: &str = "  rbac:\n    matchExpressions: [\"request.headers['x-user'] == 'admin' &&\"]";

fn manifests(
    port: u16,
    other_port: u16,
    backend: u16,
    gateway_policy: &str,
    listener_policy: &str,
) -> String {
    let mut m = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: other, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: http, protocol: HTTP, port: {other_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
{svc}
---
"#,
        gateway = gateway_with(&format!(
            "{}{}",
            host_listener("a", port),
            host_listener("b", port)
        )),
        svc = service("web", backend),
    );
    for (name, gw) in [("a", "gw"), ("b", "gw"), ("c", "other")] {
        m.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
             spec:\n  parentRefs: [{{name: {gw}, namespace: infra}}]\n  hostnames: [{name}.example.com]\n\
             \x20 rules:\n  - backendRefs: [{{name: web, port: 80}}]\n---\n"
        ));
    }
    for (name, target, body) in [
        (
            "gateway-wide",
            "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}",
            gateway_policy,
        ),
        (
            "listener-a",
            "{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}",
            listener_policy,
        ),
    ] {
        m.push_str(&format!(
            "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}, namespace: infra}}\n\
             spec:\n  targetRefs: [{target}]\n{body}\n---\n"
        ));
    }
    m
}

/// (status, lowercased head, body).
fn get(port: u16, host: &str) -> Option<(u16, String, String)> {
    http(port, host, "/").map(|(s, h, b)| (s, h.to_ascii_lowercase(), b))
}

fn metric_lines(admin: u16, prefix: &str) -> Vec<String> {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Sum of the values of the metric lines with `prefix`.
fn metric_sum(admin: u16, prefix: &str) -> f64 {
    metric_lines(admin, prefix)
        .iter()
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[test]
fn gateway_and_listener_policies_apply_once_and_fail_closed_by_scope() {
    let backend = echo::spawn(echo::Config {
        namespace: "app".into(),
        pod: "web-pod-1".into(),
    })
    .expect("echo");
    let dir = std::env::temp_dir().join(format!("portcullis-scope-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("manifests")).expect("mkdir");
    let (port, other, xds, admin) = (free_port(), free_port(), free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    let write = |g: &str, l: &str| {
        std::fs::write(&file, manifests(port, other, backend.port(), g, l)).expect("write");
    };
    write(VALID_GATEWAY, VALID_LISTENER);
    let _serve = start(&dir, xds, admin);

    wait_for("both Gateways to serve", Duration::from_secs(60), || {
        get(port, "b.example.com").is_some_and(|r| r.0 == 200)
            && get(other, "c.example.com").is_some_and(|r| r.0 == 200)
    });
    // (a) The Gateway policy's header on every host of gw; the listener's
    // wins its own header on `a`; the other Gateway has neither.
    let (status, head, body) = get(port, "a.example.com").expect("a");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("web-pod-1"), "{body}");
    assert!(head.contains("x-gateway: yes"), "{head}");
    assert!(head.contains("x-scope: listener"), "{head}");
    assert!(!head.contains("x-scope: gateway"), "{head}");
    let (status, head, _) = get(port, "b.example.com").expect("b");
    assert_eq!(status, 200);
    assert!(
        head.contains("x-gateway: yes") && head.contains("x-scope: gateway"),
        "{head}"
    );
    let (status, head, _) = get(other, "c.example.com").expect("c");
    assert_eq!(status, 200);
    assert!(!head.contains("x-gateway") && !head.contains("x-scope"), "{head}");

    // (b) The Gateway policy becomes invalid while the other Gateway is
    // under steady traffic: not one failed request there.
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let prober = {
        let (stop, served, failed) = (stop.clone(), served.clone(), failed.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match get(other, "c.example.com") {
                    Some((200, _, _)) => served.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    write(INVALID_GATEWAY, VALID_LISTENER);
    wait_for("gw's hosts to answer the 500", Duration::from_secs(30), || {
        ["a.example.com", "b.example.com"]
            .iter()
            .all(|h| get(port, h).is_some_and(|r| r.0 == 500))
    });
    for host in ["a.example.com", "b.example.com", "any.other.host"] {
        let (status, head, body) = get(port, host).expect("fenced");
        assert_eq!((status, body.as_str()), (500, BODY), "{host}");
        assert!(!head.contains("x-gateway"), "{head}");
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    prober.join().expect("prober");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests to the other Gateway failed"
    );
    assert!(served.load(Ordering::Relaxed) > 5);
    // Why, in status and metrics; and Envoy accepted it (no NACK). Envoy
    // is fed before the status and the metrics are published.
    wait_for(
        "the Gateway replacement's status and metrics",
        Duration::from_secs(10),
        || {
            http(admin, "admin", "/api/status").is_some_and(|(_, _, doc)| doc.contains("GatewayReplaced"))
                && metric_lines(admin, "portcullis_scope_replacements_current{")
                    .iter()
                    .any(|l| l.contains("scope=\"route_configuration\"") && l.ends_with(" 1"))
        },
    );
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(doc.contains("GatewayReplaced"), "{doc}");
    assert!(
        doc.contains("TrafficPolicy infra/gateway-wide is invalid"),
        "{doc}"
    );
    let current = metric_lines(admin, "portcullis_scope_replacements_current{");
    assert!(
        current.iter().any(|l| l.contains("gateway=\"infra/gw\"")
            && l.contains("scope=\"route_configuration\"")
            && l.contains("listener=\"\"")
            && l.contains("error_class=\"structural\"")
            && l.ends_with(" 1")),
        "{current:?}"
    );
    assert_eq!(metric_sum(admin, "portcullis_xds_nacks_total"), 0.0);

    // (c) Gateway policy fixed; listener a's policy invalid: only a's
    // virtual host is fenced, b on the same port serves.
    write(VALID_GATEWAY, INVALID_LISTENER);
    wait_for("listener a fenced, b serving", Duration::from_secs(30), || {
        get(port, "a.example.com").is_some_and(|r| r.0 == 500)
            && get(port, "b.example.com").is_some_and(|r| r.0 == 200)
    });
    let (status, _, body) = get(port, "a.example.com").expect("a");
    assert_eq!((status, body.as_str()), (500, BODY));
    let (status, head, _) = get(port, "b.example.com").expect("b");
    assert_eq!(status, 200);
    assert!(head.contains("x-gateway: yes"), "{head}");
    // Envoy is fed before the status and the metrics are published.
    wait_for(
        "the listener replacement's status and metrics",
        Duration::from_secs(10),
        || {
            let current = metric_lines(admin, "portcullis_scope_replacements_current{");
            http(admin, "admin", "/api/status").is_some_and(|(_, _, doc)| doc.contains("ListenerReplaced"))
                && current
                    .iter()
                    .any(|l| l.contains("scope=\"virtual_host\"") && l.contains("listener=\"a\""))
                && !current
                    .iter()
                    .any(|l| l.contains("scope=\"route_configuration\""))
        },
    );
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(doc.contains("ListenerReplaced"), "{doc}");
    let current = metric_lines(admin, "portcullis_scope_replacements_current{");
    assert!(
        current
            .iter()
            .any(|l| l.contains("scope=\"virtual_host\"") && l.contains("listener=\"a\"")),
        "{current:?}"
    );
    assert!(
        !current
            .iter()
            .any(|l| l.contains("scope=\"route_configuration\"")),
        "{current:?}"
    );
    assert_eq!(metric_sum(admin, "portcullis_xds_nacks_total"), 0.0);

    // (d) Fixed: 200 again, without a restart.
    write(VALID_GATEWAY, VALID_LISTENER);
    wait_for("a to serve again", Duration::from_secs(30), || {
        get(port, "a.example.com").is_some_and(|r| r.0 == 200)
    });
    let (_, head, _) = get(port, "a.example.com").expect("a");
    assert!(head.contains("x-scope: listener"), "{head}");
    // Envoy is fed before the metrics are published.
    wait_for(
        "no scope replaced in the metrics",
        Duration::from_secs(10),
        || metric_sum(admin, "portcullis_scope_replacements_current") == 0.0,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `describe gateway` (offline) lists each replaced scope and why: the
/// whole Gateway's route configurations for a Gateway policy, one virtual
/// host for a listener policy.
#[test]
fn describe_gateway_lists_replaced_scopes() {
    let describe = |fixture: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["describe", "gateway", "infra/gw", "-f"])
            .arg(common::fixture_input(fixture))
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let d = describe("policy-gateway-invalid");
    assert!(d.contains("Replaced scopes (answer HTTP 500):"), "{d}");
    assert!(
        d.contains("route_configuration infra/gw/80, infra/gw/443/https (Gateway policy)")
            && d.contains("TrafficPolicy infra/gateway-wide is invalid"),
        "{d}"
    );
    assert!(d.contains("GatewayReplaced"), "{d}");
    let d = describe("policy-listener-http-invalid");
    assert!(
        d.contains("virtual_host infra/gw/80/a.example.com (listener a policy)")
            && d.contains("TrafficPolicy infra/listener-a is invalid"),
        "{d}"
    );
    assert!(d.contains("ListenerReplaced"), "{d}");
    assert!(!d.contains("b.example.com (listener"), "{d}");
}

/// `describe route` shows, per rule, each feature in force and the level
/// and policy it comes from (most specific wins).
#[test]
fn describe_route_shows_the_level_of_each_feature() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["describe", "route", "app/a", "-f"])
        .arg(common::fixture_input("policy-gateway-levels"))
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = String::from_utf8_lossy(&out.stdout);
    for line in [
        "rule 0: headerModifiers from TrafficPolicy app/rule-a (rule)",
        "rule 1: headerModifiers from TrafficPolicy app/route-a (route)",
        "rule 0: cors from TrafficPolicy infra/listener-a (listener a of Gateway infra/gw)",
        "rule 0: localRateLimit from TrafficPolicy infra/gateway-wide (Gateway infra/gw)",
    ] {
        assert!(d.contains(line), "missing {line:?} in\n{d}");
    }
    assert!(!d.contains("cors from TrafficPolicy infra/gateway-wide"), "{d}");
}
