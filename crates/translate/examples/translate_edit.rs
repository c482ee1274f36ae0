//! One route edited at N routes (default 10,000): the time of a full
//! translation and of an incremental one ([`translate::incremental`]) of the
//! same inputs, in the same run, alternating, over K edits (default 30);
//! prints the medians and the incremental translator's reuse counts, and
//! checks that both outputs are equal at every edit.
//!
//! `cargo run --release -p translate --example translate_edit -- 10000 30`
//! (`PORTCULLIS_THREADS=n` as `translate_scale`). A third argument `inc`
//! runs only the incremental translations (for a profiler: `perf record`
//! sees no full translation; the outputs are then not compared).

/// The allocator of the `portcullis` binary (which runs this library), so
/// the figures are the product's.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::sync::Arc;
use std::time::Instant;

use testkit::generate::{Shape, manifests};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let edits: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let only_incremental = args.next().as_deref() == Some("inc");
    let loaded = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(n)));
    let settings = translate::Settings {
        parallelism: std::env::var("PORTCULLIS_THREADS")
            .ok()
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    };
    let mut inputs = loaded.inputs;
    let mut translator = translate::incremental::Translator::new();
    let t = Instant::now();
    let first = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(first);
    let (mut full, mut inc) = (Vec::new(), Vec::new());
    for e in 0..edits {
        // One route's first path match gets a new value.
        let ri = (e * 7919) % inputs.http_routes.len();
        // Copy on write: the snapshot the translator holds keeps the old
        // route; every other route stays shared between the two.
        let route = Arc::make_mut(&mut inputs.http_routes[ri].object);
        if let Some(path) = route
            .spec
            .rules
            .as_mut()
            .and_then(|r| r.first_mut())
            .and_then(|r| r.matches.as_mut())
            .and_then(|m| m.first_mut())
            .and_then(|m| m.path.as_mut())
        {
            path.value = Some(format!("/edited/{e}"));
        }
        let held = Arc::new(inputs.clone());
        let a = (!only_incremental).then(|| {
            let t = Instant::now();
            let a = translate::translate(&inputs, &settings);
            full.push(t.elapsed().as_secs_f64() * 1e3);
            a
        });
        let t = Instant::now();
        let b = translator.translate(held, &settings, translate::Seams::default());
        inc.push(t.elapsed().as_secs_f64() * 1e3);
        // As `serve` may: the previous snapshot freed after the output is
        // published, not inside the timed translation.
        drop(translator.retire());
        if let Some(a) = a {
            assert!(
                a == b,
                "edit {e}: the incremental output differs from the full one"
            );
        }
        let s = translator.stats();
        assert!(
            s.full.is_none() && s.routes_built == 1,
            "edit {e}: expected one route rebuilt, got {s:?}"
        );
    }
    let s = translator.stats();
    println!(
        "routes={n} edits={edits} first_ms={first_ms:.1} full_median_ms={:.1} incremental_median_ms={:.1} routes_built={} routes_reused={} gateways_reused={} hosts_spliced={} hosts_encoded={}",
        median(&mut full),
        median(&mut inc),
        s.routes_built,
        s.routes_reused,
        s.gateways_reused,
        s.hosts_spliced,
        s.hosts_encoded
    );
}
