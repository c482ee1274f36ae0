//! `serve`'s start to ready with a large configuration: the time from
//! spawning `portcullis serve --no-envoy DIR` to its `/readyz` answering
//! 200 (the first snapshot translated and in the xDS cache), over several
//! starts, with the medians of the stages `serve` logs at start
//! (`portcullis is serving`: the provider's initial load, the first
//! translation, the xDS snapshots) — so where the time goes shows beside
//! the total.
//!
//! ```sh
//! cargo build --release -p portcullis --bin portcullis --example serve_ready
//! target/release/examples/serve_ready [ROUTES] [RUNS]
//! ```
//!
//! The workload is `translate_scale`'s (`testkit::generate`, ROUTES default
//! 10,000: 4 Gateways, 4 listeners each, four rules a route, a Service and
//! an EndpointSlice per four routes), written as 20 files in a temporary
//! directory (`PORTCULLIS_SCALE_DIR=DIR` writes it there and keeps it).
//! The binary is `PORTCULLIS_BIN`, else `portcullis` beside the example's
//! directory (`target/release/portcullis`). `PORTCULLIS_BASELINE=BIN`
//! alternates its starts with another binary's (an older build), so the
//! two are compared under the same load; the ratio of medians is printed.
//! Besides wall time, the CPU time the process used until ready
//! (`/proc/PID/stat`, all threads) is shown: on a loaded machine it is
//! the steadier figure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::generate::{Shape, manifests};

/// Files the workload is split into (the issue's "20 files of 500 routes").
const FILES: usize = 20;

fn free_port() -> u16 {
    testkit::port::free()
}

/// The status code of `GET path`, or `None` while nothing answers.
fn status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut b = Vec::new();
    s.read_to_end(&mut b).ok()?;
    String::from_utf8_lossy(&b)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Writes the generated manifests as [`FILES`] files of consecutive
/// documents; returns the bytes written.
fn write_workload(dir: &Path, routes: usize) -> usize {
    let text = manifests(Shape::with_routes(routes));
    let documents: Vec<&str> = text.split("---\n").filter(|d| !d.trim().is_empty()).collect();
    let per_file = documents.len().div_ceil(FILES);
    std::fs::create_dir_all(dir).expect("create the workload directory");
    for (f, chunk) in documents.chunks(per_file).enumerate() {
        std::fs::write(dir.join(format!("part-{f:02}.yaml")), chunk.join("---\n"))
            .expect("write a workload file");
    }
    text.len()
}

/// `key=value` fields of the last log line containing `message` (ANSI
/// colours stripped).
fn fields(log: &str, message: &str) -> Vec<(String, String)> {
    let Some(line) = log.lines().rev().find(|l| l.contains(message)) else {
        return Vec::new();
    };
    let mut plain = String::new();
    let mut escape = false;
    for c in line.chars() {
        match c {
            '\u{1b}' => escape = true,
            'm' if escape => escape = false,
            _ if escape => {}
            _ => plain.push(c),
        }
    }
    plain
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Stages `serve` logs when it starts serving (milliseconds).
const STAGES: &[&str] = &["load_ms", "translate_ms", "xds_ms", "ready_ms"];

/// CPU time (user + system, all threads) of process `pid` so far, in ms
/// (clock ticks taken as 100 Hz, Linux's usual `CLK_TCK`).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after ")".
    (ticks(11) + ticks(12)) * 10.0
}

