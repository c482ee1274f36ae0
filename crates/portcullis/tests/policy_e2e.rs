//! TrafficPolicy end to end through the real Envoy (STANDARD mode), with
//! echo backends, one of them acting as the HTTP ext_authz server:
//! - (a) rule `/path/bad` reached by an invalid policy (CEL syntax error)
//!   answers 500 with the replacement body; rule `/path` answers 200 and
//!   carries its valid policy's header edits;
//! - (b) a route protected by `extAuth` whose GatewayExtension is missing
//!   answers 500, never 200;
//! - extAuth with a real auth server: allowed (200) and denied (403);
//! - rbac (CEL) allows and denies; local rate limit answers 429; CORS
//!   answers preflights;
//! - (e) fixing the policy and creating the GatewayExtension restore 200
//!   without restarting anything;
//! - status and metrics show the invalid policy.

mod common;

use std::time::Duration;

use common::{echo_pod, free_port, gateway, http, service, start, wait_for, work_dir};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

/// (status, head lowercased, body) of a request with extra header lines.
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String, String)> {
    common::request(port, "x", method, path, headers)
        .map(|(s, head, body)| (s, head.to_ascii_lowercase(), body))
}

fn route(name: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n{rules}\n---\n"
    )
}

fn policy(name: &str, target: &str, body: &str) -> String {
    format!(
        "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  targetRefs: [{target}]\n{body}\n---\n"
    )
}

fn manifests(gw_port: u16, backend: u16, auth: u16, cel: &str, with_absent: bool) -> String {
    let to = "backendRefs: [{name: a, port: 80}]";
    let mut m = format!(
        r#"{gateway}{a}
---
{authz}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: auth, namespace: app}}
spec:
  type: ExtAuth
  extAuth:
    httpService: {{backendRef: {{name: authz, port: 80}}}}
    timeout: 1s
---
"#,
        gateway = gateway(gw_port),
        a = service("a", backend),
        authz = service("authz", auth),
    );
    if with_absent {
        m.push_str(
            "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: GatewayExtension\nmetadata: {name: absent, namespace: app}\n\
             spec:\n  type: ExtAuth\n  extAuth:\n    httpService: {backendRef: {name: authz, port: 80}}\n---\n",
        );
    }
    let kind = "group: gateway.networking.k8s.io, kind: HTTPRoute";
    m.push_str(&route(
        "r",
        &format!(
            "  - {{name: bad, matches: [{{path: {{value: /path/bad}}}}], {to}}}\n  - {{name: good, matches: [{{path: {{value: /path}}}}], {to}}}"
        ),
    ));
    m.push_str(&policy(
        "bad-cel",
        &format!("{{{kind}, name: r, sectionName: bad}}"),
        &format!("  rbac:\n    matchExpressions: [\"{cel}\"]"),
    ));
    m.push_str(&policy(
        "headers",
        &format!("{{{kind}, name: r, sectionName: good}}"),
        "  transformation:\n    request:\n      set: [{name: x-client-user, value: \"%REQ(x-user)%\"}]\n  headerModifiers:\n    response:\n      set: [{name: x-policy, value: \"100% yes\"}]",
    ));
    m.push_str(&route(
        "guarded",
        &format!(
            "  - {{matches: [{{path: {{value: /protected}}}}, {{path: {{value: /status/403}}}}], {to}}}"
        ),
    ));
    m.push_str(&policy(
        "auth",
        &format!("{{{kind}, name: guarded}}"),
        "  extAuth: {extensionRef: {name: auth}}",
    ));
    m.push_str(&route(
        "missing-auth",
        &format!("  - {{matches: [{{path: {{value: /missing}}}}], {to}}}"),
    ));
    m.push_str(&policy(
        "needs-absent",
        &format!("{{{kind}, name: missing-auth}}"),
        "  extAuth: {extensionRef: {name: absent}}",
    ));
    m.push_str(&route(
        "admin",
        &format!("  - {{matches: [{{path: {{value: /admin}}}}], {to}}}"),
    ));
    m.push_str(&policy(
        "admins-only",
        &format!("{{{kind}, name: admin}}"),
        "  rbac:\n    action: Allow\n    matchExpressions: [\"request.headers['x-user'] == 'admin'\"]",
    ));
    m.push_str(&route(
        "limited",
        &format!("  - {{matches: [{{path: {{value: /limited}}}}], {to}}}"),
    ));
    m.push_str(&policy(
        "two-per-minute",
        &format!("{{{kind}, name: limited}}"),
        "  localRateLimit: {tokenBucket: {maxTokens: 2, fillInterval: 60s}}",
    ));
    m.push_str(&route(
        "cors",
        &format!("  - {{matches: [{{path: {{value: /cors}}}}], {to}}}"),
    ));
    m.push_str(&policy(
        "cors",
        &format!("{{{kind}, name: cors}}"),
        "  cors: {allowOrigins: [\"https://app.example\"], allowMethods: [GET, POST], maxAge: 60}",
    ));
    m
}

