//! `conformance <cases-dir>...`: runs the Gateway API conformance cases (data
//! in `../shared/conformance/gateway-api`) against `portcullis serve`, the
//! real Envoy it supervises and echo backends on loopback. Prints
//! `PASS|FAIL|SKIP <Test>` per test and `N passed, N failed, N skipped`;
//! exits 1 when any test failed.

mod backends;
mod cases;
mod client;
mod compare;
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
    let mut world = runner::World::start(
        first,
        work,
        std::time::Duration::from_secs(args.consistency_timeout),
    )
    .await?;
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut out = std::io::stdout();
    for test in &tests {
        if !args.only.is_empty() && !args.only.iter().any(|o| test.test.contains(o.as_str())) {
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
    Ok((passed, failed, skipped))
}
