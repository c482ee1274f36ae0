//! Replacement end to end through the real Envoy (STANDARD mode):
//! - a rule that cannot be programmed (`/path/bad`, an invalid header
//!   filter) answers 500 with the replacement body while its neighbour
//!   `/path` answers 200 from the backend;
//! - an invalid regex matcher next to a broader prefix route: the guarded
//!   prefix answers 500, never the broader route's 200;
//! - fixing the manifest restores 200 without restarting anything.

mod common;

use std::time::Duration;

use common::{echo_pod, free_port, gateway, http, service, start, wait_for, work_dir};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

fn manifests(gw_port: u16, backend: u16, bad_header: &str, regex: &str) -> String {
    format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /path/bad}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: "{bad_header}", value: x}}]}}
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /path}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: broad, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: narrow, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: RegularExpression, value: "{regex}"}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
{svc}
"#,
        gateway = gateway(gw_port),
        svc = service("a", backend)
    )
}

#[test]
fn replaced_rules_answer_500_guards_fence_matchers_and_a_fix_restores_200() {
    let a = echo_pod("app", "a-pod-1");
    let dir = work_dir("replacement-e2e");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    // A header name Envoy refuses, and a regex with a backreference (not
    // RE2) whose literal prefix is /api/v1/private.
    std::fs::write(
        &file,
        manifests(gw_port, a.port(), "bad header", "/api/v1/private/(a)\\\\1"),
    )
    .expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("Envoy to serve /path", Duration::from_secs(60), || {
        http(gw_port, "x", "/path").is_some_and(|r| r.0 == 200)
    });
    let (status, _, body) = http(gw_port, "x", "/path/bad").expect("bad");
    assert_eq!((status, body.as_str()), (500, BODY));
    let (status, _, body) = http(gw_port, "x", "/path").expect("good");
    assert_eq!(status, 200);
    assert!(body.contains("a-pod-1"), "{body}");
    // The guard: the invalid matcher's traffic never falls through to /api.
    let (status, _, body) = http(gw_port, "x", "/api/v1/private/aa").expect("guarded");
    assert_eq!((status, body.as_str()), (500, BODY));
    assert_eq!(http(gw_port, "x", "/api/v1/public").map(|r| r.0), Some(200));

    // Status says so.
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(
        doc.contains("Replaced Rule (0): spec.rules[0].filters[0].requestHeaderModifier.set[0].name"),
        "{doc}"
    );

    // Fixed without restarting anything: 200 again.
    std::fs::write(
        &file,
        manifests(gw_port, a.port(), "x-good", "/api/v1/private/(a)+"),
    )
    .expect("fix");
    wait_for("the fix to reach Envoy", Duration::from_secs(30), || {
        http(gw_port, "x", "/path/bad").is_some_and(|r| r.0 == 200)
            && http(gw_port, "x", "/api/v1/private/aa").is_some_and(|r| r.0 == 200)
    });
    let _ = std::fs::remove_dir_all(&dir);
}
