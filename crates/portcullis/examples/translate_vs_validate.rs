//! Issue 15's first target: `portcullis translate -f DIR -o json` of the
//! 10,000-route workload against the real Envoy's `--mode validate` of the
//! same output as JSON bootstraps, both as release processes, alternating,
//! medians of several runs; and the translate process's peak RSS.
//!
//! ```sh
//! cargo build --release -p portcullis --bin portcullis --example translate_vs_validate
//! ENVOY_BIN=/path/to/envoy target/release/examples/translate_vs_validate [ROUTES] [RUNS]
//! ```
//!
//! The workload is `translate_scale`'s (`testkit::generate`, 4 Gateways):
//! the infrastructure documents in one file and the HTTPRoutes in files of
//! 500, in a temporary directory. Envoy gets each Gateway's static
//! bootstrap (`portcullis translate -o bootstrap --gateway G`, written once
//! before timing): every Gateway is its own Envoy fleet, and one Envoy
//! cannot hold the four (their listeners share a port). The Envoy side of
//! a run is the sum of validating the four; `envoy_startup_ms` (validating
//! an empty bootstrap) says how much of that is Envoy's fixed cost.
//!
//! Wall times are the child's, from spawn to exit, output to a file. Peak
//! RSS is the child's maximum resident set (`/usr/bin/time -f %M`, left
//! out when that is missing). `PORTCULLIS_BIN` overrides the `portcullis`
//! binary (default: the release binary next to this example's directory);
//! `PORTCULLIS_WORKLOAD_DIR=DIR` writes the workload to DIR and keeps it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use testkit::generate::{Shape, manifests};

const PER_FILE: usize = 500;

/// One child process's wall time and peak RSS.
struct Run {
    ms: f64,
    rss_mib: Option<f64>,
}

/// Runs `cmd` with stdout to `stdout` (a file), through `/usr/bin/time`
/// when there is one, for the child's peak RSS.
fn run(program: &Path, args: &[&str], stdout: &Path, scratch: &Path) -> Run {
    let time = Path::new("/usr/bin/time");
    let rss_file = scratch.join("rss.txt");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args)
        .stdout(std::fs::File::create(stdout).expect("create the output file"))
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().expect("run the child");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rss_mib = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.trim().lines().last()?.trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0);
    let _ = std::fs::remove_file(&rss_file);
    Run { ms, rss_mib }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn portcullis_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PORTCULLIS_BIN") {
        return p.into();
    }
    // target/release/examples/this -> target/release/portcullis
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .map(|d| d.join("portcullis"))
        .expect("the release directory")
}

