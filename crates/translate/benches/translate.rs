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
}

criterion_group!(benches, bench);
criterion_main!(benches);
