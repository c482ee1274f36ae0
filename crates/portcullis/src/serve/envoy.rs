//! Managed Envoy processes: one per Gateway, bootstrapped to fetch its
//! configuration from our ADS server; restarted with backoff when they
//! exit; stopped (SIGTERM via `kill`, then SIGKILL) on shutdown, and
//! killed by the kernel if portcullis dies first (see `orphan_guard`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::metrics::GatewayLabels;
use super::state::State;

pub struct Supervisor {
    pub bin: PathBuf,
    pub xds_host: String,
    pub xds_port: u16,
    pub run_dir: PathBuf,
    pub state: Arc<State>,
    children: BTreeMap<String, (watch::Sender<bool>, JoinHandle<()>)>,
}

impl Supervisor {
    pub fn new(bin: PathBuf, xds_host: String, xds_port: u16, run_dir: PathBuf, state: Arc<State>) -> Self {
        Self {
            bin,
            xds_host,
            xds_port,
            run_dir,
            state,
            children: BTreeMap::new(),
        }
    }

    /// Starts Envoys for new Gateways and stops those of removed ones.
    pub fn reconcile(&mut self, gateways: &[String]) {
        let gone: Vec<String> = self
            .children
            .keys()
            .filter(|k| !gateways.contains(k))
            .cloned()
            .collect();
        for k in gone {
            if let Some((stop, _)) = self.children.remove(&k) {
                let _ = stop.send(true);
            }
        }
        for g in gateways {
            if !self.children.contains_key(g) {
                let (tx, rx) = watch::channel(false);
                let handle = tokio::spawn(run_one(
                    self.bin.clone(),
                    g.clone(),
                    self.xds_host.clone(),
                    self.xds_port,
                    self.run_dir.clone(),
                    self.state.clone(),
                    rx,
                ));
                self.children.insert(g.clone(), (tx, handle));
            }
        }
    }

    /// Stops every Envoy and waits for them to exit.
    pub async fn shutdown(&mut self) {
        let children = std::mem::take(&mut self.children);
        for (stop, _) in children.values() {
            let _ = stop.send(true);
        }
        for (_, (_, handle)) in children {
            let _ = handle.await;
        }
    }
}

/// Run-dir files are per Gateway: injective in the Gateway's key (two
/// Gateways never share a pid or admin file), `infra/gw` → `infra_gw`.
fn file_name(gateway: &str) -> String {
    translate::naming::file_name(gateway)
}

async fn run_one(
    bin: PathBuf,
    gateway: String,
    xds_host: String,
    xds_port: u16,
    run_dir: PathBuf,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    let bootstrap = translate::output::ads_bootstrap(&gateway, "portcullis", &xds_host, xds_port, None);
    let path = run_dir.join(format!("{}.bootstrap.json", file_name(&gateway)));
    if let Err(e) =
        std::fs::create_dir_all(&run_dir).and_then(|_| std::fs::write(&path, bootstrap.to_string()))
    {
        tracing::error!(gateway, error = %e, "cannot write Envoy bootstrap");
        return;
    }
    let admin_path = run_dir.join(format!("{}.admin", file_name(&gateway)));
    let mut failures = 0u32;
    loop {
        let (b, p, a) = (bin.clone(), path.clone(), admin_path.clone());
        let spawned = tokio::task::spawn_blocking(move || {
            crate::orphan_guard::spawn(&b, move |cmd| {
                cmd.arg("-c")
                    .arg(&p)
                    .args([
                        "--disable-hot-restart",
                        "--log-level",
                        "warn",
                        "--drain-time-s",
                        "1",
                        "--admin-address-path",
                    ])
                    .arg(&a);
            })
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(gateway, error = %e, bin = %bin.display(), "cannot start Envoy");
                return;
            }
        };
        let pid = child.id();
        tracing::info!(gateway, pid, "Envoy started");
        // The pid file lets operators (and tests) find the process.
        let _ = std::fs::write(
            run_dir.join(format!("{}.pid", file_name(&gateway))),
            pid.to_string(),
        );
        let started = std::time::Instant::now();
        // A std child (forked by the guard's thread), waited for on a
        // blocking thread.
        let mut exited = tokio::task::spawn_blocking(move || {
            let mut child = child;
            child.wait()
        });
        tokio::select! {
            status = &mut exited => {
                tracing::warn!(gateway, ?status, "Envoy exited; restarting");
                state.metrics.envoy_restarts.get_or_create(&GatewayLabels { gateway: gateway.clone() }).inc();
            }
            _ = stop.changed() => {
                terminate(pid, exited).await;
                return;
            }
        }
        // Backoff doubles on quick crashes, resets after a healthy run.
        failures = if started.elapsed() > Duration::from_secs(30) {
            0
        } else {
            failures + 1
        };
        let delay = Duration::from_millis(100u64 << failures.min(6)).min(Duration::from_secs(5));
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Stops Envoy `pid`, whose exit `exited` reports (it reaps the child, so
/// the pid is not reused while we signal it).
async fn terminate(pid: u32, mut exited: JoinHandle<std::io::Result<std::process::ExitStatus>>) {
    // Polite first (Envoy drains on SIGTERM), then forceful.
    for (signal, grace) in [("-TERM", 3), ("-KILL", 5)] {
        let _ = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(grace), &mut exited)
            .await
            .is_ok()
        {
            return;
        }
    }
    tracing::warn!(pid, "Envoy did not exit after SIGKILL");
}
