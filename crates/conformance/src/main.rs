//! `conformance <cases-dir>...`: runs the Gateway API conformance cases (data
//! in `../shared/conformance/gateway-api`) against `portcullis serve` (or,
//! with `--mode controller`, `portcullis controller` and a real
//! kube-apiserver: [`kube_mode`]), the real Envoy it supervises and echo
//! backends on loopback. Prints
//! `PASS|FAIL|SKIP <Test>` per test and `N passed, N failed, N skipped`;
//! exits 1 when any test failed.

mod backends;
mod cases;
mod client;
mod compare;
mod kube_mode;
mod manifests;
mod runner;
mod status;
mod tls;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "conformance",
    about = "Gateway API conformance cases against portcullis + Envoy"
)]
struct Args {
    /// Folders with index.json, base-manifests.yaml and one folder per
    /// test (e.g. gateway-api and gateway-api-listenerset); the base
    /// manifests are read from the first (they are the same upstream base).
    #[arg(required = true, num_args = 1..)]
    cases_dirs: Vec<PathBuf>,
    /// Only run tests whose name contains one of these (repeatable).
    #[arg(long = "run")]
    only: Vec<String>,
    /// Where manifests, bootstraps and the control plane's log go (default:
    /// a fresh folder under the system temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Seconds a request case or status assertion may take to become
    /// consistent (upstream MaxTimeToConsistency).
    #[arg(long, default_value_t = runner::CONSISTENCY.as_secs())]
    consistency_timeout: u64,
    /// `file`: manifests written to a folder `portcullis serve` watches,
    /// status from its admin API. `controller`: objects applied through a
    /// real kube-apiserver that `portcullis controller` watches, status read
    /// back from the API.
    #[arg(long, value_enum, default_value_t = runner::Mode::File)]
    mode: runner::Mode,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let work = args.work_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("portcullis-conformance-{}", std::process::id()))
    });
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("conformance: cannot create {}: {e}", work.display());
        return ExitCode::from(2);
    }
    // The control plane logs to a file: stdout is the report.
    let log_path = work.join("portcullis.log");
    match std::fs::File::create(&log_path) {
        Ok(file) => tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .init(),
        Err(e) => eprintln!("conformance: no log file {}: {e}", log_path.display()),
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(&args, &work)) {
        Ok((_, 0, _)) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("conformance: {e:#}");
            eprintln!("conformance: control plane log: {}", log_path.display());
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args, work: &std::path::Path) -> anyhow::Result<(usize, usize, usize)> {
    let mut tests = Vec::new();
    for dir in &args.cases_dirs {
        tests.extend(cases::load(dir)?);
    }
    let first = args.cases_dirs.first().context("no cases folder given")?;
    let selected =
        |test: &cases::Test| args.only.is_empty() || args.only.iter().any(|o| test.test.contains(o.as_str()));
    let started = std::time::Instant::now();
    let mut world = match runner::World::start(
        first,
        work,
        std::time::Duration::from_secs(args.consistency_timeout),
        args.mode,
    )
    .await
    {
        Ok(w) => w,
        // No apiserver on this machine: every case is skipped (a failure
        // where PORTCULLIS_REQUIRE_KUBE is set, as for the Kubernetes tests).
        Err(e) if matches!(e.downcast_ref(), Some(kube_mode::KubeError::Unavailable(_))) => {
            if std::env::var_os("PORTCULLIS_REQUIRE_KUBE").is_some_and(|v| !v.is_empty()) {
                anyhow::bail!("PORTCULLIS_REQUIRE_KUBE is set but {e}");
            }
            let tests: Vec<_> = tests.iter().filter(|t| selected(t)).collect();
            for test in &tests {
                println!("SKIP {}: controller mode: {e}", test.test);
            }
            println!("0 passed, 0 failed, {} skipped", tests.len());
            return Ok((0, 0, tests.len()));
        }
        Err(e) => return Err(e),
    };
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut out = std::io::stdout();
    for test in &tests {
        if !selected(test) {
            continue;
        }
        let line = match world.run(test).await {
            runner::Outcome::Pass => {
                passed += 1;
                format!("PASS {}", test.test)
            }
            runner::Outcome::Fail(why) => {
                failed += 1;
                format!("FAIL {}: {why}", test.test)
            }
            runner::Outcome::Skip(why) => {
                skipped += 1;
                format!("SKIP {}: {why}", test.test)
            }
        };
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    world.stop().await;
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    eprintln!(
        "conformance: {} mode, {:.1} s",
        args.mode.name(),
        started.elapsed().as_secs_f64()
    );
    Ok((passed, failed, skipped))
}
