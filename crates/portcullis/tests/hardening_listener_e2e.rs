//! Listener hardening end to end, through `portcullis serve`, the real
//! Envoy, a real echo backend and real HTTP:
//! - path normalization: a fenced path (a rule replaced by the 500, Exact
//!   and PathPrefix) answers 500 under every spelling Envoy normalizes to it
//!   (`/./admin`, `/x/../admin`, `//admin`, `/%61dmin`, …), never the
//!   catch-all backend; an escaped slash is redirected to its unescaped
//!   form, which is fenced too; a per-route RBAC policy selects and reads
//!   the normalized path; the backend sees the normalized path;
//! - hostnames with control characters: a tenant's route hostname with a LF
//!   and a listener hostname with a LF do not stop the good tenant's host on
//!   the same listener from serving and from receiving later edits.

mod common;

use std::time::Duration;

use common::{
    echo_pod, free_port, gateway, gateway_with, http, http_listener, service, start, wait_for, work_dir,
};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

fn fenced_manifests(gw_port: u16, backend: u16) -> String {
    format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: Exact, value: /admin}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: "bad header", value: x}}]}}
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /secret}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: "bad header", value: x}}]}}
    backendRefs: [{{name: a, port: 80}}]
  - name: guarded
    matches: [{{path: {{type: PathPrefix, value: /guarded}}}}]
    backendRefs: [{{name: a, port: 80}}]
  - backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: guarded-by-path, namespace: app}}
spec:
  targetRefs:
  - {{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: guarded}}
  rbac:
    action: Allow
    matchExpressions: ["request.path == '/guarded/open'"]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: hosted, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [a.example.com]
  rules:
  - matches: [{{path: {{type: Exact, value: /private}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: "bad header", value: x}}]}}
    backendRefs: [{{name: a, port: 80}}]
---
{svc}
"#,
        gateway = gateway(gw_port),
        svc = service("a", backend)
    )
}

/// The `Location` header of a redirect, as a path on the same authority.
fn location_path(head: &str) -> Option<String> {
    let value = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("location").then(|| v.trim().to_string())
    })?;
    // Absolute (`http://host:port/path`) or a path.
    match value.split_once("://") {
        Some((_, rest)) => rest.find('/').map(|i| rest[i..].to_string()),
        None => Some(value),
    }
}

/// Status and body for `path`, following at most three redirects on the
/// same Gateway (escaped slashes are answered with one).
fn fetch(gw_port: u16, path: &str) -> (u16, String, Vec<String>) {
    let mut path = path.to_string();
    let mut hops = Vec::new();
    for _ in 0..4 {
        let (status, head, body) = http(gw_port, "x", &path).unwrap_or_else(|| panic!("request {path}"));
        if !(300..400).contains(&status) {
            return (status, body, hops);
        }
        let next = location_path(&head).unwrap_or_else(|| panic!("{status} without Location: {head}"));
        hops.push(next.clone());
        path = next;
    }
    panic!("too many redirects: {hops:?}");
}

