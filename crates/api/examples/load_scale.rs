//! Loader throughput: `cargo run --release -p api --example load_scale -- FILE.yaml [RUNS]`.
//!
//! Every figure is the median of RUNS, as wall time and as the process's
//! CPU time (what "per core" means on a shared machine: the loader runs on
//! one thread, so CPU time is its time on one core however loaded the
//! machine is).
//!
//! Loads FILE (a YAML stream) with `api::loader::load_str`, the same with
//! typed objects decoded through `serde_json::Value` (the decode before
//! `loader/decode.rs`), and without the fast YAML reader (serde-saphyr
//! reads every document: the old path; runs interleaved), then the same
//! documents written as one JSON `List`, and prints MB/s (median of RUNS,
//! default 3), and the same documents each as its own `.json` file. As reference points it also times a plain parse of the same
//! text into `serde_json::Value` without spans (serde-saphyr for YAML,
//! serde_json for JSON, and the fast YAML reader): what the bare parsers
//! cost; a load minus its bare parse is the typed decode.

use std::time::{Duration, Instant};

/// The allocator of the `portcullis` binary (which runs this library), so
/// the figures are the product's.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// CPU time of the whole process (every thread, finished ones included),
/// from `/proc/self/stat` (user + system, in clock ticks of 10 ms: a run
/// of a few hundred milliseconds is measured to a few percent).
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // Fields after the command name (which may hold spaces).
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Wall and CPU time of each run.
type Runs = Vec<(Duration, Duration)>;

fn report(what: &str, bytes: usize, runs: Runs) {
    let wall = median(runs.iter().map(|r| r.0).collect());
    let cpu = median(runs.iter().map(|r| r.1).collect());
    let mbps = |d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    let all: Vec<String> = runs
        .iter()
        .map(|d| format!("{:.0}/{:.0}", d.0.as_secs_f64() * 1e3, d.1.as_secs_f64() * 1e3))
        .collect();
    println!(
        "{what:<34} wall {:>7.1} ms {:>6.1} MB/s | cpu {:>7.1} ms {:>6.1} MB/s  (runs wall/cpu ms: {})",
        wall.as_secs_f64() * 1e3,
        mbps(wall),
        cpu.as_secs_f64() * 1e3,
        mbps(cpu),
        all.join(" ")
    );
}

