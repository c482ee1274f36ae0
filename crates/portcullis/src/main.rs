//! The `portcullis` binary: wiring only. Each subcommand lives in `cli/`.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "portcullis", version, about = "Gateway API control plane for Envoy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Translate manifests offline: prints the xDS each Gateway would get,
    /// the status of every object, and diagnostics.
    Translate(cli::translate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Translate(args) => cli::translate::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("portcullis: {e:#}");
            ExitCode::from(2)
        }
    }
}
