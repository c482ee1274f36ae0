//! Where a load runs: parsing hostile nesting needs a large stack (see
//! `loader.rs` `PARSE_STACK_BYTES`), which the loader's own long-lived
//! workers have; it must not start a thread per call (the Kubernetes
//! provider loads every object on its own), and a caller on a small stack
//! must still get a diagnostic, never a crash.

use api::Severity;
use api::loader::{load_str, workers_started};

/// Hostile nesting, as YAML and as JSON, beyond every parser's depth
/// limit and just at it, alone and inside a kind the loader decodes.
fn hostile() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for depth in [63, 64, 65, 200, 10_000] {
        let flow = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        out.push((format!("flow{depth}.yaml"), format!("a: {flow}\n")));
        out.push((format!("flow{depth}.json"), format!("{{\"a\": {flow}}}")));
        let maps = format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth));
        out.push((format!("maps{depth}.json"), maps));
        let mut block = String::new();
        for level in 0..depth.min(2_000) {
            block.push_str(&" ".repeat(level));
            block.push_str("k:\n");
        }
        out.push((format!("block{depth}.yaml"), block));
        // Inside a known kind, where the typed parse meets it.
        out.push((
            format!("route{depth}.yaml"),
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\nspec:\n  rules:\n  - filters: {flow}\n"
            ),
        ));
        let list = format!(
            "apiVersion: v1\nkind: List\nitems: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        out.push((format!("list{depth}.yaml"), list));
    }
    out
}

/// On a thread with a small stack (smaller than tokio's 2 MiB), every
/// hostile input loads to a diagnostic, without a crash.
#[test]
fn hostile_nesting_on_a_small_stack_gives_a_diagnostic() {
    let cases = hostile();
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let mut results = Vec::new();
            for (file, text) in &cases {
                let loaded = load_str(file, text);
                results.push((file.clone(), loaded));
            }
            results
        })
        .expect("thread");
    let results = handle.join().expect("no panic");
    let mut deep_refused = 0;
    for (file, loaded) in &results {
        // Everything deeper than the parsers allow is refused, each with a
        // diagnostic that names its file.
        let deep = ["200", "10000"].iter().any(|d| file.contains(d));
        if deep {
            // An error, or (JSON the YAML reader refuses but serde_json
            // reads) a warning that lines are approximate.
            assert!(
                loaded
                    .diagnostics
                    .iter()
                    .any(|d| matches!(d.severity, Severity::Error | Severity::Warning)),
                "{file}: no diagnostic: {loaded:?}"
            );
            deep_refused += 1;
        }
        for diagnostic in &loaded.diagnostics {
            assert!(
                diagnostic
                    .file
                    .as_deref()
                    .is_some_and(|f| f.starts_with(file.as_str())),
                "{file}: {diagnostic:?}"
            );
        }
    }
    assert!(deep_refused >= 12, "{deep_refused}");
}

/// Loads in a row reuse the loader's worker: not a thread per call.
#[test]
fn loads_do_not_start_a_thread_each() {
    let object = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: ns\nspec:\n  ports:\n  - port: 80\n";
    // Warm: the first load may start the worker.
    assert_eq!(load_str("s.yaml", object).inputs.services.len(), 1);
    let before = workers_started();
    let start = std::time::Instant::now();
    for _ in 0..500 {
        assert_eq!(load_str("s.yaml", object).inputs.services.len(), 1);
    }
    let per_call = start.elapsed() / 500;
    let started = workers_started() - before;
    eprintln!("500 loads: {started} workers started, {per_call:?} per load");
    // The other test of this binary may run a load at the same time, and
    // so hold a worker: at most one more.
    assert!(started <= 2, "{started} loader threads started for 500 loads");
}
