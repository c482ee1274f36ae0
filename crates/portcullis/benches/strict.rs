//! STRICT mode cost: 1,000 generated routes (4 Gateways, 4 listeners each,
//! 4 rules per route) and one invalid TrafficPolicy, translated with the
//! Envoy-backed validator.
//!
//! - cold: a fresh validator (empty cache);
//! - warm: the same validator after changing one route (a different path in
//!   one rule), repeated with a new change each time (median reported);
//! - the Envoy invocations each needs;
//! - both backends in one run: resident Envoys fed over ADS (the default),
//!   then one `envoy --mode validate` process per call.
//!
//! `cargo bench -p portcullis --bench strict` (needs Envoy). Target (issue
//! 4): ≤ 2 s cold, ≤ 50 ms warm, O(log n) invocations per dirty route
//! configuration.

/// The allocator of the `portcullis` binary, so translation costs the same here.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::time::{Duration, Instant};

use portcullis::validator::{Backend, EnvoyValidator, Options, ValidatorMetrics};

fn translate(text: &str, v: &EnvoyValidator) -> (Duration, translate::Output) {
    let inputs = api::loader::load_str("generated.yaml", text).inputs;
    let t = Instant::now();
    let out = translate::translate_with(&inputs, &translate::Settings::default(), Some(v));
    (t.elapsed(), out)
}

fn main() {
    let routes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let mut text = testkit::generate::manifests(testkit::generate::Shape::with_routes(routes));
    // One invalid TrafficPolicy (a CEL syntax error) on one route: its rules
    // are replaced in-process, everything else must stay clean.
    let victim = format!("route-{}", routes / 2);
    let ns = text
        .split(&format!("name: {victim}\n  namespace: "))
        .nth(1)
        .and_then(|rest| rest.split('\n').next())
        .expect("the generated route's namespace")
        .to_string();
    let policy = [
        "---".to_string(),
        "apiVersion: gateway.portcullis.dev/v1alpha1".into(),
        "kind: TrafficPolicy".into(),
        format!("metadata: {{name: invalid, namespace: {ns}}}"),
        "spec:".into(),
        format!("  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {victim}}}]"),
        "  rbac: {matchExpressions: [\"request.headers['x'] ==\"]}".into(),
    ];
    text.push_str(&policy.join("\n"));
    text.push('\n');
    let inputs = api::loader::load_str("generated.yaml", &text).inputs;
    let t = Instant::now();
    let standard = translate::translate(&inputs, &translate::Settings::default());
    let standard_time = t.elapsed();
    let rcs: usize = standard.gateways.values().map(|g| g.routes.len()).sum();
    let envoy_routes: usize = standard
        .gateways
        .values()
        .flat_map(|g| g.route_configurations())
        .flat_map(|rc| rc.virtual_hosts)
        .map(|vh| vh.routes.len())
        .sum();
    assert!(
        !standard.replacements.is_empty() && standard.policy_failures.iter().any(|f| f.name == "invalid"),
        "the invalid policy must be seen"
    );
    println!(
        "{routes} HTTPRoutes + 1 invalid TrafficPolicy -> {} Gateways, {rcs} route configurations, {envoy_routes} Envoy routes; STANDARD translation {:.1} ms",
        standard.gateways.len(),
        standard_time.as_secs_f64() * 1e3
    );

    for backend in [Backend::Resident, Backend::Process] {
        println!("--- {backend:?} backend");
        run(backend, &bin, &text, &standard);
    }
}

fn run(backend: Backend, bin: &std::path::Path, text: &str, standard: &translate::Output) {
    let options = Options {
        backend,
        ..Options::default()
    };
    let metrics = ValidatorMetrics::default();
    let v =
        EnvoyValidator::new(bin.to_path_buf(), options, metrics.clone()).unwrap_or_else(|e| panic!("{e}"));
    let (cold, out) = translate(text, &v);
    assert_eq!(
        out.gateways, standard.gateways,
        "STRICT changed a clean configuration"
    );
    println!(
        "cold: {:.1} ms, {} Envoy invocations",
        cold.as_secs_f64() * 1e3,
        metrics.calls.get()
    );

    let mut warm = Vec::new();
    let mut plain = Vec::new();
    let mut calls = Vec::new();
    for i in 0..7 {
        // One route changes: a new path in route-<i>'s first rule.
        let changed = text.replacen(
            &format!("name: route-{i}\n"),
            &format!("name: route-{i}\n  labels: {{changed: \"{i}\"}}\n"),
            1,
        );
        let changed = changed.replacen("value: /api/v0}", &format!("value: /api/v0-changed-{i}}}"), 1);
        let inputs = api::loader::load_str("generated.yaml", &changed).inputs;
        let t0 = Instant::now();
        let _ = translate::translate(&inputs, &translate::Settings::default());
        plain.push(t0.elapsed());
        let before = metrics.calls.get();
        let (t, _) = translate(&changed, &v);
        warm.push(t);
        calls.push(metrics.calls.get() - before);
    }
    warm.sort();
    plain.sort();
    println!(
        "STANDARD on the same edits: median {:.1} ms (the STRICT overhead is the difference)",
        plain[plain.len() / 2].as_secs_f64() * 1e3
    );
    println!(
        "warm (one route changed): median {:.1} ms, min {:.1} ms, max {:.1} ms; Envoy invocations per change: {calls:?}",
        warm[warm.len() / 2].as_secs_f64() * 1e3,
        warm[0].as_secs_f64() * 1e3,
        warm[warm.len() - 1].as_secs_f64() * 1e3,
    );
    println!(
        "validator: {} Envoy calls, {} cache hits, {} resident fallbacks in all",
        metrics.calls.get(),
        metrics.cache_hits.get(),
        metrics.fallbacks.get()
    );
}
