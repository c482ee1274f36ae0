//! `portcullis bootstrap --gateway NS/NAME`: an Envoy bootstrap that fetches
//! the Gateway's configuration from a running portcullis over ADS.

use std::process::ExitCode;

use anyhow::bail;

#[derive(clap::Args)]
pub struct Args {
    /// The Gateway this Envoy serves (namespace/name); also its node id.
    #[arg(long)]
    pub gateway: String,
    /// Host of portcullis's xDS server.
    #[arg(long, default_value = "127.0.0.1")]
    pub xds_host: String,
    #[arg(long, default_value_t = 18000)]
    pub xds_port: u16,
    /// Also give the Envoy an admin interface on this port (loopback).
    #[arg(long)]
    pub admin_port: Option<u16>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.gateway.contains('/') {
        bail!("--gateway takes NAMESPACE/NAME");
    }
    let admin = args
        .admin_port
        .map(|p| translate::output::AdminAddress::new("127.0.0.1", p));
    let b = translate::output::ads_bootstrap(
        &args.gateway,
        "portcullis",
        &args.xds_host,
        args.xds_port,
        admin.as_ref(),
    );
    println!("{}", serde_json::to_string_pretty(&b)?);
    Ok(ExitCode::SUCCESS)
}