fn time<R>(runs: usize, mut f: impl FnMut() -> R) -> Runs {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let cpu = cpu_time();
            let r = f();
            let elapsed = (start.elapsed(), cpu_time().saturating_sub(cpu));
            drop(r);
            elapsed
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: load_scale FILE.yaml [RUNS]")?;
    let runs: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(3);
    let yaml = std::fs::read_to_string(&path)?;
    // LOAD_SCALE_PROFILE=1: only `load_str` of the YAML, RUNS times (for
    // a profiler).
    if std::env::var_os("LOAD_SCALE_PROFILE").is_some() {
        let runs = time(runs, || api::loader::load_str(&path, &yaml));
        report("load YAML", yaml.len(), runs);
        return Ok(());
    }

    // The same documents as one JSON List (one document per `.json` file).
    // (Split by hand: serde-saphyr caps the documents of one stream.)
    let chunks: Vec<&str> = yaml.split("\n---\n").collect();
    let mut docs = Vec::new();
    for chunk in &chunks {
        let doc: serde_json::Value = serde_saphyr::from_str(chunk)?;
        if !doc.is_null() {
            docs.push(doc);
        }
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
    let json = serde_json::to_string_pretty(&list)?;

    // And each document as its own `.json` file (a directory of JSON files).
    let json_files: Vec<String> = docs
        .iter()
        .map(serde_json::to_string_pretty)
        .collect::<Result<_, _>>()?;
    let json_files_bytes: usize = json_files.iter().map(String::len).sum();
    // Written to a directory and read with `load_path`, as `-f DIR` does
    // (one `load_str` per file would time a thread start per call).
    let dir = std::env::temp_dir().join(format!("load_scale_json_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for (index, text) in json_files.iter().enumerate() {
        std::fs::write(dir.join(format!("{index:05}.json")), text)?;
    }
    let load_json_files = || {
        api::loader::load_path(&dir)
            .map(|l| l.inputs.http_routes.len())
            .unwrap_or_default()
    };
    println!(
        "JSON files: {} documents, {json_files_bytes} bytes, {} HTTPRoutes",
        json_files.len(),
        load_json_files()
    );

    let loaded = api::loader::load_str(&path, &yaml);
    let from_json = api::loader::load_str("scale.json", &json);
    println!(
        "{path}: {} bytes YAML, {} bytes JSON; {} HTTPRoutes, {} diagnostics (JSON: {} HTTPRoutes, {} diagnostics)",
        yaml.len(),
        json.len(),
        loaded.inputs.http_routes.len(),
        loaded.diagnostics.len(),
        from_json.inputs.http_routes.len(),
        from_json.diagnostics.len(),
    );

    for d in loaded.diagnostics.iter().chain(&from_json.diagnostics).take(5) {
        println!("  diagnostic: {d:?}");
    }
    let (read, documents) = api::loader::fast_yaml_documents(&yaml);
    println!("fast YAML reader: reads {read} of {documents} documents");
    let old = api::loader::load_str_without_fast_yaml(&path, &yaml);
    if old != loaded {
        return Err("loads differ with and without the fast YAML reader".into());
    }
    if api::loader::load_str_reference_decode(&path, &yaml) != loaded {
        return Err("loads differ with and without the direct decode".into());
    }
    // Interleaved, so that all see the same machine load.
    let (mut fast, mut reference, mut saphyr) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        fast.extend(time(1, || api::loader::load_str(&path, &yaml)));
        reference.extend(time(1, || api::loader::load_str_reference_decode(&path, &yaml)));
        saphyr.extend(time(1, || api::loader::load_str_without_fast_yaml(&path, &yaml)));
    }
    report("load YAML", yaml.len(), fast);
    report("load YAML, decode via Value", yaml.len(), reference);
    report("load YAML, serde-saphyr only", yaml.len(), saphyr);
    report(
        "bare read YAML (fast reader)",
        yaml.len(),
        time(runs, || api::loader::fast_yaml_documents(&yaml)),
    );
    report(
        "load JSON",
        json.len(),
        time(runs, || api::loader::load_str("scale.json", &json)),
    );
    report(
        "load JSON, a file per document",
        json_files_bytes,
        time(runs, load_json_files),
    );
    std::fs::remove_dir_all(&dir)?;
    // One small object at a time, as the Kubernetes provider loads: the
    // cost of a call, and what a thread start with the loader's stack
    // costs (what every call paid before the loader kept its workers).
    let service = r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}"#;
    let calls = 2000;
    let per_call = |runs: Runs| median(runs.iter().map(|r| r.0).collect()) / calls;
    let small = time(runs, || {
        (0..calls)
            .map(|_| api::loader::load_str("svc.json", service).inputs.services.len())
            .sum::<usize>()
    });
    let spawn = time(runs, || {
        (0..calls)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn(|| 1usize)
                    .ok()?
                    .join()
                    .ok()
            })
            .sum::<usize>()
    });
    println!(
        "one small object per call: {:?} per load_str; a 64 MiB-stack thread start + join alone: {:?}",
        per_call(small),
        per_call(spawn)
    );
    report(
        "bare parse YAML (no spans)",
        yaml.len(),
        time(runs, || {
            chunks
                .iter()
                .filter(|c| serde_saphyr::from_str::<serde_json::Value>(c).is_ok())
                .count()
        }),
    );
    report(
        "bare parse JSON (serde_json)",
        json.len(),
        time(runs, || serde_json::from_str::<serde_json::Value>(&json).is_ok()),
    );
    Ok(())
}