/// The generated documents: infrastructure (GatewayClass, Gateways,
/// Services, EndpointSlices) in one file, HTTPRoutes in files of 500.
fn write_workload(dir: &Path, routes: usize) -> usize {
    let text = manifests(Shape::with_routes(routes));
    let mut infra = String::new();
    let mut route_files: Vec<String> = Vec::new();
    let mut in_file = 0;
    for doc in text.split("---\n").filter(|d| !d.trim().is_empty()) {
        let target = if doc.contains("\nkind: HTTPRoute\n") {
            if in_file % PER_FILE == 0 {
                route_files.push(String::new());
            }
            in_file += 1;
            route_files.last_mut().expect("a route file")
        } else {
            &mut infra
        };
        target.push_str("---\n");
        target.push_str(doc);
    }
    std::fs::write(dir.join("00-infra.yaml"), infra).expect("write the infrastructure");
    for (i, f) in route_files.iter().enumerate() {
        std::fs::write(dir.join(format!("routes-{i:03}.yaml")), f).expect("write routes");
    }
    text.len()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let routes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let envoy = PathBuf::from(std::env::var_os("ENVOY_BIN").expect("set ENVOY_BIN to the real Envoy"));
    let portcullis = portcullis_bin();
    assert!(
        portcullis.exists(),
        "no {} (build it --release)",
        portcullis.display()
    );

    let scratch =
        std::env::temp_dir().join(format!("portcullis-translate-vs-validate-{}", std::process::id()));
    // PORTCULLIS_WORKLOAD_DIR=DIR writes the workload there and keeps it
    // (for profiling `portcullis translate -f DIR` on its own).
    let keep = std::env::var_os("PORTCULLIS_WORKLOAD_DIR").map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| scratch.join("in"));
    std::fs::create_dir_all(&dir).expect("create the workload directory");
    let input_bytes = write_workload(&dir, routes);
    let dir_arg = dir.to_str().expect("a UTF-8 temporary directory");

    // Once, untimed: the output (its size, its Gateways) and each
    // Gateway's bootstrap for Envoy.
    let json = scratch.join("out.json");
    let translate_args = ["translate", "-f", dir_arg, "-o", "json"];
    run(&portcullis, &translate_args, &json, &scratch);
    let output_bytes = std::fs::metadata(&json).map(|m| m.len()).unwrap_or(0);
    let gateways: Vec<String> = {
        let text = std::fs::read(&json).expect("read the output");
        let v: serde_json::Value = serde_json::from_slice(&text).expect("the output is JSON");
        v["gateways"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert!(!gateways.is_empty(), "no Gateway in the output");
    let mut bootstraps = Vec::new();
    let mut bootstrap_bytes = 0;
    for (i, gw) in gateways.iter().enumerate() {
        let path = scratch.join(format!("bootstrap-{i}.json"));
        run(
            &portcullis,
            &["translate", "-f", dir_arg, "-o", "bootstrap", "--gateway", gw],
            &path,
            &scratch,
        );
        bootstrap_bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        bootstraps.push(path);
    }
    let empty = scratch.join("empty.json");
    std::fs::write(&empty, r#"{"node": {"id": "n", "cluster": "c"}}"#).expect("write the empty bootstrap");
    let validate = |path: &Path| {
        let p = path.to_str().expect("a UTF-8 path").to_string();
        let args = ["--mode", "validate", "--log-level", "critical", "-c", p.as_str()];
        run(&envoy, &args, &scratch.join("envoy.out"), &scratch)
    };

    // PORTCULLIS_BIN_BASELINE=BIN: another build timed in the same runs
    // (alternating), its output checked to be the same bytes.
    let baseline = std::env::var_os("PORTCULLIS_BIN_BASELINE").map(PathBuf::from);
    let base_json = scratch.join("base.json");
    let (mut ours, mut theirs, mut startup, mut base) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut our_rss, mut their_rss, mut base_rss) = (0.0f64, 0.0f64, 0.0f64);
    for _ in 0..runs {
        let r = run(&portcullis, &translate_args, &json, &scratch);
        ours.push(r.ms);
        our_rss = our_rss.max(r.rss_mib.unwrap_or(0.0));
        if let Some(b) = &baseline {
            let r = run(b, &translate_args, &base_json, &scratch);
            base.push(r.ms);
            base_rss = base_rss.max(r.rss_mib.unwrap_or(0.0));
        }
        let mut envoy_ms = 0.0;
        for b in &bootstraps {
            let r = validate(b);
            envoy_ms += r.ms;
            their_rss = their_rss.max(r.rss_mib.unwrap_or(0.0));
        }
        theirs.push(envoy_ms);
        startup.push(validate(&empty).ms);
    }
    let (ours, theirs, startup) = (median(&mut ours), median(&mut theirs), median(&mut startup));
    if baseline.is_some() {
        let same = std::fs::read(&json).ok() == std::fs::read(&base_json).ok();
        let base = median(&mut base);
        println!(
            "baseline_translate_ms={base:.0} baseline_ratio={:.3} baseline_peak_rss_mib={base_rss:.0} same_output={same}",
            base / theirs
        );
    }
    println!(
        "routes={routes} input_mb={:.1} output_json_mb={:.1} bootstraps_mb={:.1} gateways={} runs={runs}",
        input_bytes as f64 / 1e6,
        output_bytes as f64 / 1e6,
        bootstrap_bytes as f64 / 1e6,
        gateways.len()
    );
    println!(
        "translate_ms={ours:.0} envoy_validate_ms={theirs:.0} ratio={:.3} (target <= 0.25) envoy_startup_ms={startup:.0}",
        ours / theirs
    );
    println!("translate_peak_rss_mib={our_rss:.0} (target <= 200) envoy_peak_rss_mib={their_rss:.0}");
    let _ = std::fs::remove_dir_all(&scratch);
}