#[test]
fn policies_are_enforced_invalid_ones_fail_closed_and_fixes_apply_live() {
    let spawn = |pod: &str| echo_pod("app", pod);
    let (a, authz) = (spawn("a-pod-1"), spawn("authz-pod-1"));
    let dir = work_dir("policy-e2e");
    let (gw, xds, admin) = (free_port(), free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    let broken_cel = "request.headers['x-user'] == 'admin' &&";
    std::fs::write(&file, manifests(gw, a.port(), authz.port(), broken_cel, false)).expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("Envoy to serve /path", Duration::from_secs(60), || {
        http(gw, "x", "/path").is_some_and(|r| r.0 == 200)
    });
    // (a) The invalid policy's rule answers the replacement 500; the
    // neighbour serves, with its own policy's header edits.
    let (status, _, body) = http(gw, "x", "/path/bad").expect("bad");
    assert_eq!((status, body.as_str()), (500, BODY));
    let (status, head, body) = request(gw, "GET", "/path", &[("x-user", "carol")]).expect("good");
    assert_eq!(status, 200);
    assert!(
        body.contains("a-pod-1") && body.contains("\"X-Client-User\": [\n   \"carol\""),
        "{body}"
    );
    assert!(head.contains("x-policy: 100% yes"), "{head}");

    // (b) extAuth whose GatewayExtension is missing: 500, never 200.
    for _ in 0..5 {
        let (status, _, body) = http(gw, "x", "/missing").expect("missing");
        assert_eq!((status, body.as_str()), (500, BODY));
    }
    // extAuth with a real auth server: it allows /protected, denies /status/403.
    assert_eq!(http(gw, "x", "/protected").map(|r| r.0), Some(200));
    assert_eq!(http(gw, "x", "/status/403").map(|r| r.0), Some(403));

    // rbac (CEL): only x-user: admin passes.
    assert_eq!(request(gw, "GET", "/admin", &[]).map(|r| r.0), Some(403));
    assert_eq!(
        request(gw, "GET", "/admin", &[("x-user", "mallory")]).map(|r| r.0),
        Some(403)
    );
    assert_eq!(
        request(gw, "GET", "/admin", &[("x-user", "admin")]).map(|r| r.0),
        Some(200)
    );

    // Local rate limit: two tokens a minute.
    let codes: Vec<u16> = (0..3)
        .filter_map(|_| http(gw, "x", "/limited").map(|r| r.0))
        .collect();
    assert_eq!(codes, vec![200, 200, 429]);

    // CORS preflight.
    let (status, head, _) = request(
        gw,
        "OPTIONS",
        "/cors",
        &[
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
        ],
    )
    .expect("preflight");
    assert_eq!(status, 200);
    assert!(
        head.contains("access-control-allow-origin: https://app.example"),
        "{head}"
    );
    assert!(head.contains("access-control-allow-methods: get,post"), "{head}");
    let (_, head, _) = request(gw, "GET", "/cors", &[("origin", "https://evil.example")]).expect("cors");
    assert!(!head.contains("access-control-allow-origin"), "{head}");

    // Status and metrics show the invalid policy.
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(
        doc.contains(
            "TrafficPolicy app/bad-cel is invalid: spec.rbac.matchExpressions[0]: invalid CEL at column"
        ),
        "{doc}"
    );
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("portcullis_policy_validation_failures_total")
                && l.contains("name=\"bad-cel\"")
                && l.contains("reason=\"Invalid\"")),
        "{metrics}"
    );

    // (e) Fix the CEL and create the GatewayExtension: 200, no restart.
    std::fs::write(
        &file,
        manifests(
            gw,
            a.port(),
            authz.port(),
            "request.path.startsWith('/path')",
            true,
        ),
    )
    .expect("fix");
    wait_for("the fix to reach Envoy", Duration::from_secs(30), || {
        http(gw, "x", "/path/bad").is_some_and(|r| r.0 == 200)
            && http(gw, "x", "/missing").is_some_and(|r| r.0 == 200)
    });
    let _ = std::fs::remove_dir_all(&dir);
}
