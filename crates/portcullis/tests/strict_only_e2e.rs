//! Issue 4 (d): a mistake only the real Envoy catches, through `serve` and
//! the real Envoy in both modes.
//!
//! The case: a TrafficPolicy whose CEL `matches()` pattern uses a Unicode
//! class (`\pL`). STANDARD checks `matches()` patterns with its RE2 port,
//! which computes program sizes the way Envoy's route regexes run (RE2 in
//! Latin-1 mode, where `\pL` is small); CEL runs RE2 in UTF-8 mode, where
//! `\pL` compiles to a program over Envoy's size limit ("regular expression
//! exceeds max allowed size"). STANDARD does not model UTF-8 program sizes,
//! so it sees nothing (pinned by `translate/tests/envoy_rejections.rs`,
//! `rejections/strict-only/`).
//!
//! - STRICT: the real Envoy rejects the route; STRICT isolates it and
//!   replaces that rule with the 500 (its neighbour keeps serving), and
//!   status, `describe` data and metrics name the rule and Envoy's reason.
//! - STANDARD: the route configuration reaches Envoy and is NACKed; Envoy
//!   keeps its last good configuration (the policy is not enforced), and the
//!   NACK is visible in the Gateway's status and the NACK metric.

mod common;

use std::time::Duration;

use common::{echo_pod, free_port, gateway, http, service, start_with, wait_for};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

fn manifests(gw_port: u16, backend: u16) -> String {
    format!(
        r#"{gateway}{svc}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - name: ok
    matches: [{{path: {{type: PathPrefix, value: /path}}}}]
    backendRefs: [{{name: a, port: 80}}]
  - name: letters
    matches: [{{path: {{type: PathPrefix, value: /path/letters}}}}]
    backendRefs: [{{name: a, port: 80}}]
"#,
        gateway = gateway(gw_port),
        svc = service("a", backend),
    )
}

/// Denies requests whose path has a letter (any script): fine CEL, but
/// Envoy refuses to compile the pattern.
const POLICY: &str = r#"apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: letters, namespace: app}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: letters}]
  rbac:
    action: Deny
    matchExpressions: ["request.path.matches(r'^/path/letters/\\pL+$')"]
"#;

fn setup(name: &str) -> (std::path::PathBuf, echo::Handle, u16, u16, u16) {
    let a = echo_pod("app", "a-pod-1");
    let dir = std::env::temp_dir().join(format!("portcullis-strict-only-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("manifests")).expect("mkdir");
    (dir, a, free_port(), free_port(), free_port())
}

fn metric_sum(metrics: &str, name: &str, must_contain: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && must_contain.iter().all(|c| l.contains(c)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn strict_replaces_the_rule_envoy_rejects_and_keeps_the_neighbour() {
    let (dir, a, gw, xds, admin) = setup("strict");
    std::fs::write(dir.join("manifests/route.yaml"), manifests(gw, a.port())).expect("write");
    std::fs::write(dir.join("manifests/policy.yaml"), POLICY).expect("write");
    let _serve = start_with(
        &dir,
        xds,
        admin,
        &[],
        &[("PORTCULLIS_ROUTE_REPLACEMENT_MODE", "STRICT")],
    );
    wait_for("Envoy to serve /path", Duration::from_secs(60), || {
        http(gw, "x", "/path").is_some_and(|r| r.0 == 200)
    });
    for _ in 0..3 {
        let (status, _, body) = http(gw, "x", "/path/letters/abc").expect("letters");
        assert_eq!(
            (status, body.as_str()),
            (500, BODY),
            "the rejected rule must fail closed"
        );
    }
    assert_eq!(http(gw, "x", "/path/other").map(|r| r.0), Some(200));

    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(doc.contains("Replaced Rule (1)"), "{doc}");
    assert!(doc.contains("rejected by Envoy"), "{doc}");
    assert!(
        doc.contains("regular expression exceeds max allowed size"),
        "{doc}"
    );
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    assert!(
        metric_sum(
            &metrics,
            "portcullis_invalid_route_replacements_total",
            &["route_name=\"r\"", "error_class=\"structural\""]
        ) >= 1.0,
        "{metrics}"
    );
    // Nothing reached Envoy as a NACK.
    assert_eq!(
        metric_sum(&metrics, "portcullis_xds_nacks_total", &[]),
        0.0,
        "{metrics}"
    );
}

#[test]
fn standard_lets_envoy_nack_it_and_shows_the_nack() {
    let (dir, a, gw, xds, admin) = setup("standard");
    std::fs::write(dir.join("manifests/route.yaml"), manifests(gw, a.port())).expect("write");
    let _serve = start_with(
        &dir,
        xds,
        admin,
        &[],
        &[("PORTCULLIS_ROUTE_REPLACEMENT_MODE", "STANDARD")],
    );
    wait_for("Envoy to serve /path/letters", Duration::from_secs(60), || {
        http(gw, "x", "/path/letters/abc").is_some_and(|r| r.0 == 200)
    });
    std::fs::write(dir.join("manifests/policy.yaml"), POLICY).expect("write");

    wait_for(
        "the NACK in the Gateway's status",
        Duration::from_secs(30),
        || {
            http(admin, "admin", "/api/status").is_some_and(|(_, _, doc)| {
                doc.contains("Envoy rejected") && doc.contains("regular expression exceeds max allowed size")
            })
        },
    );
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    // STANDARD saw nothing wrong with the policy itself.
    assert!(!doc.contains("Replaced Rule"), "{doc}");
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    assert!(
        metric_sum(&metrics, "portcullis_xds_nacks_total", &[]) >= 1.0,
        "{metrics}"
    );
    // Envoy keeps its last good configuration: the neighbour serves, and
    // the policy is not enforced at all — what STRICT prevents.
    assert_eq!(http(gw, "x", "/path/other").map(|r| r.0), Some(200));
    assert_eq!(http(gw, "x", "/path/letters/abc").map(|r| r.0), Some(200));
}
