//! `echo --listen ADDR --namespace NS --pod NAME [--port-file PATH]
//! [--log-requests]`: the test backend as a process (quickstart,
//! conformance runs). Prints `listening on ADDR` once bound; exits 0 after
//! a graceful stop on SIGTERM/SIGINT.

use std::process::ExitCode;

const USAGE: &str =
    "usage: echo [--listen ADDR] [--namespace NS] [--pod NAME] [--port-file PATH] [--log-requests]

  --listen ADDR      address to bind (default 127.0.0.1:0; port 0 picks a free port)
  --namespace NS     echoed as \"namespace\"
  --pod NAME         echoed as \"pod\"
  --port-file PATH   write the bound port (digits only) to PATH once listening
  --log-requests     print one line per echoed request on stdout";

struct Args {
    listen: String,
    config: echo::Config,
    port_file: Option<std::path::PathBuf>,
    log_requests: bool,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut out = Args {
        listen: "127.0.0.1:0".into(),
        config: echo::Config::default(),
        port_file: None,
        log_requests: false,
    };
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg, None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--log-requests" if inline.is_none() => {
                out.log_requests = true;
                continue;
            }
            "--listen" | "--namespace" | "--pod" | "--port-file" => {}
            other => return Err(format!("unknown argument {other}")),
        }
        let value = inline
            .or_else(|| args.next())
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => out.listen = value,
            "--namespace" => out.config.namespace = value,
            "--pod" => out.config.pod = value,
            _ => out.port_file = Some(value.into()),
        }
    }
    Ok(Some(out))
}

/// Writes via a temporary file and rename, so a poller never reads a
/// partial port.
fn write_port_file(path: &std::path::Path, port: u16) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, port.to_string())?;
    std::fs::rename(&tmp, path)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("echo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("echo: cannot listen on {}: {e}", args.listen);
                return ExitCode::from(1);
            }
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("echo: {e}");
                return ExitCode::from(1);
            }
        };
        if let Some(path) = &args.port_file
            && let Err(e) = write_port_file(path, addr.port())
        {
            eprintln!("echo: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
        // Rust's stdout is line-buffered: this reaches a pipe at once.
        println!("listening on {addr}");
        let options = echo::Options {
            log_requests: args.log_requests,
            ..echo::Options::default()
        };
        match echo::serve_with(listener, args.config, options, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("echo: {e}");
                ExitCode::from(1)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Option<Args>, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags() {
        let a = parse(&[
            "--listen",
            "127.0.0.1:9",
            "--namespace=ns",
            "--pod",
            "p-1",
            "--port-file",
            "/tmp/x",
            "--log-requests",
        ])
        .expect("ok")
        .expect("args");
        assert_eq!(a.listen, "127.0.0.1:9");
        assert_eq!(a.config.namespace, "ns");
        assert_eq!(a.config.pod, "p-1");
        assert_eq!(a.port_file.as_deref(), Some(std::path::Path::new("/tmp/x")));
        assert!(a.log_requests);
        assert!(parse(&["--help"]).expect("ok").is_none());
        assert!(parse(&["--pod"]).is_err());
        assert!(parse(&["--bogus", "x"]).is_err());
    }
}
