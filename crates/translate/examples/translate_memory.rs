//! Where the memory of one translation goes: jemalloc's count of allocated
//! bytes (the product's allocator) after loading, after translating, and
//! what each part of the output holds (freed as it is dropped).
//!
//! `cargo run --release -p translate --example translate_memory -- 10000`

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use testkit::generate::{Shape, manifests};
use tikv_jemalloc_ctl::{epoch, stats};

fn allocated() -> usize {
    // jemalloc's statistics are a snapshot refreshed by advancing the epoch.
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats.allocated")
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            l.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .unwrap_or(0.0)
        / 1024.0
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let base = allocated();
    let text = manifests(Shape::with_routes(n));
    let loaded = api::loader::load_str("scale.yaml", &text);
    drop(text);
    let inputs = allocated() - base;
    // jemalloc keeps no high-water mark: a thread samples the count every
    // millisecond while the translation runs.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(allocated());
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            peak
        })
    };
    let mut out = translate::translate(&loaded.inputs, &translate::Settings::default());
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let heap_peak = sampler.join().unwrap_or(0).max(allocated()) - base;
    let output = allocated() - base - inputs;
    println!(
        "routes={n} inputs_mib={:.1} output_mib={:.1} heap_peak_mib={:.1} (sampled every ms) peak_rss_mib={:.1}",
        mib(inputs),
        mib(output),
        mib(heap_peak),
        peak_rss_mib()
    );
    let mut part = |name: &str, f: &mut dyn FnMut(&mut translate::Output)| {
        let before = allocated();
        f(&mut out);
        println!("  {name}_mib={:.1}", mib(before - allocated()));
    };
    part("route_configurations", &mut |o| {
        o.gateways
            .values_mut()
            .for_each(|g| std::sync::Arc::make_mut(g).routes = Vec::new())
    });
    part("listeners", &mut |o| {
        o.gateways
            .values_mut()
            .for_each(|g| std::sync::Arc::make_mut(g).listeners = Vec::new())
    });
    part("clusters", &mut |o| {
        o.gateways
            .values_mut()
            .for_each(|g| std::sync::Arc::make_mut(g).clusters = Vec::new())
    });
    part("endpoints", &mut |o| {
        o.gateways
            .values_mut()
            .for_each(|g| std::sync::Arc::make_mut(g).endpoints = Vec::new())
    });
    part("status", &mut |o| o.status = Vec::new());
    part("diagnostics", &mut |o| o.diagnostics = Vec::new());
    part("rest", &mut |o| *o = translate::Output::default());
}
