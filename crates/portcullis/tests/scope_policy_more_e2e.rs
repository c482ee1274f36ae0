//! Listener-scope TrafficPolicies and ListenerSet listeners, end to end
//! through `portcullis serve`, the real Envoy, echo backends and real HTTP
//! (README, "TrafficPolicy" and "ListenerSet"; ARCHITECTURE.md §3,
//! `policy/scope.rs`, `listener_set.rs`):
//! - (e) a listener policy with extAuth whose GatewayExtension does not
//!   exist yet fences that listener's host with the 500 (fail closed, even
//!   for a request the auth server would allow), while the neighbour
//!   listener serves; creating the GatewayExtension (pointing at a real
//!   ext_authz HTTP server on loopback, started here) turns the 500 into
//!   real authorization — allowed 200 from the echo backend, denied 403 —
//!   without a restart;
//! - (f) listener isolation across ListenerSets: a route on a ListenerSet
//!   listener `*.example.com` never answers `bar.foo.example.com` while the
//!   Gateway's listener `*.foo.example.com` exists on the same port (nor
//!   `baz.bar.example.com` while another ListenerSet's `*.bar.example.com`
//!   does); an invalid policy on one ListenerSet listener fences only that
//!   listener's host (500 and the body) while its neighbours answer 200,
//!   and the ListenerSet's listener status and the scope metric say why.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    GATEWAY_CLASS, echo_pod, free_port, gateway_with, host_listener, http, loopback, request, service_at,
    start, wait_for, work_dir,
};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

/// A Service `ns/name` whose one endpoint is `127.0.0.1:port`.
fn service_in(ns: &str, name: &str, port: u16) -> String {
    format!("{}\n---\n", service_at(ns, name, loopback(port)))
}

/// An HTTPRoute `app/name` to Service `app/backend`, with `parent` (a flow
/// mapping) as its one parentRef.
fn route(name: &str, parent: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  parentRefs: [{parent}]\n  rules:\n  - backendRefs: [{{name: {backend}, port: 80}}]\n---\n"
    )
}

/// A real ext_authz HTTP service: allows a request carrying `x-allow: yes`
/// (200), denies any other (403); counts the checks it answered.
fn authz_server() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind authz");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let checks = Arc::new(AtomicUsize::new(0));
    let counted = checks.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::Relaxed);
                    if headers.get("x-allow").is_some_and(|v| v == "yes") {
                        axum::http::StatusCode::OK
                    } else {
                        axum::http::StatusCode::FORBIDDEN
                    }
                }
            });
            let _ = axum::serve(listener, app).await;
        });
    });
    (port, checks)
}

/// The first object anywhere in `doc` with this kind and metadata.name.
fn find_object<'a>(doc: &'a serde_json::Value, kind: &str, name: &str) -> Option<&'a serde_json::Value> {
    match doc {
        serde_json::Value::Object(m) => {
            if m.get("kind").is_some_and(|k| k == kind) && doc["metadata"]["name"] == name {
                return Some(doc);
            }
            m.values().find_map(|v| find_object(v, kind, name))
        }
        serde_json::Value::Array(a) => a.iter().find_map(|v| find_object(v, kind, name)),
        _ => None,
    }
}

