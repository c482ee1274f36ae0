//! The `portcullis` binary: wiring only. Each subcommand lives in `cli/`
//! (offline) or `serve/` (the control plane).

use std::process::ExitCode;

use portcullis::{cli, controller, serve};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "portcullis", version, about = "Gateway API control plane for Envoy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Watch a directory of manifests, serve xDS and run one Envoy per Gateway.
    Serve(Box<serve::Args>),
    /// Kubernetes mode: watch the apiserver, serve xDS, write status back.
    Controller(Box<controller::Args>),
    /// Translate manifests offline: prints the xDS each Gateway would get,
    /// the status of every object, and diagnostics.
    Translate(cli::translate::Args),
    /// List gateways or routes (from a running portcullis, or offline with -f).
    Get(cli::get::GetArgs),
    /// Show one gateway or route in detail, with its conditions and replaced rules.
    Describe(cli::get::DescribeArgs),
    /// Print an Envoy bootstrap for an Envoy you run yourself.
    Bootstrap(cli::bootstrap::Args),
}

/// jemalloc: translation allocates and frees millions of small objects on
/// several threads; glibc's per-thread arenas kept ~100 MiB more at 10,000
/// routes and the allocator was ~35% of translation time (see the
/// translate bench).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    serve::mark_process_start();
    // jemalloc returns freed pages to the OS as they age (10 s), but only
    // when some thread allocates: an idle serve kept every page its last
    // translations freed (RSS 180 MB at rest with 83 MiB live, 10,000
    // routes). Its background threads purge on time instead (107 MB at
    // rest). Figures: ARCHITECTURE.md §7, "Memory".
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Controller(args) => controller::run(*args),
        Command::Translate(args) => cli::translate::run(args),
        Command::Get(args) => cli::get::get(args),
        Command::Describe(args) => cli::get::describe(args),
        Command::Bootstrap(args) => cli::bootstrap::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("portcullis: {e:#}");
            ExitCode::from(2)
        }
    }
}
