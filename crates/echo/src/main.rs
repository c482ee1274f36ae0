//! `echo --listen ADDR --namespace NS --pod NAME`: the test backend as a
//! process (for the quickstart and conformance runs).

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut listen = "127.0.0.1:0".to_string();
    let mut config = echo::Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next();
        match (a.as_str(), v) {
            ("--listen", Some(v)) => listen = v,
            ("--namespace", Some(v)) => config.namespace = v,
            ("--pod", Some(v)) => config.pod = v,
            (other, _) => {
                eprintln!(
                    "echo: unknown or incomplete argument {other}\nusage: echo --listen ADDR --namespace NS --pod NAME"
                );
                return ExitCode::from(2);
            }
        }
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("echo: cannot listen on {listen}: {e}");
                return ExitCode::from(1);
            }
        };
        if let Ok(a) = listener.local_addr() {
            println!("listening on {a}");
        }
        tokio::select! {
            r = echo::serve(listener, config) => if let Err(e) = r { eprintln!("echo: {e}"); return ExitCode::from(1); },
            _ = tokio::signal::ctrl_c() => {}
        }
        ExitCode::SUCCESS
    })
}