/// Starts `bin serve` once; returns (wall ms to ready, CPU ms then, the
/// fields of its "portcullis is serving" log line).
fn start_once(bin: &Path, dir: &Path, run_dir: &Path, run: usize) -> (f64, f64, Vec<(String, String)>) {
    let admin = free_port();
    let log_path = run_dir.with_extension(format!("{run}.log"));
    let log = std::fs::File::create(&log_path).expect("log file");
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["serve", "--no-envoy"])
        .arg(dir)
        .args(["--xds-address", "127.0.0.1:0"])
        .args(["--admin-address", &format!("127.0.0.1:{admin}")])
        .arg("--run-dir")
        .arg(run_dir)
        .env("PORTCULLIS_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn portcullis serve");
    let ms = loop {
        if status(admin, "/readyz") == Some(200) {
            break started.elapsed().as_secs_f64() * 1e3;
        }
        if let Ok(Some(exit)) = child.try_wait() {
            panic!(
                "portcullis serve exited ({exit}): {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        assert!(started.elapsed() < Duration::from_secs(120), "not ready in 120 s");
        std::thread::sleep(Duration::from_millis(1));
    };
    let cpu = cpu_ms(child.id());
    // The log line is written just after the admin API starts answering.
    let mut logged = Vec::new();
    for _ in 0..200 {
        logged = fields(
            &std::fs::read_to_string(&log_path).unwrap_or_default(),
            "portcullis is serving",
        );
        if !logged.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&log_path);
    (ms, cpu, logged)
}

/// One binary's starts: wall ms, CPU ms, and each stage's values.
type Samples = (Vec<f64>, Vec<f64>, Vec<Vec<f64>>);

fn main() {
    let mut args = std::env::args().skip(1);
    let routes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let bin = std::env::var_os("PORTCULLIS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("own path");
            exe.parent()
                .and_then(Path::parent)
                .map(|d| d.join("portcullis"))
                .expect("target directory")
        });
    assert!(
        bin.is_file(),
        "no portcullis binary at {} (build it: cargo build --release -p portcullis --bin portcullis, or set PORTCULLIS_BIN)",
        bin.display()
    );
    let (dir, keep) = match std::env::var_os("PORTCULLIS_SCALE_DIR") {
        Some(d) => (PathBuf::from(d), true),
        None => (
            std::env::temp_dir().join(format!("serve-ready-{}", std::process::id())),
            false,
        ),
    };
    let bytes = write_workload(&dir, routes);
    let run_dir = std::env::temp_dir().join(format!("serve-ready-run-{}", std::process::id()));
    println!(
        "routes={routes} bytes={bytes} files={FILES} dir={} bin={}",
        dir.display(),
        bin.display()
    );

    let baseline = std::env::var_os("PORTCULLIS_BASELINE").map(PathBuf::from);
    let mut binaries = vec![("new", bin.clone())];
    if let Some(b) = baseline {
        binaries.push(("baseline", b));
    }
    // Per binary: wall ms, CPU ms, and each stage's values.
    let mut results: Vec<Samples> =
        vec![(Vec::new(), Vec::new(), vec![Vec::new(); STAGES.len()]); binaries.len()];
    for run in 0..runs {
        for (b, (name, bin)) in binaries.iter().enumerate() {
            let (ms, cpu, logged) = start_once(bin, &dir, &run_dir, run);
            let mut line = format!("run {run} {name}: ready {ms:.0} ms, cpu {cpu:.0} ms");
            let (wall, cpus, stages) = &mut results[b];
            for (i, stage) in STAGES.iter().enumerate() {
                if let Some(v) = logged
                    .iter()
                    .find(|(k, _)| k == stage)
                    .and_then(|(_, v)| v.parse::<f64>().ok())
                {
                    stages[i].push(v);
                    line.push_str(&format!(" {stage}={v}"));
                }
            }
            println!("{line}");
            wall.push(ms);
            cpus.push(cpu);
        }
    }
    let mut medians = Vec::new();
    for ((name, _), (wall, cpus, stages)) in binaries.iter().zip(&mut results) {
        let (w, c) = (median(wall), median(cpus));
        medians.push((w, c));
        let mut summary = format!("{name}: median over {runs} starts: ready {w:.0} ms, cpu {c:.0} ms");
        for (stage, values) in STAGES.iter().zip(stages.iter_mut()) {
            if !values.is_empty() {
                summary.push_str(&format!(" {stage}={:.0}", median(values)));
            }
        }
        println!("{summary}");
    }
    if let [(nw, nc), (bw, bc)] = medians[..] {
        println!("new/baseline: ready {:.2}, cpu {:.2}", nw / bw, nc / bc);
    }
    println!(
        "(ready: spawn to /readyz 200; cpu: the process's CPU time then; the stages are serve's own, ready_ms from its main)"
    );
    let _ = std::fs::remove_dir_all(&run_dir);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
