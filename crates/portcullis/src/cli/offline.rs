//! The offline translation behind `portcullis translate -f` and `portcullis
//! get|describe -f`: manifests loaded and translated as `serve` would with
//! the same flags (controller name, replacement mode, endpoint guard,
//! HTTPProxy settings, extension managers), so the views and the xDS of one
//! directory never disagree.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The flags both commands share.
#[derive(clap::Args, Clone, Debug)]
pub struct OfflineArgs {
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

/// The loaded inputs and their translation; the loader's and the extension
/// managers' diagnostics are merged into the output's, loader first.
pub struct Translated {
    pub inputs: api::Inputs,
    pub output: translate::Output,
}

/// Loads `path` (a file or a directory, searched recursively) and
/// translates it.
pub fn translate(path: &Path, args: &OfflineArgs) -> anyhow::Result<Translated> {
    // `--config` is read once; every setting below comes from that read.
    let config = args.mode.read()?;
    let mode = config.resolve()?;
    let validator = crate::validator::for_mode(mode, args.envoy_bin.clone(), Default::default())?;
    // Extension managers of `--config`: their kinds load, their hooks run
    // (offline, so an extension's effect and failures show before deploying).
    let extensions = crate::extensions::Extensions::from_config(config.file())?;
    let loaded = api::loader::load_path_with(path, &crate::extensions::loader_options(extensions.as_ref()))
        .with_context(|| "cannot read inputs")?;
    let settings = translate::Settings {
        controller_name: args.controller_name.clone(),
        endpoint_guard: translate::endpoint_guard::EndpointGuard {
            refuse_loopback: config.refuse_loopback_endpoints(),
            ..Default::default()
        },
        http_proxy: config.http_proxy()?,
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
    Ok(Translated {
        inputs: loaded.inputs,
        output,
    })
}
