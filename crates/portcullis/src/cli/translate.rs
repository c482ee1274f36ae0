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
    /// GatewayClasses with this controllerName are handled.
    #[arg(
        long,
        env = "PORTCULLIS_CONTROLLER_NAME",
        default_value = "portcullis.dev/gateway-controller"
    )]
    pub controller_name: String,
    #[command(flatten)]
    pub mode: crate::config::ModeArgs,
    /// Envoy binary for STRICT mode (default: $ENVOY_BIN, else .tools/bin/envoy).
    #[arg(long, env = "ENVOY_BIN")]
    pub envoy_bin: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mode = args.mode.resolve()?;
    let validator = crate::validator::for_mode(mode, args.envoy_bin.clone(), Default::default())
        .map_err(anyhow::Error::msg)?;
    // Extension managers of `--config`: their kinds load, their hooks run
    // (offline, so an extension's effect and failures show before deploying).
    let extensions = crate::extensions::Extensions::from_config_file(args.mode.config.as_deref())?;
    let loaded = api::loader::load_path_with(
        &args.path,
        &crate::extensions::loader_options(extensions.as_ref()),
    )
    .with_context(|| "cannot read inputs")?;
    let settings = translate::Settings {
        controller_name: args.controller_name.clone(),
        endpoint_guard: translate::endpoint_guard::EndpointGuard {
            refuse_loopback: args.mode.refuse_loopback_endpoints()?,
            ..Default::default()
        },
        http_proxy: args.mode.http_proxy()?,
        ..Default::default()
    };
    let mut output = translate::translate_seams(
        &loaded.inputs,
        &settings,
        crate::extensions::seams(
            validator.as_ref().map(|v| v as &dyn translate::strict::Validator),
            extensions.as_ref(),
        ),
    );
    let mut diagnostics = loaded.diagnostics;
    diagnostics.append(&mut output.diagnostics);
    if let Some(e) = &extensions {
        diagnostics.extend(e.skipped_failures());
    }
    output.diagnostics = diagnostics;

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
                    args.controller_name,
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
    std::mem::forget(loaded.inputs);
    Ok(ExitCode::SUCCESS)
}
