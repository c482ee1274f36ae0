//! Translates a generated configuration of N HTTPRoutes once and prints
//! the time of each stage and the process's peak memory (VmHWM), which
//! includes the generated YAML text and the loaded inputs.
//!
//! `cargo run --release -p translate --example translate_scale -- 10000`
//! (`PORTCULLIS_REPEAT=k` translates k more times first; `PORTCULLIS_THREADS=n`
//! sets the rule-building threads, default one per core;
//! `PORTCULLIS_SCALE_WRITE=FILE` also writes the generated manifests there,
//! for measuring `portcullis translate -f FILE` on the same workload)

/// The allocator of the `portcullis` binary (which runs this library), so
/// the figures are the product's.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::time::Instant;

use testkit::generate::{Shape, manifests};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let t = Instant::now();
    let text = manifests(Shape::with_routes(n));
    let gen_ms = t.elapsed().as_secs_f64() * 1e3;
    if let Some(path) = std::env::var_os("PORTCULLIS_SCALE_WRITE") {
        std::fs::write(&path, &text).expect("write the generated manifests");
    }
    let t = Instant::now();
    let loaded = api::loader::load_str("scale.yaml", &text);
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(text);
    let after_load = peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
    let rss_now = || -> f64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            })
            .unwrap_or(0.0)
            / 1024.0
    };
    let rss_before = rss_now();
    // PORTCULLIS_REPEAT=k translates k extra times first (for profilers).
    let repeat: usize = std::env::var("PORTCULLIS_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // PORTCULLIS_THREADS=n builds rules on n threads (default: one).
    let settings = translate::Settings {
        parallelism: std::env::var("PORTCULLIS_THREADS")
            .ok()
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    };
    for _ in 0..repeat {
        drop(translate::translate(&loaded.inputs, &settings));
    }
    let t = Instant::now();
    let out = translate::translate(&loaded.inputs, &settings);
    let translate_ms = t.elapsed().as_secs_f64() * 1e3;
    let routes: usize = out
        .gateways
        .values()
        .map(|g| {
            g.route_configurations()
                .iter()
                .map(|r| r.virtual_hosts.iter().map(|v| v.routes.len()).sum::<usize>())
                .sum::<usize>()
        })
        .sum();
    let rss_after = rss_now();
    println!(
        "peak_after_load_mib={after_load:.1} rss_before_translate_mib={rss_before:.1} rss_after_translate_mib={rss_after:.1}"
    );
    println!(
        "routes={n} envoy_routes={routes} diagnostics={} generate_ms={gen_ms:.1} load_ms={load_ms:.1} translate_ms={translate_ms:.1} peak_rss_mib={:.1}",
        loaded.diagnostics.len() + out.diagnostics.len(),
        peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
}
