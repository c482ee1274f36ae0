//! Full translation (inputs already loaded → xDS + status) of generated
//! configurations with 100, 1,000 and 10,000 HTTPRoutes (4 rules each,
//! 4 Gateways × 4 listeners). Target: 10,000 routes ≤ 150 ms.

/// The allocator of the `portcullis` binary (which runs this library), so
/// the figures are the product's.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use testkit::generate::{Shape, manifests};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("translate");
    group.sample_size(10);
    for n in [100usize, 1_000, 10_000] {
        let loaded = api::loader::load_str("bench.yaml", &manifests(Shape::with_routes(n)));
        assert!(
            loaded.diagnostics.is_empty(),
            "generated input has diagnostics: {:?}",
            loaded.diagnostics.first()
        );
        let settings = translate::Settings::default();
        group.bench_with_input(BenchmarkId::from_parameter(n), &loaded.inputs, |b, inputs| {
            b.iter(|| translate::translate(inputs, &settings))
        });
    }
    group.finish();
    // The same workload with a TrafficPolicy on every Gateway and on every
    // listener (issue: within 10% of the plain one: higher-level policies
    // are placed once per scope, not copied into routes).
    let mut group = c.benchmark_group("translate-scoped");
    group.sample_size(10);
    for n in [10_000usize] {
        let shape = Shape::with_routes(n);
        let mut text = manifests(shape);
        for g in 0..shape.gateways {
            text.push_str(&format!(
                "---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: gw-{g}, namespace: infra}}\n\
                 spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw-{g}}}]\n\
                 \x20 headerModifiers: {{response: {{set: [{{name: x-gateway, value: gw-{g}}}]}}}}\n\
                 \x20 cors: {{allowOrigins: [\"https://app.example.com\"]}}\n\
                 \x20 localRateLimit: {{tokenBucket: {{maxTokens: 100, tokensPerFill: 100, fillInterval: 1s}}}}\n"
            ));
            for l in 0..shape.listeners_per_gateway {
                text.push_str(&format!(
                    "---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: gw-{g}-l{l}, namespace: infra}}\n\
                     spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw-{g}, sectionName: l{l}}}]\n\
                     \x20 headerModifiers: {{request: {{set: [{{name: x-listener, value: l{l}}}]}}}}\n\
                     \x20 rbac: {{action: Allow, matchExpressions: [\"request.path.startsWith('/')\"]}}\n"
                ));
            }
        }
        let loaded = api::loader::load_str("bench.yaml", &text);
        assert!(
            loaded.diagnostics.is_empty(),
            "generated input has diagnostics: {:?}",
            loaded.diagnostics.first()
        );
        let settings = translate::Settings::default();
        let out = translate::translate(&loaded.inputs, &settings);
        assert!(
            out.scope_replacements.is_empty()
                && !out.diagnostics.iter().any(|d| d.severity == api::Severity::Error),
            "scoped policies must all apply: {:?}",
            out.diagnostics.first()
        );
        group.bench_with_input(BenchmarkId::from_parameter(n), &loaded.inputs, |b, inputs| {
            b.iter(|| translate::translate(inputs, &settings))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
