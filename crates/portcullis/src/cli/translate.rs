//! `portcullis translate -f PATH [-o json|yaml|bootstrap]`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Json,
    Yaml,
    /// A static Envoy bootstrap for one Gateway (needs --gateway when
    /// there are several).
    Bootstrap,
}

#[derive(clap::Args)]
pub struct Args {
    /// A manifest file or a directory of them (searched recursively).
    #[arg(short = 'f', long = "filename")]
    pub path: PathBuf,
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: Format,
    /// The Gateway (namespace/name) for `-o bootstrap`.
    #[arg(long)]
    pub gateway: Option<String>,
    #[command(flatten)]
    pub offline: super::offline::OfflineArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let super::offline::Translated { inputs, output } = super::offline::translate(&args.path, &args.offline)?;

    // Every format is written as it renders (one resource, or one route of
    // a route configuration, in memory at a time, not the document).
    let stdout = std::io::stdout().lock();
    let mut w = std::io::BufWriter::with_capacity(1 << 16, stdout);
    match args.output {
        Format::Json => translate::output::stream::write_output_json(&output, &mut w)?,
        Format::Yaml => translate::output::stream::write_output_yaml(&output, &mut w)?,
        Format::Bootstrap => {
            let key = match (&args.gateway, output.gateways.len()) {
                (Some(k), _) => k.clone(),
                (None, 1) => output.gateways.keys().next().cloned().unwrap_or_default(),
                (None, 0) => bail!(
                    "no Gateway of controller {} in {}",
                    args.offline.controller_name,
                    args.path.display()
                ),
                (None, _) => bail!(
                    "several Gateways ({}): choose one with --gateway NAMESPACE/NAME",
                    output.gateways.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            };
            let Some(gw) = output.gateways.get(&key) else {
                bail!(
                    "no Gateway {key} (known: {})",
                    output.gateways.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            };
            translate::output::stream::write_static_bootstrap(gw, &key, &Default::default(), &mut w)
                .with_context(|| format!("bootstrap of Gateway {key}"))?;
        }
    }
    w.flush()?;
    // The process ends here: freeing the inputs and the output piece by
    // piece (10,000 routes: millions of allocations) would only delay it.
    std::mem::forget(output);
    std::mem::forget(inputs);
    Ok(ExitCode::SUCCESS)
}