#[test]
fn fenced_paths_answer_500_under_every_normalization_variant() {
    let a = echo_pod("app", "a-pod-1");
    let dir = work_dir("hardening-paths");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    std::fs::write(
        dir.join("manifests/all.yaml"),
        fenced_manifests(gw_port, a.port()),
    )
    .expect("write");
    let _serve = start(&dir, xds, admin);
    wait_for("Envoy to serve the catch-all", Duration::from_secs(60), || {
        http(gw_port, "x", "/public").is_some_and(|r| r.0 == 200)
    });

    let fenced = [
        "/admin",
        "/./admin",
        "/x/../admin",
        "//admin",
        "///admin",
        "/%61dmin",
        "/adm%69n",
        "/%61%64%6d%69%6e",
        "/admin/../admin",
        "/%2e/admin",
        "/%2E%2E/admin",
        "/admin?x=1",
        // Escaped slashes: redirected to the unescaped path, then fenced.
        "/%2Fadmin",
        "/x/..%2Fadmin",
        "/x%5C..%5Cadmin",
        // The fenced prefix.
        "/secret",
        "/secret/x",
        "//secret//x",
        "/x/../secret/y",
        "/secre%74/a",
        "/a/%2e%2e/secret",
        "/secret%2Fy",
        "/a/%2e%2e%2fsecret",
    ];
    for path in fenced {
        let (status, body, hops) = fetch(gw_port, path);
        assert_eq!(
            (status, body.as_str()),
            (500, BODY),
            "{path} (via {hops:?}) must be fenced, never reach the backend"
        );
    }
    // A trailing dot names the same host: its fence holds (without
    // stripping the dot the request matched only the `*` host, whose
    // catch-all reaches the backend).
    for host in ["a.example.com", "a.example.com.", "A.Example.COM."] {
        let (status, _, body) = http(gw_port, host, "/private").expect("hosted");
        assert_eq!((status, body.as_str()), (500, BODY), "Host: {host}");
    }
    // A per-route policy sees the normalized path: its route is selected by
    // it (every spelling of /guarded/x is denied, never the catch-all's
    // 200) and its RBAC reads it (`request.path == '/guarded/open'`).
    for path in [
        "/guarded/x",
        "/./guarded/x",
        "//guarded/x",
        "/%67uarded/x",
        "/x/../guarded/x",
    ] {
        assert_eq!(fetch(gw_port, path).0, 403, "{path}");
    }
    for path in [
        "/guarded/open",
        "/guarded/./open",
        "/guarded//open",
        "/guarded/x/../%6Fpen",
    ] {
        let (status, body, _) = fetch(gw_port, path);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains("\"path\": \"/guarded/open\""), "{path}: {body}");
    }
    // An escaped slash is a redirect, not a silent rewrite.
    let (status, head, _) = http(gw_port, "x", "/%2Fadmin").expect("escaped");
    assert_eq!(status, 307, "{head}");
    assert_eq!(location_path(&head).as_deref(), Some("/admin"), "{head}");

    // Gateway API paths are case-sensitive: /ADMIN is another path (it
    // reaches the catch-all), as is /admin/ for an Exact match.
    for path in ["/ADMIN", "/admin/"] {
        let (status, body, _) = fetch(gw_port, path);
        assert_eq!(status, 200, "{path}: {body}");
    }
    // The backend sees the normalized path.
    for (sent, seen) in [
        ("/x/./y/../pub", "/x/pub"),
        ("//a//b", "/a/b"),
        ("/%7Euser/%41", "/~user/A"),
    ] {
        let (status, body, _) = fetch(gw_port, sent);
        assert_eq!(status, 200, "{sent}: {body}");
        assert!(
            body.contains(&format!("\"path\": \"{seen}\"")),
            "{sent} must reach the backend as {seen}: {body}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tenants(gw_port: u16, a: u16, b: u16, good_header: &str) -> String {
    format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: good, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: http}}]
  hostnames: [good.example.com]
  rules:
  - filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {{set: [{{name: x-tenant, value: "{good_header}"}}]}}
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: evil, namespace: other}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: http}}]
  hostnames: ["a\nb.example.com"]
  rules:
  - backendRefs: [{{name: b, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: mixed, namespace: other}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: http}}]
  hostnames: [mixed.example.com, "c\rd.example.com"]
  rules:
  - backendRefs: [{{name: b, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: on-bad-listener, namespace: other}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: bad}}]
  rules:
  - backendRefs: [{{name: b, port: 80}}]
