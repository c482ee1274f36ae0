//! Extension hooks end to end: `portcullis serve --config` with an
//! `extensionManager`, the real Envoy, echo backends, the example extension
//! server (`extension::example`) in-process, real HTTP (README "Extension
//! hooks"):
//! - (a) a route with an `ExtensionRef` filter of a registered kind gets the
//!   `x-extension-route` header the extension adds;
//! - (b) the extension's listener change is in force: a `BasicAuth` policy
//!   resource targeting one Gateway listener makes it answer 401 without
//!   credentials and 200 with them;
//! - (c) the extension sleeps past the deadline on one route's hook: that
//!   route answers 500, every other route 200, a later edit to another
//!   route still reaches Envoy;
//! - (d) the extension server down at start: its routes answer 500, then
//!   are served once it is up, without restart or edit;
//! - (e) a reply Envoy would refuse (`nack_route`) is fenced (500) and
//!   reported, and Envoy NACKs nothing;
//! - (f) `failOpen: true` serves the unmodified route;
//! - metrics, `/api/status` reachability and `describe route` show it;
//! - `translate --config` runs the same hooks offline, and an invalid
//!   `extensionManager` is a startup error naming the field.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{echo_pod, free_port, gateway, request, service, start_with, wait_for, work_dir};
use extension::example::{Behaviour, ExampleExtension, ROUTE_HEADER, serve_tcp};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";
const GROUP: &str = "example.portcullis.dev";
/// htpasswd for alice / "password" (`{SHA}` = base64 of SHA-1).
const ALICE: &str = "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=";
/// `Authorization: Basic base64("alice:password")`.
const ALICE_BASIC: &str = "Basic YWxpY2U6cGFzc3dvcmQ=";
const WAIT: Duration = Duration::from_secs(60);

/// (status, lowercased head, body) of a GET to the Gateway.
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String, String)> {
    request(port, "x", "GET", path, headers).map(|(s, h, b)| (s, h.to_ascii_lowercase(), b))
}

fn header_of(head: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{ROUTE_HEADER}: ")))
        .map(|v| v.trim().to_string())
}

/// An HTTPRoute of namespace `app` on Gateway `infra/gw` (every listener),
/// one rule for `path`, with the `ExtensionRef` filter when `ext`.
fn route(name: &str, path: &str, ext: bool) -> String {
    let filter = if ext {
        format!(
            "    filters:\n    - type: ExtensionRef\n      extensionRef: {{group: {GROUP}, kind: RouteHeader, name: hdr}}\n"
        )
    } else {
        String::new()
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n\
         {filter}    backendRefs: [{{name: a, port: 80}}]\n---\n"
    )
}

/// The Gateway with listener `http` on `gw` (and `secure` on `secure`,
/// guarded by a BasicAuth policy resource, when given), the extension
/// resource `app/hdr`, service `a`, and `routes`.
fn manifests(gw: u16, secure: Option<u16>, backend: u16, routes: &str) -> String {
    let mut m = gateway(gw);
    if let Some(s) = secure {
        m = m.replace(
            "  - {name: http, ",
            &format!(
                "  - {{name: secure, protocol: HTTP, port: {s}, allowedRoutes: {{namespaces: {{from: All}}}}}}\n  - {{name: http, "
            ),
        );
        m.push_str(&format!(
            "apiVersion: {GROUP}/v1\nkind: BasicAuth\nmetadata: {{name: users, namespace: infra}}\nspec:\n  \
             targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: secure}}]\n  \
             users: [\"{ALICE}\"]\n---\n"
        ));
    }
    m.push_str(&format!(
        "apiVersion: {GROUP}/v1\nkind: RouteHeader\nmetadata: {{name: hdr, namespace: app}}\nspec: {{}}\n---\n"
    ));
    m.push_str(&service("a", backend));
    m.push_str("\n---\n");
    m.push_str(routes);
    m
}

/// The config file: one extension manager at `127.0.0.1:port`.
fn config(dir: &Path, port: u16, hooks: &str, fail_open: bool) -> std::path::PathBuf {
    let path = dir.join("portcullis.yaml");
    std::fs::write(
        &path,
        format!(
            "extensionManager:\n  resources: [{{group: {GROUP}, version: v1, kind: RouteHeader}}]\n  \
             policyResources: [{{group: {GROUP}, version: v1, kind: BasicAuth}}]\n  \
             hooks: {{xdsTranslator: {{post: [{hooks}]}}}}\n  \
             service: {{ip: {{address: 127.0.0.1, port: {port}}}}}\n  \
             timeout: 500ms\n  failOpen: {fail_open}\n"
        ),
    )
    .expect("write config");
    path
}