fn metric_lines(admin: u16, prefix: &str) -> Vec<String> {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

fn ext_auth_manifests(port: u16, web: u16, authz: u16, with_extension: bool) -> String {
    let mut m = format!(
        r#"{gateway}{web}{authz}{a}{b}apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: needs-auth, namespace: infra}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}}]
  extAuth: {{extensionRef: {{name: auth}}}}
---
"#,
        gateway = gateway_with(&format!(
            "{}{}",
            host_listener("a", port),
            host_listener("b", port)
        )),
        web = service_in("app", "web", web),
        authz = service_in("infra", "authz", authz),
        a = route("a", "{name: gw, namespace: infra, sectionName: a}", "web"),
        b = route("b", "{name: gw, namespace: infra, sectionName: b}", "web"),
    );
    if with_extension {
        m.push_str(
            "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: GatewayExtension\nmetadata: {name: auth, namespace: infra}\n\
             spec:\n  type: ExtAuth\n  extAuth:\n    httpService: {backendRef: {name: authz, port: 80}}\n\
             \x20   allowedHeaders: [x-allow]\n    timeout: 2s\n---\n",
        );
    }
    m
}

#[test]
fn e_listener_ext_auth_fails_closed_until_its_provider_exists_then_authorizes() {
    let web = echo_pod("app", "web-pod-1");
    let (authz, checks) = authz_server();
    let dir = work_dir("scope-more-extauth");
    let (port, xds, admin) = (free_port(), free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    std::fs::write(&file, ext_auth_manifests(port, web.port(), authz, false)).expect("write");
    let _serve = start(&dir, xds, admin);

    wait_for("b to serve and a to be fenced", Duration::from_secs(60), || {
        http(port, "b.example.com", "/").is_some_and(|r| r.0 == 200)
            && http(port, "a.example.com", "/").is_some_and(|r| r.0 == 500)
    });
    // Fail closed: even a request the auth server would allow meets the 500.
    for allow in [&[("x-allow", "yes")][..], &[]] {
        let (status, _, body) = request(port, "a.example.com", "GET", "/", allow).expect("a");
        assert_eq!((status, body.as_str()), (500, BODY), "{allow:?}");
    }
    let (status, _, body) = http(port, "b.example.com", "/").expect("b");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("web-pod-1"), "{body}");
    assert_eq!(checks.load(Ordering::Relaxed), 0, "no provider, no check");
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(doc.contains("ListenerReplaced"), "{doc}");
    assert!(doc.contains("PartiallyValid"), "{doc}");
    assert!(
        metric_lines(admin, "portcullis_scope_replacements_current{")
            .iter()
            .any(|l| l.contains("scope=\"virtual_host\"")
                && l.contains("listener=\"a\"")
                && l.contains("error_class=\"referential\"")
                && l.ends_with(" 1")),
        "{:?}",
        metric_lines(admin, "portcullis_scope_replacements_current{")
    );

    // The provider appears: real authorization, without a restart.
    let pid = _serve.child.id();
    std::fs::write(&file, ext_auth_manifests(port, web.port(), authz, true)).expect("write");
    wait_for("a to be authorized", Duration::from_secs(30), || {
        request(port, "a.example.com", "GET", "/", &[("x-allow", "yes")]).is_some_and(|r| r.0 == 200)
    });
    let (status, _, body) =
        request(port, "a.example.com", "GET", "/", &[("x-allow", "yes")]).expect("allowed");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("web-pod-1"), "{body}");
    let before = checks.load(Ordering::Relaxed);
    assert!(before > 0, "the auth server was never asked");
    for denied in [&[("x-allow", "no")][..], &[]] {
        let (status, _, body) = request(port, "a.example.com", "GET", "/", denied).expect("denied");
        assert_eq!(status, 403, "{denied:?}: {body}");
        assert!(!body.contains("web-pod-1"), "{body}");
    }
    assert!(
        checks.load(Ordering::Relaxed) >= before + 2,
        "each request is checked"
    );
    // b has no auth; the fence is gone from status and metrics.
    let (status, _, _) = http(port, "b.example.com", "/").expect("b");
    assert_eq!(status, 200);
    let current = metric_lines(admin, "portcullis_scope_replacements_current{");
    assert!(current.iter().all(|l| l.ends_with(" 0")), "{current:?}");
    assert_eq!(_serve.child.id(), pid);
    let _ = std::fs::remove_dir_all(&dir);
}

fn listener_set_manifests(port: u16, pods: &[(&str, u16)], invalid_on_n: bool) -> String {
    let mut m = format!(
        r#"{GATEWAY_CLASS}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  allowedListeners:
    namespaces: {{from: Same}}
  listeners:
  - {{name: foo, protocol: HTTP, port: {port}, hostname: "*.foo.example.com", allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls, namespace: infra}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: wild, protocol: HTTP, port: {port}, hostname: "*.example.com", allowedRoutes: {{namespaces: {{from: All}}}}}}
  - {{name: n, protocol: HTTP, port: {port}, hostname: n.example.com, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls-bar, namespace: infra}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: bar, protocol: HTTP, port: {port}, hostname: "*.bar.example.com", allowedRoutes: {{namespaces: {{from: All}}}}}}
---
"#
    );
    for (name, p) in pods {
        m.push_str(&service_in("app", name, *p));
    }
    let set = |set: &str, section: &str| {
        format!("{{kind: ListenerSet, name: {set}, namespace: infra, sectionName: {section}}}")
    };
    m.push_str(&route("wild", &set("ls", "wild"), "wild"));
    m.push_str(&route("n", &set("ls", "n"), "n"));
    m.push_str(&route("bar", &set("ls-bar", "bar"), "bar"));
    m.push_str(&route(
        "foo",
        "{name: gw, namespace: infra, sectionName: foo}",
        "foo",
    ));
    if invalid_on_n {
        m.push_str(
            "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {name: on-n, namespace: infra}\n\
             spec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: ListenerSet, name: ls, sectionName: n}]\n\
             \x20 rbac:\n    matchExpressions: [\"request.headers['x-user'] == 'admin' &&\"]\n---\n",
        );
    }
    m
}

