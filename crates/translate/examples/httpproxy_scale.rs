//! HTTPProxy at scale (issue 14's benchmark): N roots each including 10
//! children with one route each (10·N routes), 1% of them duplicates;
//! served on one Gateway. Prints the time of a full translation, of the
//! HTTPProxy stage alone, and of the full translation after one child is
//! edited (the whole snapshot is translated again: status is not computed
//! incrementally yet).
//!
//! `cargo run --release -p translate --example httpproxy_scale -- 1000`

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::fmt::Write;
use std::time::Instant;

fn manifests(roots: usize, edited: bool) -> String {
    let mut s = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\nspec: {controllerName: portcullis.dev/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: infra}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, protocol: HTTP, port: 80}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: apps}\nspec:\n  ports: [{name: http, port: 80}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s-1, namespace: apps, labels: {kubernetes.io/service-name: s}}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints: [{addresses: [\"10.0.0.1\"]}]\n",
    );
    for r in 0..roots {
        let _ = write!(
            s,
            "---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: root-{r}, namespace: apps}}\nspec:\n  virtualhost: {{fqdn: host-{r}.example.com}}\n  includes:\n"
        );
        for c in 0..10 {
            // One child in a hundred is included under its sibling's
            // prefix: its route `/c8/x` is a duplicate of the sibling's.
            let prefix = if (r * 10 + c) % 100 == 99 { c - 1 } else { c };
            let _ = writeln!(
                s,
                "  - {{name: child-{r}-{c}, conditions: [{{prefix: /c{prefix}}}]}}"
            );
        }
        for c in 0..10 {
            let route = if edited && r == 0 && c == 0 {
                "/edited"
            } else {
                "/x"
            };
            let _ = write!(
                s,
                "---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: child-{r}-{c}, namespace: apps}}\nspec:\n  routes:\n  - conditions: [{{prefix: {route}}}]\n    services: [{{name: s, port: 80}}]\n"
            );
        }
    }
    s
}

fn main() {
    let roots: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let settings = translate::Settings {
        http_proxy: translate::httpproxy::HttpProxySettings {
            root_namespaces: Vec::new(),
            gateway: Some(("infra".into(), "edge".into())),
        },
        ..Default::default()
    };
    let loaded = api::loader::load_str("scale.yaml", &manifests(roots, false));
    let t = Instant::now();
    let out = translate::translate(&loaded.inputs, &settings);
    let full_ms = t.elapsed().as_secs_f64() * 1e3;
    let index = translate::index::Index::new(&loaded.inputs);
    let t = Instant::now();
    let analysis = translate::httpproxy::analyze(&loaded.inputs, &index, &settings.http_proxy);
    let tree_ms = t.elapsed().as_secs_f64() * 1e3;
    let duplicates: usize = out.http_proxies.iter().map(|p| p.duplicate_routes).sum();
    let routes: usize = analysis.virtual_hosts.iter().map(|v| v.entries.len()).sum();
    let edited = api::loader::load_str("scale.yaml", &manifests(roots, true));
    let t = Instant::now();
    let _ = translate::translate(&edited.inputs, &settings);
    let edit_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "roots={roots} proxies={} routes={routes} duplicates={duplicates} full_translate_ms={full_ms:.1} httpproxy_trees_ms={tree_ms:.1} after_one_edit_ms={edit_ms:.1}",
        loaded.inputs.http_proxies.len()
    );
}
