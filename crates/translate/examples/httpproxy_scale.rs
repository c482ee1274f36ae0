//! HTTPProxy at scale (issue 14's benchmark): N roots each including 10
//! children with one route each (10·N routes), 1% of them duplicates;
//! served on one Gateway. Prints the median time of a full translation, of
//! the HTTPProxy stage alone, and of the incremental translator after one
//! child is edited (the edit and its undo alternate; each recomputes one
//! tree), with the load average (this machine is shared).
//!
//! `cargo run --release -p translate --example httpproxy_scale -- 1000 [runs]`

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

use translate::incremental::{Held, Translator};

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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let roots: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let runs: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(9);
    let settings = translate::Settings {
        http_proxy: translate::httpproxy::HttpProxySettings {
            root_namespaces: Vec::new(),
            gateway: Some(("infra".into(), "edge".into())),
        },
        ..Default::default()
    };
    let loaded = api::loader::load_str("scale.yaml", &manifests(roots, false));
    let edited = api::loader::load_str("scale.yaml", &manifests(roots, true));
    let index = translate::index::Index::new(&loaded.inputs);
    let t = Instant::now();
    let analysis = translate::httpproxy::analyze(&loaded.inputs, &index, &settings.http_proxy);
    let tree_ms = ms(t);
    let routes: usize = analysis.virtual_hosts.iter().map(|v| v.entries.len()).sum();

    // Full translations (what `translate -f` does, and `serve` on its first
    // snapshot or after a context change).
    let mut full = Vec::new();
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        out = Some(translate::translate(&loaded.inputs, &settings));
        full.push(ms(t));
    }
    let duplicates: usize = out
        .as_ref()
        .map_or(0, |o| o.http_proxies.iter().map(|p| p.duplicate_routes).sum());

    // One child edited, through the incremental translator (what `serve`
    // does): the edit and its undo alternate, each one child's edit.
    let before: Arc<dyn Held> = Arc::new(loaded.inputs.clone());
    let after: Arc<dyn Held> = Arc::new(edited.inputs.clone());
    let mut translator = Translator::new();
    let _ = translator.translate(Arc::clone(&before), &settings, translate::Seams::default());
    let mut edit = Vec::new();
    let mut recomputed = Vec::new();
    for i in 0..runs * 2 {
        let next = if i % 2 == 0 { &after } else { &before };
        let t = Instant::now();
        let _ = translator.translate(Arc::clone(next), &settings, translate::Seams::default());
        edit.push(ms(t));
        recomputed.push(translator.httpproxy_trees().recomputed.len());
    }
    // The incremental output is the full translation's (checked once here;
    // tests/incremental_httpproxy.rs is the judge).
    let inc = translator.translate(Arc::clone(&after), &settings, translate::Seams::default());
    let same = inc == translate::translate(&edited.inputs, &settings);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "roots={roots} proxies={} routes={routes} duplicates={duplicates} httpproxy_trees_ms={tree_ms:.1} \
         full_translate_ms_median={:.1} one_child_edited_ms_median={:.1} (min {:.1}, max {:.1}, {} runs) \
         trees_recomputed_per_edit={:?} equal_to_full={same} loadavg={}",
        loaded.inputs.http_proxies.len(),
        median(full),
        median(edit.clone()),
        edit.iter().copied().fold(f64::INFINITY, f64::min),
        edit.iter().copied().fold(0.0, f64::max),
        edit.len(),
        {
            let mut r = recomputed;
            r.dedup();
            r
        },
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    );
}