#[test]
fn f_listener_set_listeners_are_isolated_and_fenced_alone() {
    let names = ["wild", "n", "bar", "foo"];
    let echoes: Vec<echo::Handle> = names
        .iter()
        .map(|n| echo_pod("app", &format!("{n}-pod")))
        .collect();
    let pods: Vec<(&str, u16)> = names
        .iter()
        .copied()
        .zip(echoes.iter().map(|e| e.port()))
        .collect();
    let dir = work_dir("scope-more-listenerset");
    let (port, xds, admin) = (free_port(), free_port(), free_port());
    let file = dir.join("manifests/all.yaml");
    std::fs::write(&file, listener_set_manifests(port, &pods, false)).expect("write");
    let _serve = start(&dir, xds, admin);

    // Which pod answers each host: the most specific listener's route only.
    let served_by = |host: &str| http(port, host, "/").filter(|r| r.0 == 200).map(|r| r.2);
    wait_for("every listener to serve", Duration::from_secs(60), || {
        [
            "x.example.com",
            "n.example.com",
            "baz.bar.example.com",
            "bar.foo.example.com",
        ]
        .iter()
        .all(|h| served_by(h).is_some())
    });
    for (host, pod) in [
        ("x.example.com", "wild-pod"),
        ("n.example.com", "n-pod"),
        ("bar.foo.example.com", "foo-pod"),
        ("deep.bar.foo.example.com", "foo-pod"),
        ("baz.bar.example.com", "bar-pod"),
    ] {
        let body = served_by(host).unwrap_or_else(|| panic!("{host} not served"));
        assert!(body.contains(pod), "{host}: {body}");
        for other in names.iter().map(|n| format!("{n}-pod")).filter(|p| p != pod) {
            assert!(!body.contains(&other), "{host} answered by {other}: {body}");
        }
    }

    // An invalid policy on ListenerSet listener n: only n.example.com is
    // fenced; its neighbours on the same port keep serving.
    std::fs::write(&file, listener_set_manifests(port, &pods, true)).expect("write");
    wait_for("n fenced", Duration::from_secs(30), || {
        http(port, "n.example.com", "/").is_some_and(|r| r.0 == 500)
    });
    for path in ["/", "/anything", "//x", "/./y"] {
        let (status, _, body) = http(port, "n.example.com", path).expect("n");
        assert_eq!((status, body.as_str()), (500, BODY), "{path}");
    }
    for (host, pod) in [
        ("x.example.com", "wild-pod"),
        ("bar.foo.example.com", "foo-pod"),
        ("baz.bar.example.com", "bar-pod"),
    ] {
        let body = served_by(host).unwrap_or_else(|| panic!("{host} not served"));
        assert!(body.contains(pod), "{host}: {body}");
    }
    let (_, _, doc) = http(admin, "admin", "/api/status").expect("status");
    let doc: serde_json::Value = serde_json::from_str(&doc).expect("status json");
    // On the ListenerSet's listener n, not on a Gateway listener.
    let set = find_object(&doc, "ListenerSet", "ls").unwrap_or_else(|| panic!("no ListenerSet ls in {doc}"));
    let listener = set["status"]["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == "n"))
        .unwrap_or_else(|| panic!("no listener n in {set}"));
    let accepted = listener["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Accepted"))
        .unwrap_or_else(|| panic!("no Accepted in {listener}"));
    assert_eq!(accepted["reason"], "ListenerReplaced", "{listener}");
    assert!(
        accepted["message"]
            .as_str()
            .is_some_and(|m| m.contains("TrafficPolicy infra/on-n is invalid")),
        "{listener}"
    );
    let gw = find_object(&doc, "Gateway", "gw").unwrap_or_else(|| panic!("no Gateway gw in {doc}"));
    assert!(!gw.to_string().contains("ListenerReplaced"), "{gw}");
    let current = metric_lines(admin, "portcullis_scope_replacements_current{");
    assert!(
        current.iter().any(|l| l.contains("scope=\"virtual_host\"")
            && l.contains("listener=\"infra/ls/n\"")
            && l.ends_with(" 1")),
        "{current:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
