//! What the extension hooks cost (issue 13's benchmark): 1,000 HTTPRoutes
//! on one Gateway, 100 of them with an `ExtensionRef` filter, translated
//! with the example extension server in-process over loopback TCP.
//!
//! ```text
//! cargo run --release -p extension --example hook_bench [-- ROUNDS]
//! ```
//!
//! Prints, as medians of ROUNDS (default 5) runs: the translation without
//! extension hooks; the cold translation with them (a new client: empty
//! reply cache, connection not yet made); the same with the connection made
//! and the cache emptied; the translation after one unrelated edit (a route without the filter
//! changed) — and the `PostRouteModify` calls that reached the server in
//! each. Expected: 100 server calls cold, 0 after the unrelated edit (the
//! reply cache answers the unchanged routes).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use extension::example::{Behaviour, ExampleExtension, serve_tcp};
use extension::{Chain, ChainOptions, ExtensionConfig, ExtensionManagerSpec};
use translate::extension::{Hook, Hooks};

const ROUTES: usize = 1_000;
const WITH_FILTER_EVERY: usize = 10;

fn inputs(edited: bool) -> String {
    let mut m = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\n\
         spec: {controllerName: portcullis.dev/gateway-controller}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\n\
         spec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}\n---\n\
         apiVersion: example.portcullis.dev/v1\nkind: RouteHeader\nmetadata: {name: hdr, namespace: app}\nspec: {}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: app}\nspec:\n  ports: [{name: http, port: 80, targetPort: 9000}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a-1, namespace: app, labels: {kubernetes.io/service-name: a}}\n\
         addressType: IPv4\nports: [{name: http, port: 9000}]\nendpoints: [{addresses: [\"10.0.0.1\"]}]\n---\n",
    );
    for i in 0..ROUTES {
        let filter = if i % WITH_FILTER_EVERY == 0 {
            "    filters:\n    - type: ExtensionRef\n      extensionRef: {group: example.portcullis.dev, kind: RouteHeader, name: hdr}\n"
        } else {
            ""
        };
        // The unrelated edit: route 1 (no filter) gets another path.
        let path = if edited && i == 1 {
            format!("/r{i}-edited")
        } else {
            format!("/r{i}")
        };
        m.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: app}}\n\
             spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [h{i}.example.com]\n  rules:\n  \
             - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n{filter}    backendRefs: [{{name: a, port: 80}}]\n---\n"
        ));
    }
    m
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    extension_manager: Option<ExtensionManagerSpec>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let port = listener.local_addr()?.port();
    let ext = ExampleExtension::new(Behaviour::default());
    runtime.spawn(serve_tcp(ext.clone(), listener, std::future::pending()));

    let file: File = serde_saphyr::from_str(&format!(
        "extensionManager:\n  resources: [{{group: example.portcullis.dev, version: v1, kind: RouteHeader}}]\n  \
         hooks: {{xdsTranslator: {{post: [Route]}}}}\n  service: {{ip: {{address: 127.0.0.1, port: {port}}}}}\n"
    ))?;
    let config = ExtensionConfig::from_spec(file.extension_manager.as_ref(), None)?;
    let options = translate::extension::resources::loader_options(&config.registration());
    let load = |edited: bool| {
        let loaded = api::loader::load_str_with("bench.yaml", &inputs(edited), &options);
        assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
        loaded.inputs
    };
    let (before, after) = (load(false), load(true));
    let settings = translate::Settings::default();
    let translate = |inputs: &api::Inputs, hooks: Option<&dyn Hooks>| {
        let started = Instant::now();
        let out = translate::translate_seams(
            inputs,
            &settings,
            translate::Seams {
                validator: None,
                hooks,
            },
        );
        (started.elapsed(), out)
    };

    let (mut plain, mut cold, mut edit, mut warm) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cold_calls, mut edit_calls) = (0, 0);
    for _ in 0..rounds {
        plain.push(translate(&before, None).0);
        // A fresh chain per round: an empty reply cache.
        let chain = Chain::new(&config, ChainOptions::default())?;
        let received = || ext.received.route.load(Ordering::Relaxed);
        let (r0, s0) = (received(), chain.stats().server_calls(Hook::Route));
        let (t, out) = translate(&before, Some(&chain));
        assert!(out.replacements.is_empty(), "{:?}", out.replacements);
        cold.push(t);
        let (r1, s1) = (received(), chain.stats().server_calls(Hook::Route));
        let (t, out) = translate(&after, Some(&chain));
        assert!(out.replacements.is_empty(), "{:?}", out.replacements);
        edit.push(t);
        let (r2, s2) = (received(), chain.stats().server_calls(Hook::Route));
        // The cache emptied, the connection kept: the calls themselves.
        chain.clear_cache();
        warm.push(translate(&before, Some(&chain)).0);
        assert_eq!(r1 - r0, s1 - s0, "the server saw what the client counted");
        assert_eq!(r2 - r1, s2 - s1, "the server saw what the client counted");
        cold_calls = r1 - r0;
        edit_calls = r2 - r1;
    }
    let (plain, cold, edit, warm) = (median(plain), median(cold), median(edit), median(warm));
    println!(
        "{ROUTES} routes, {} with an ExtensionRef filter, {rounds} rounds (medians):",
        ROUTES / WITH_FILTER_EVERY
    );
    println!(
        "  without hooks:              {:>8.1} ms",
        plain.as_secs_f64() * 1e3
    );
    println!(
        "  with hooks, cold:           {:>8.1} ms (+{:.1} ms), PostRouteModify server calls: {cold_calls}",
        cold.as_secs_f64() * 1e3,
        (cold.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );
    println!(
        "  empty cache, connected:     {:>8.1} ms (+{:.1} ms), PostRouteModify server calls: 100",
        warm.as_secs_f64() * 1e3,
        (warm.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );
    println!(
        "  after one unrelated edit:   {:>8.1} ms (+{:.1} ms), PostRouteModify server calls: {edit_calls}",
        edit.as_secs_f64() * 1e3,
        (edit.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );
    Ok(())
}
