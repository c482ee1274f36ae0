//! What issue #16 left, end to end through `portcullis serve`, the real
//! Envoy, real echo backends and real HTTP:
//! - a Gateway (or ListenerSet) listener with a value the loader cannot
//!   read refuses that listener only; the other listeners serve;
//! - a route hostname or parentRef that cannot be read: the route keeps its
//!   other hostnames and parents, and never widens to every hostname;
//! - a credential header a route sets reaches the backend, and never the
//!   admin API's config dump or `portcullis describe`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    GATEWAY_CLASS, echo_pod, free_port, gateway, http, request, service, start, wait_for, work_dir,
};

/// The JSON status document of `kind`/`name` in `/api/status`.
fn status_of(doc: &str, kind: &str, name: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(doc).expect("status json");
    v["status"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["kind"] == kind && s["metadata"]["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{kind} {name} in {doc}"))
}

fn condition<'a>(conditions: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("{kind} in {conditions}"))
}

#[test]
fn an_unreadable_listener_value_refuses_that_listener_and_the_others_serve() {
    let a = echo_pod("app", "a-pod-1");
    let dir = work_dir("leftovers-listeners");
    let (gw_port, ls_port, typo_port, from_port) = (free_port(), free_port(), free_port(), free_port());
    let (xds, admin) = (free_port(), free_port());
    let manifests = format!(
        r#"{GATEWAY_CLASS}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners:
  - {{name: http, protocol: HTTP, port: {gw_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
  - name: tls-typo
    protocol: HTTPS
    port: {typo_port}
    tls: {{mode: Terminat, certificateRefs: [{{name: cert}}]}}
  - name: from-typo
    protocol: HTTP
    port: {from_port}
    allowedRoutes: {{namespaces: {{from: Everyone}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls, namespace: infra}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: good, protocol: HTTP, port: {ls_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
  - name: bad
    protocol: HTTP
    port: {ls_port}
    hostname: bad.example.com
    allowedRoutes: {{kinds: [{{group: gateway.networking.k8s.io}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs:
  - {{name: gw, namespace: infra}}
  - {{name: ls, namespace: infra, kind: ListenerSet}}
  rules:
  - backendRefs: [{{name: a, port: 80}}]
---
{svc}
"#,
        svc = service("a", a.port())
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);

    // The Gateway's good listener and the ListenerSet's good listener serve.
    wait_for("the Gateway's good listener", Duration::from_secs(60), || {
        http(gw_port, "x", "/").is_some_and(|r| r.0 == 200 && r.2.contains("a-pod-1"))
    });
    wait_for("the ListenerSet's good listener", Duration::from_secs(30), || {
        http(ls_port, "x", "/").is_some_and(|r| r.0 == 200 && r.2.contains("a-pod-1"))
    });
    // The refused listeners are not programmed.
    assert!(http(from_port, "x", "/").is_none(), "from-typo listener serves");

    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    let gw = status_of(&doc, "Gateway", "gw");
    let accepted = condition(&gw["status"]["conditions"], "Accepted");
    assert_eq!(
        (accepted["status"].as_str(), accepted["reason"].as_str()),
        (Some("True"), Some("ListenersNotValid")),
        "{accepted}"
    );
    let listeners = gw["status"]["listeners"].as_array().expect("listeners");
    for (name, field) in [
        (
            "tls-typo",
            "spec.listeners[1].tls.mode: unknown value \"Terminat\"",
        ),
        (
            "from-typo",
            "spec.listeners[2].allowedRoutes.namespaces.from: unknown value \"Everyone\"",
        ),
    ] {
        let l = listeners
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {gw}"));
        let accepted = condition(&l["conditions"], "Accepted");
        assert_eq!(accepted["status"], "False", "{accepted}");
        assert_eq!(accepted["reason"], "Invalid", "{accepted}");
        assert!(
            accepted["message"].as_str().unwrap_or_default().contains(field),
            "{accepted}"
        );
        assert_eq!(
            condition(&l["conditions"], "Programmed")["status"],
            "False",
            "{l}"
        );
    }
    let http_listener = listeners.iter().find(|l| l["name"] == "http").expect("http");
    assert_eq!(
        condition(&http_listener["conditions"], "Programmed")["status"],
        "True"
    );

    let ls = status_of(&doc, "ListenerSet", "ls");
    let bad = ls["status"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["name"] == "bad")
        .unwrap_or_else(|| panic!("bad in {ls}"));
    let accepted = condition(&bad["conditions"], "Accepted");
    assert_eq!(
        (accepted["status"].as_str(), accepted["reason"].as_str()),
        (Some("False"), Some("Invalid"))
    );
    assert!(
        accepted["message"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.listeners[1].allowedRoutes.kinds[0].kind: missing required field"),
        "{accepted}"
    );
    // The diagnostic names the object, the file:line and the field.
    assert!(doc.contains("Gateway infra/gw"), "{doc}");
    assert!(doc.contains("all.yaml:17"), "tls.mode line in {doc}");
    assert!(doc.contains("ListenerSet infra/ls"), "{doc}");
}

#[test]
fn unreadable_route_hostnames_and_parent_refs_lose_only_themselves() {
    let a = echo_pod("app", "a-pod-1");
    let dir = work_dir("leftovers-routes");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let manifests = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: partly, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [a.example.com, 5]
  rules:
  - backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: only-bad, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [[b.example.com]]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /only-bad}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: two-parents, namespace: app}}
spec:
  parentRefs:
  - {{name: elsewhere, namespace: infra, port: eighty}}
  - {{name: gw, namespace: infra}}
  hostnames: [c.example.com]
  rules:
  - backendRefs: [{{name: a, port: 80}}]
---
{svc}
"#,
        gateway = gateway(gw_port),
        svc = service("a", a.port())
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("the route's readable hostname", Duration::from_secs(60), || {
        http(gw_port, "a.example.com", "/").is_some_and(|r| r.0 == 200 && r.2.contains("a-pod-1"))
    });
    // The route with a bad parentRef still attaches through its good one.
    let (status, _, body) = http(gw_port, "c.example.com", "/").expect("c");
    assert_eq!(status, 200, "{body}");
    // Never widened: no hostname is served by the route whose only
    // hostname could not be read, nor by the partly readable one.
    for host in ["b.example.com", "other.example.com"] {
        let (status, _, body) = http(gw_port, host, "/only-bad").expect(host);
        assert_eq!(status, 404, "{host}: {body}");
    }

    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    let only_bad = status_of(&doc, "HTTPRoute", "only-bad");
    let accepted = condition(&only_bad["status"]["parents"][0]["conditions"], "Accepted");
    assert_eq!(accepted["status"], "False", "{accepted}");
    assert!(doc.contains("spec.hostnames[1]: invalid type: number"), "{doc}");
    assert!(
        doc.contains("spec.parentRefs[0].port: invalid type: string"),
        "{doc}"
    );
    let two = status_of(&doc, "HTTPRoute", "two-parents");
    let parents = two["status"]["parents"].as_array().expect("parents");
    assert_eq!(parents.len(), 1, "{two}");
    assert_eq!(parents[0]["parentRef"]["name"], "gw", "{two}");
}

#[test]
fn credential_header_values_reach_the_backend_and_never_the_admin_views() {
    let a = echo_pod("app", "a-pod-1");
    let dir = work_dir("leftovers-redact");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let manifests = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - name: main
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{{name: authorization, value: "Bearer s3cr3t"}}, {{name: x-plain, value: visible-value}}]
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: keys, namespace: app}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}}]
  headerModifiers:
    request:
      set: [{{name: X-API-Key, value: k3y-s3cr3t}}]
---
{svc}
"#,
        gateway = gateway(gw_port),
        svc = service("a", a.port())
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);

    // Envoy gets the real values: the backend sees them.
    wait_for(
        "the backend to see the credential",
        Duration::from_secs(60),
        || {
            request(gw_port, "x", "GET", "/", &[])
                .is_some_and(|r| r.0 == 200 && r.2.contains("Bearer s3cr3t") && r.2.contains("k3y-s3cr3t"))
        },
    );

    let (code, _, dump) = http(admin, "admin", "/api/config_dump").expect("config_dump");
    assert_eq!(code, 200);
    assert!(!dump.contains("s3cr3t"), "credential in config_dump: {dump}");
    // Redacted, not dropped: the header names stay, and other values too.
    assert!(
        dump.contains("authorization") && dump.contains("[redacted]"),
        "{dump}"
    );
    assert!(dump.contains("visible-value"), "{dump}");
    for path in ["/api/status", "/api/views"] {
        let (_, body, _) = http(admin, "admin", path)
            .map(|(c, _, b)| (c, b, ()))
            .expect(path);
        assert!(!body.contains("s3cr3t"), "credential in {path}: {body}");
    }
    for args in [
        ["describe", "route", "app/r"],
        ["describe", "gateway", "infra/gw"],
        ["describe", "policy", "app/keys"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .args(["--admin", &format!("127.0.0.1:{admin}")])
            .output()
            .expect("describe");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        assert!(!text.contains("s3cr3t"), "credential in {args:?}: {text}");
    }
}
