//! The example extension server (see `extension::example` and README
//! "Writing an extension").
//!
//! ```text
//! cargo run -p extension --example extension_server -- --listen tcp:127.0.0.1:5005
//!     [--listen unix:/run/ext.sock]
//!     [--sleep-route PATTERN --sleep-ms 3000]   # run past the deadline
//!     [--nack-route PATTERN]                    # reply what Envoy refuses
//! ```
//! Every flag can also come from the environment: `EXTENSION_LISTEN`,
//! `EXTENSION_SLEEP_ROUTE`, `EXTENSION_SLEEP_MS`, `EXTENSION_NACK_ROUTE`.

use std::time::Duration;

use extension::example::{Behaviour, ExampleExtension, serve_tcp, serve_unix};

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{flag}: {message}")]
    Usage { flag: &'static str, message: String },
    #[error("cannot listen on {address}: {source}")]
    Bind { address: String, source: std::io::Error },
    #[error(transparent)]
    Serve(#[from] extension::example::ServeError),
    #[error(transparent)]
    Transport(#[from] tonic::transport::Error),
}

fn setting(args: &[String], flag: &'static str, env: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var(env).ok())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen =
        setting(&args, "--listen", "EXTENSION_LISTEN").unwrap_or_else(|| "tcp:127.0.0.1:5005".into());
    let sleep_ms = match setting(&args, "--sleep-ms", "EXTENSION_SLEEP_MS") {
        Some(v) => v.parse::<u64>().map_err(|e| Error::Usage {
            flag: "--sleep-ms",
            message: e.to_string(),
        })?,
        None => 5_000,
    };
    let ext = ExampleExtension::new(Behaviour {
        sleep_route: setting(&args, "--sleep-route", "EXTENSION_SLEEP_ROUTE"),
        sleep: Duration::from_millis(sleep_ms),
        nack_route: setting(&args, "--nack-route", "EXTENSION_NACK_ROUTE"),
    });
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Some(path) = listen.strip_prefix("unix:") {
        eprintln!("extension server listening on unix:{path}");
        serve_unix(ext, std::path::Path::new(path), shutdown).await?;
    } else {
        let address = listen.strip_prefix("tcp:").unwrap_or(&listen);
        let l = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| Error::Bind {
                address: address.to_string(),
                source,
            })?;
        eprintln!(
            "extension server listening on {}",
            l.local_addr().map_err(|source| Error::Bind {
                address: address.to_string(),
                source,
            })?
        );
        serve_tcp(ext, l, shutdown).await?;
    }
    Ok(())
}
