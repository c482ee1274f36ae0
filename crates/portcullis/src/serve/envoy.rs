//! Managed Envoy processes: one per Gateway, bootstrapped to fetch its
//! configuration from our ADS server; restarted with backoff when they
//! exit; stopped (SIGTERM via `kill`, then SIGKILL) on shutdown.

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

fn file_name(gateway: &str) -> String {
    gateway.replace('/', "_")
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
        let mut cmd = Command::new(&bin);
        cmd.arg("-c")
            .arg(&path)
            .args([
                "--disable-hot-restart",
                "--log-level",
                "warn",
                "--drain-time-s",
                "1",
                "--admin-address-path",
            ])
            .arg(&admin_path)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(gateway, error = %e, bin = %bin.display(), "cannot start Envoy");
                return;
            }
        };
        tracing::info!(gateway, pid = child.id(), "Envoy started");
        // The pid file lets operators (and tests) find the process.
        if let Some(pid) = child.id() {
            let _ = std::fs::write(
                run_dir.join(format!("{}.pid", file_name(&gateway))),
                pid.to_string(),
            );
        }
        let started = std::time::Instant::now();
        tokio::select! {
            status = child.wait() => {
                tracing::warn!(gateway, ?status, "Envoy exited; restarting");
                state.metrics.envoy_restarts.get_or_create(&GatewayLabels { gateway: gateway.clone() }).inc();
            }
            _ = stop.changed() => {
                terminate(&mut child).await;
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

async fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        // Polite first (Envoy drains on SIGTERM), then forceful.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(3), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
}