---
{svc_a}
---
{svc_b}
"#,
        gateway = gateway_with(&format!(
            r#"{}  - {{name: bad, protocol: HTTP, port: {gw_port}, hostname: "l\nb.example.com", allowedRoutes: {{namespaces: {{from: All}}}}}}
"#,
            http_listener("http", gw_port)
        )),
        svc_a = service("a", a),
        svc_b = service("b", b).replace("namespace: app", "namespace: other"),
    )
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn a_hostname_with_a_control_character_fences_only_its_route_or_listener() {
    let a = echo_pod("app", "a-pod-1");
    let b = echo_pod("other", "b-pod-1");
    let dir = work_dir("hardening-hostnames");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    std::fs::write(&file, tenants(gw_port, a.port(), b.port(), "v1")).expect("write");
    let _serve = start(&dir, xds, admin);
    wait_for("the good tenant to be served", Duration::from_secs(60), || {
        http(gw_port, "good.example.com", "/").is_some_and(|r| r.0 == 200)
    });
    let (_, head, body) = http(gw_port, "good.example.com", "/").expect("good");
    assert_eq!(header(&head, "x-tenant"), Some("v1"), "{head}");
    assert!(body.contains("a-pod-1"), "{body}");
    // The mixed route keeps its valid hostname.
    let (status, _, body) = http(gw_port, "mixed.example.com", "/").expect("mixed");
    assert_eq!(status, 200);
    assert!(body.contains("b-pod-1"), "{body}");
    // The route whose only hostname is invalid is no catch-all: another
    // host does not reach its backend.
    let status = http(gw_port, "elsewhere.example.com", "/").map(|r| r.0);
    assert_eq!(
        status,
        Some(404),
        "an unmatched host must not reach the bad route's backend"
    );

    // The good tenant edits its route after the bad ones arrived: the edit
    // reaches Envoy (no NACK holds the listener's route configuration back).
    std::fs::write(&file, tenants(gw_port, a.port(), b.port(), "v2")).expect("edit");
    wait_for(
        "the good tenant's edit to reach Envoy",
        Duration::from_secs(30),
        || {
            http(gw_port, "good.example.com", "/")
                .is_some_and(|(_, head, _)| header(&head, "x-tenant") == Some("v2"))
        },
    );

    // Status names the offending fields.
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(doc.contains("spec.hostnames[0]"), "{doc}");
    assert!(doc.contains("spec.hostnames[1]"), "{doc}");
    assert!(doc.contains("spec.listeners[1].hostname"), "{doc}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// STRICT with the resident validator (the default backend in `serve`): a
/// virtual host domain Envoy refuses (bypassing STANDARD's hostname check
/// by writing it into the xDS) drops only that domain; the route
/// configuration is not replaced and the other hosts are untouched.
#[test]
fn strict_with_the_resident_validator_drops_only_the_rejected_domain() {
    use portcullis::validator::{Backend, EnvoyValidator, Options, ValidatorMetrics};
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let validator = EnvoyValidator::new(
        envoy,
        Options {
            backend: Backend::Resident,
            parallelism: 2,
            ..Options::default()
        },
        ValidatorMetrics::default(),
    )
    .expect("validator");
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(12));
    let inputs = api::loader::load_str("generated.yaml", &text).inputs;
    let out = translate::translate(&inputs, &translate::Settings::default());
    let (key, gw) = out
        .gateways
        .into_iter()
        .find(|(_, g)| {
            g.routes
                .first()
                .is_some_and(|rc| rc.decode().virtual_hosts.len() >= 2)
        })
        .expect("a Gateway with two virtual hosts");
    let mut gw = std::sync::Arc::unwrap_or_clone(gw);
    let before = gw.routes[0].decode();
    let good = before.virtual_hosts[0].domains[0].clone();
    gw.routes[0].edit(|rc| rc.virtual_hosts[0].domains = vec![good.clone(), "a\nb.example.com".into()]);
    let findings = translate::strict::check_gateway(&key, &mut gw, &validator);
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    assert!(findings.replaced_virtual_hosts.is_empty(), "{findings:?}");
    let dropped: Vec<&str> = findings
        .dropped_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    assert_eq!(dropped, ["a\nb.example.com"], "{findings:?}");
    assert_eq!(gw.routes[0].decode(), before, "only the rejected domain is gone");
}