/// A runtime serving the example extension on `port` until dropped.
struct Extension {
    runtime: tokio::runtime::Runtime,
    ext: ExampleExtension,
}

fn extension(port: u16, behaviour: Behaviour) -> Extension {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let ext = ExampleExtension::new(behaviour);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .expect("bind the extension server");
    runtime.spawn(serve_tcp(ext.clone(), listener, std::future::pending()));
    Extension { runtime, ext }
}

fn admin_get(admin: u16, path: &str) -> String {
    request(admin, "127.0.0.1", "GET", path, &[])
        .map(|(_, _, b)| b)
        .unwrap_or_default()
}

fn status(admin: u16) -> serde_json::Value {
    serde_json::from_str(&admin_get(admin, "/api/status")).unwrap_or_default()
}

/// The status entry of HTTPRoute `app/name`, as text.
fn route_status(doc: &serde_json::Value, name: &str) -> String {
    doc["status"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["kind"] == "HTTPRoute" && s["metadata"]["name"] == name)
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The sum of every sample of metric `name` (Prometheus text).
fn metric_sum(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn managers_reachable(admin: u16) -> Option<bool> {
    status(admin)["extensionManagers"][0]["reachable"].as_bool()
}

#[test]
fn hooks_modify_routes_and_listeners_and_failures_are_fenced_per_route() {
    let dir = work_dir("extension-hooks");
    let (gw, secure, xds, admin, ext_port) =
        (free_port(), free_port(), free_port(), free_port(), free_port());
    let backend = echo_pod("app", "a");
    let _ext = extension(
        ext_port,
        Behaviour {
            sleep_route: Some("httproute/app/slow/".into()),
            sleep: Duration::from_secs(3),
            nack_route: Some("httproute/app/bad/".into()),
        },
    );
    let routes = [
        route("ext", "/ext", true),
        route("slow", "/slow", true),
        route("bad", "/bad", true),
        route("plain", "/plain", false),
    ]
    .concat();
    let manifest = dir.join("manifests/all.yaml");
    std::fs::write(
        &manifest,
        manifests(gw, Some(secure), backend.addr().port(), &routes),
    )
    .expect("write");
    let cfg = config(&dir, ext_port, "Route, HTTPListener", false);
    let _serve = start_with(&dir, xds, admin, &["--config", cfg.to_str().expect("utf-8")], &[]);

    // (a) the extension's header on the route with the ExtensionRef; and
    // (b)'s listener guarded: a listener hook that missed its deadline in
    // an early translation leaves that listener fenced until a retry.
    wait_for(
        "/ext with the extension's header and the guarded listener",
        WAIT,
        || {
            get(gw, "/ext", &[]).is_some_and(|(s, h, _)| s == 200 && header_of(&h).is_some())
                && get(secure, "/plain", &[]).is_some_and(|r| r.0 == 401)
                && get(secure, "/plain", &[("authorization", ALICE_BASIC)]).is_some_and(|r| r.0 == 200)
        },
    );
    let (_, head, _) = get(gw, "/ext", &[]).expect("answer");
    assert_eq!(
        header_of(&head).as_deref(),
        Some("httproute/app/ext/rule/0/match/0")
    );
    // A route without extension resources is not sent to the hook.
    let (s, head, _) = get(gw, "/plain", &[]).expect("answer");
    assert_eq!(s, 200);
    assert_eq!(header_of(&head), None);

    // (c) the route whose hook runs past the deadline answers the 500.
    let (s, _, body) = get(gw, "/slow", &[]).expect("answer");
    assert_eq!((s, body.as_str()), (500, BODY));
    // (e) the route whose reply Envoy would refuse answers the 500 too.
    let (s, _, body) = get(gw, "/bad", &[]).expect("answer");
    assert_eq!((s, body.as_str()), (500, BODY));

    // (b) the listener the BasicAuth policy targets asks for credentials.
    let (s, _, _) = get(secure, "/plain", &[]).expect("answer");
    assert_eq!(s, 401, "no credentials");
    let (s, _, _) = get(secure, "/plain", &[("authorization", ALICE_BASIC)]).expect("answer");
    assert_eq!(s, 200, "alice's credentials");
    let (s, _, _) = get(secure, "/plain", &[("authorization", "Basic YWxpY2U6d3Jvbmc=")]).expect("answer");
    assert_eq!(s, 401, "a wrong password");
    // The other listener is not guarded.
    assert_eq!(get(gw, "/plain", &[]).map(|r| r.0), Some(200));

    // Reported: on the routes' status, in describe, in metrics. Envoy is
    // fed before the status is published.
    wait_for("the slow route's status", Duration::from_secs(10), || {
        route_status(&status(admin), "slow").contains("PostRouteModify")
    });
    let doc = status(admin);
    let slow = route_status(&doc, "slow");
    assert!(
        slow.contains("PostRouteModify exceeded its deadline of 500 ms"),
        "{slow}"
    );
    let bad = route_status(&doc, "bad");
    assert!(bad.contains("PostRouteModify"), "{bad}");
    assert!(!route_status(&doc, "ext").contains("PostRouteModify"));
    // The server answered (the header above); its last call may be the
    // slow one, which the client counts against reachability.
    let managers = &doc["extensionManagers"][0];
    assert!(managers["lastSuccess"].is_string(), "{managers}");
    assert_eq!(managers["address"], format!("127.0.0.1:{ext_port}"), "{managers}");
    let describe = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args([
            "describe",
            "route",
            "app/slow",
            "--admin",
            &format!("127.0.0.1:{admin}"),
        ])
        .output()
        .expect("describe");
    let text = String::from_utf8_lossy(&describe.stdout);
    assert!(describe.status.success(), "{text}");
    assert!(
        text.contains("[extension]") && text.contains("PostRouteModify exceeded its deadline"),
        "{text}"
    );

    // (c) a later edit to another route still reaches Envoy, while the
    // slow route keeps failing.
    let more = format!("{routes}{}", route("later", "/later", false));
    std::fs::write(
        &manifest,
        manifests(gw, Some(secure), backend.addr().port(), &more),
    )
    .expect("write");
    wait_for("the edit served", WAIT, || {
        get(gw, "/later", &[]).is_some_and(|r| r.0 == 200)
    });
    assert_eq!(get(gw, "/slow", &[]).map(|r| r.0), Some(500));
    assert_eq!(get(gw, "/ext", &[]).map(|r| r.0), Some(200));

    let metrics = admin_get(admin, "/metrics");
    let calls = "portcullis_extension_hook_calls_total";
    assert!(
        metric_sum(&metrics, calls, r#"result="deadline""#) >= 1.0,
        "{metrics}"
    );
    assert!(
        metric_sum(
            &metrics,
            calls,
            r#"hook="PostHTTPListenerModify",result="modified""#
        ) >= 1.0
    );
    assert!(
        metric_sum(
            &metrics,
            "portcullis_extension_hook_duration_seconds_count",
            r#"hook="PostRouteModify""#
        ) >= 3.0,
        "{metrics}"
    );
    // (e) Envoy was never sent what it would refuse: it ACKed, never NACKed.
    assert!(
        metric_sum(&metrics, "portcullis_xds_acks_total", "") >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sum(&metrics, "portcullis_xds_nacks_total", ""),
        0.0,
        "{metrics}"
    );
}

#[test]
fn an_extension_server_down_at_start_is_used_once_it_is_up() {
    let dir = work_dir("extension-down");
    let (gw, xds, admin, ext_port) = (free_port(), free_port(), free_port(), free_port());
    let backend = echo_pod("app", "a");
    let routes = [route("ext", "/ext", true), route("plain", "/plain", false)].concat();
    std::fs::write(
        dir.join("manifests/all.yaml"),
        manifests(gw, None, backend.addr().port(), &routes),
    )
    .expect("write");
    let cfg = config(&dir, ext_port, "Route", false);
    let _serve = start_with(&dir, xds, admin, &["--config", cfg.to_str().expect("utf-8")], &[]);

    // (d) down: the route using the extension is fenced, the other serves.
    wait_for("/plain served", WAIT, || {
        get(gw, "/plain", &[]).is_some_and(|r| r.0 == 200)
    });
    let (s, _, body) = get(gw, "/ext", &[]).expect("answer");
    assert_eq!((s, body.as_str()), (500, BODY));
    assert_eq!(managers_reachable(admin), Some(false));
    // Envoy is fed before the status is published.
    wait_for("the route's status", Duration::from_secs(10), || {
        !route_status(&status(admin), "ext").is_empty()
    });
    let ext = route_status(&status(admin), "ext");
    // Refused connections are retried (service.retry) until the deadline:
    // either is reported, on the route that is fenced.
    assert!(
        ext.contains("PostRouteModify: extension server unreachable")
            || ext.contains("PostRouteModify exceeded its deadline"),
        "{ext}"
    );

    // Up: served with the extension's change, without any edit.
    let started = extension(ext_port, Behaviour::default());
    wait_for("/ext served once the extension is up", WAIT, || {
        get(gw, "/ext", &[]).is_some_and(|(s, h, _)| s == 200 && header_of(&h).is_some())
    });
    // Envoy is fed before the status is published.
    wait_for(
        "the extension manager reachable and the route's status clear",
        Duration::from_secs(10),
        || {
            managers_reachable(admin) == Some(true) && {
                let ext = route_status(&status(admin), "ext");
                !ext.is_empty() && !ext.contains("unreachable")
            }
        },
    );
    assert!(
        started
            .ext
            .received
            .route
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    drop(started.runtime);
}

#[test]
fn fail_open_serves_the_unmodified_route() {
    let dir = work_dir("extension-fail-open");
    let (gw, xds, admin, ext_port) = (free_port(), free_port(), free_port(), free_port());
    let backend = echo_pod("app", "a");
    let routes = [route("ext", "/ext", true), route("plain", "/plain", false)].concat();
    std::fs::write(
        dir.join("manifests/all.yaml"),
        manifests(gw, None, backend.addr().port(), &routes),
    )
    .expect("write");
    // No server on `ext_port`: every hook fails, fail-open.
    let cfg = config(&dir, ext_port, "Route", true);
    let _serve = start_with(&dir, xds, admin, &["--config", cfg.to_str().expect("utf-8")], &[]);

    // (f) 200 without the extension's header, and a warning.
    wait_for("/ext served", WAIT, || {
        get(gw, "/ext", &[]).is_some_and(|r| r.0 == 200)
    });
    let (_, head, _) = get(gw, "/ext", &[]).expect("answer");
    assert_eq!(header_of(&head), None);
    let doc = status(admin);
    let warned = doc["diagnostics"].to_string();
    assert!(warned.contains("kept unmodified (failOpen)"), "{warned}");
}

#[test]
fn translate_config_runs_the_hooks_offline_and_invalid_config_is_refused() {
    let dir = work_dir("extension-translate");
    let ext_port = free_port();
    let _ext = extension(ext_port, Behaviour::default());
    let routes = [route("ext", "/ext", true), route("plain", "/plain", false)].concat();
    let input = dir.join("manifests/all.yaml");
    std::fs::write(&input, manifests(8080, None, 9000, &routes)).expect("write");
    let cfg = config(&dir, ext_port, "Route", false);
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["translate", "-o", "json", "-f"])
        .arg(&input)
        .arg("--config")
        .arg(&cfg)
        .output()
        .expect("translate");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains(ROUTE_HEADER),
        "the extension's header in the output"
    );
    // The registered kinds load (no "unknown kind" warning).
    assert!(!text.contains("unknown kind"), "{text}");

    // Without --config the RouteHeader kind is unknown and the route's
    // ExtensionRef is the 500, as before.
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["translate", "-o", "json", "-f"])
        .arg(&input)
        .output()
        .expect("translate");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(ROUTE_HEADER));

    // An invalid extension manager is a startup error naming the field,
    // for translate, get -f and serve alike.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "extensionManager:\n  hooks: {xdsTranslator: {post: [Route]}}\n  service: {fqdn: {hostname: ext.local, port: 70000}}\n",
    )
    .expect("write");
    for args in [
        vec!["translate", "-f"],
        vec!["get", "routes", "-f"],
        vec![
            "serve",
            "--no-envoy",
            "--admin-address",
            "127.0.0.1:0",
            "--xds-address",
            "127.0.0.1:0",
        ],
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        cmd.args(&args);
        if args[0] == "serve" {
            cmd.arg(dir.join("manifests"));
        } else {
            cmd.arg(&input);
        }
        let out = cmd.arg("--config").arg(&bad).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted an invalid config");
        assert!(
            stderr.contains("extensionManager.service.fqdn.port"),
            "{args:?}: {stderr}"
        );
    }
}

/// `describe -f --config` runs the hooks as `serve` does: a listener hook
/// that finds no server fences that listener (`ListenerReplaced` on the
/// Gateway), and a route hook's failure shows on the route.
#[test]
fn describe_offline_shows_failed_hooks_on_gateway_and_route() {
    let dir = work_dir("extension-describe");
    let down = free_port();
    let routes = [route("ext", "/ext", true), route("plain", "/plain", false)].concat();
    let input = dir.join("manifests/all.yaml");
    std::fs::write(&input, manifests(8080, Some(8081), 9000, &routes)).expect("write");
    let cfg = config(&dir, down, "Route, HTTPListener", false);
    let describe = |kind: &str, name: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["describe", kind, name, "-f"])
            .arg(&input)
            .arg("--config")
            .arg(&cfg)
            .output()
            .expect("describe");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let gw = describe("gateway", "infra/gw");
    assert!(
        gw.contains("ListenerReplaced") && gw.contains("PostHTTPListenerModify"),
        "{gw}"
    );
    let r = describe("route", "app/ext");
    assert!(r.contains("[extension]") && r.contains("PostRouteModify"), "{r}");
}
