//! Loader hardening end to end, through `portcullis serve`, the real Envoy
//! and echo backends:
//! - a route with an unknown enum value in one rule (a filter `type`, a
//!   path match `type`, a `method`) is still bound: that rule answers 500
//!   (for every reading of its match), never another tenant's catch-all,
//!   its other rules answer 200, and its status is `Accepted=False`
//!   `UnsupportedValue` naming every field;
//! - names Kubernetes would refuse (`/` in a Service name or namespace)
//!   cannot make a route reach another namespace's Service through a
//!   generated-name collision (`a/b/c/80`).

mod common;

use std::time::Duration;

use common::{echo_pod, free_port, gateway, http, request, start, wait_for, work_dir};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

/// A Service and its EndpointSlice (the echo on `port`) in namespace `ns`.
fn service(ns: &str, name: &str, port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: "{name}", namespace: "{ns}"}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: "{name}-1", namespace: "{ns}", labels: {{kubernetes.io/service-name: "{name}"}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
"#
    )
}

#[test]
fn an_unknown_enum_value_fences_its_rule_and_never_falls_to_a_catch_all() {
    let tenant = echo_pod("app", "tenant-pod");
    let other = echo_pod("other", "catch-all-pod");
    let dir = work_dir("hardening-loader-enum-e2e");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    // The route in a file of its own: `serve` keeps a file with errors at
    // its last good version, and before routes with unsupported values were
    // loaded this file was never applied at all.
    let route = r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ok}}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /secret}}]
    filters: [{type: Foo}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: Prefixx, value: /typo}}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: Exact, value: /brew}, method: BREW}]
    backendRefs: [{name: echo, port: 80}]
"#;
    let rest = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: catch-all, namespace: other}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - backendRefs: [{{name: echo, port: 80}}]
---
{tenant}---
{other}"#,
        gateway = gateway(gw_port),
        tenant = service("app", "echo", tenant.port()),
        other = service("other", "echo", other.port()),
    );
    std::fs::write(dir.join("manifests/rest.yaml"), rest).expect("write");
    std::fs::write(dir.join("manifests/route.yaml"), route).expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("Envoy to serve the catch-all", Duration::from_secs(60), || {
        http(gw_port, "x", "/elsewhere").is_some_and(|r| r.0 == 200)
    });
    let (_, _, body) = http(gw_port, "x", "/elsewhere").expect("elsewhere");
    assert!(body.contains("catch-all-pod"), "{body}");

    // The rule with the unknown filter type: 500, never the catch-all.
    for path in ["/secret", "/secret/", "/secret/x?y=1"] {
        let (status, _, body) = http(gw_port, "x", path).expect(path);
        assert!(!body.contains("catch-all-pod"), "{path} fell to the catch-all");
        assert_eq!((status, body.as_str()), (500, BODY), "{path}");
    }
    // The route's valid rule serves.
    let (status, _, body) = http(gw_port, "x", "/ok").expect("ok");
    assert_eq!(status, 200);
    assert!(body.contains("tenant-pod"), "{body}");
    // An unknown path type: every reading of `/typo` (exact, prefix,
    // pattern) is fenced.
    for path in ["/typo", "/typo/", "/typo/deeper"] {
        let (status, _, body) = http(gw_port, "x", path).expect(path);
        assert_eq!((status, body.as_str()), (500, BODY), "{path}");
    }
    // An unknown method: the exact path answers 500 whatever the method
    // (Envoy's codec refuses `BREW` itself with a 400).
    for method in ["PROPFIND", "GET", "POST"] {
        let (status, _, body) = request(gw_port, "x", method, "/brew", &[]).expect(method);
        assert_eq!((status, body.as_str()), (500, BODY), "{method}");
    }
    // Precisely fenced: /brewery is not /brew's, and reaches the catch-all.
    let (_, _, body) = http(gw_port, "x", "/brewery").expect("brewery");
    assert!(body.contains("catch-all-pod"), "{body}");

    // Status: Accepted=False, UnsupportedValue, every field named.
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    let status: serde_json::Value = serde_json::from_str(&doc).expect("status json");
    let route = status["status"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["kind"] == "HTTPRoute" && s["metadata"]["name"] == "r")
        .unwrap_or_else(|| panic!("route status in {doc}"));
    let accepted = route["status"]["parents"][0]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Accepted")
        .unwrap_or_else(|| panic!("Accepted in {route}"));
    assert_eq!(accepted["status"], "False", "{accepted}");
    assert_eq!(accepted["reason"], "UnsupportedValue", "{accepted}");
    let message = accepted["message"].as_str().unwrap_or_default();
    for field in [
        "spec.rules[1].filters[0].type: unknown value \"Foo\"",
        "spec.rules[2].matches[0].path.type: unknown value \"Prefixx\"",
        "spec.rules[3].matches[0].method: unknown value \"BREW\"",
    ] {
        assert!(message.contains(field), "{field} in {message}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_slash_in_a_name_cannot_reach_another_namespaces_service() {
    // Before names were checked and generated names escaped, the route in
    // namespace `a` naming Service `b/c` and the Service `c` of namespace
    // `a/b` both became cluster `a/b/c/80`, so `/attack` reached the other
    // namespace's backend with no ReferenceGrant.
    let victim = echo_pod("a/b", "victim-pod");
    let own = echo_pod("a", "own-pod");
    let dir = work_dir("hardening-loader-names-e2e");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    // One file per party: `serve` does not apply a file with errors, and
    // the refused objects must not take the valid ones down with them.
    let base = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: attack, namespace: a}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /attack}}}}]
    backendRefs: [{{name: "b/c", port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /own}}}}]
    backendRefs: [{{name: own, port: 80}}]
---
{own}"#,
        gateway = gateway(gw_port),
        own = service("a", "own", own.port()),
    );
    let attacker_service = r#"apiVersion: v1
kind: Service
metadata: {name: "b/c", namespace: a}
spec:
  ports: [{name: http, port: 80}]
"#;
    let victim = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: victim, namespace: "a/b"}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /victim}}}}]
    backendRefs: [{{name: c, port: 80}}]
---
{victim}"#,
        victim = service("a/b", "c", victim.port()),
    );
    std::fs::write(dir.join("manifests/base.yaml"), base).expect("write");
    std::fs::write(dir.join("manifests/attacker.yaml"), attacker_service).expect("write");
    std::fs::write(dir.join("manifests/victim.yaml"), victim).expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("Envoy to serve /own", Duration::from_secs(60), || {
        http(gw_port, "x", "/own").is_some_and(|r| r.0 == 200)
    });
    let (status, _, body) = http(gw_port, "x", "/attack").expect("attack");
    assert!(!body.contains("victim-pod"), "{status} {body}");
    // A backend that resolves to nothing: the spec's 500.
    assert_eq!(status, 500, "{body}");
    // The objects Kubernetes would refuse are refused, and said so.
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    let status: serde_json::Value = serde_json::from_str(&doc).expect("status json");
    let diagnostics = status["diagnostics"].to_string();
    assert!(
        diagnostics.contains(r#"metadata.name: \"b/c\" is not a valid"#),
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains(r#"metadata.namespace: \"a/b\" is not a valid"#),
        "{diagnostics}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
