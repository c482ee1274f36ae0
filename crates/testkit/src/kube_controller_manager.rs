//! kube-controller-manager beside a test [`Cluster`], opt-in (tests that
//! do not need it do not pay for it): only the garbage collector runs
//! (`--controllers=garbage-collector-controller`), so objects with owner
//! references are deleted with their owner, as in a real cluster. No
//! kubelet runs: Deployments never get pods, which the tests expect.
//!
//! Killed when the [`ControllerManager`] is dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::kube::{Cluster, ClusterError, bin_dir};

/// A running kube-controller-manager.
pub struct ControllerManager {
    child: Child,
    log: PathBuf,
}

/// Why the controller manager cannot run here (its binary is missing), or
/// `None` when it can.
pub fn missing() -> Option<String> {
    let bin = bin_dir().join("kube-controller-manager");
    (!bin.is_file()).then(|| {
        format!(
            "no kube-controller-manager in {}: run scripts/install-kube.sh (needs Go) or set PORTCULLIS_KUBE_BIN",
            bin_dir().display()
        )
    })
}

impl ControllerManager {
    /// Starts the controller manager against `cluster` (its admin
    /// kubeconfig) and waits until its garbage collector has synced.
    pub async fn start(cluster: &Cluster) -> Result<ControllerManager, ClusterError> {
        let log = cluster.dir().join("kube-controller-manager.log");
        let file = std::fs::File::create(&log).map_err(|source| ClusterError::Io {
            what: format!("creating {}", log.display()),
            source,
        })?;
        let err = file.try_clone().map_err(|source| ClusterError::Io {
            what: "cloning the log handle".into(),
            source,
        })?;
        let child = Command::new(bin_dir().join("kube-controller-manager"))
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args([
                "--controllers=garbage-collector-controller",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                // No HTTPS endpoint: readiness is read from the log.
                "--secure-port=0",
                "--v=2",
            ])
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|source| ClusterError::Io {
                what: "starting kube-controller-manager".into(),
                source,
            })?;
        let mut cm = ControllerManager { child, log };
        cm.wait_synced().await?;
        Ok(cm)
    }

    async fn wait_synced(&mut self) -> Result<(), ClusterError> {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            // klog's line once every resource monitor of the collector has
            // synced: from then on deletions propagate.
            if text.contains("synced garbage collector") || text.contains("all resource monitors have synced")
            {
                return Ok(());
            }
            let exited = self.child.try_wait().ok().flatten().is_some();
            if exited || started.elapsed() > Duration::from_secs(60) {
                let lines: Vec<&str> = text.lines().collect();
                return Err(ClusterError::NotReady {
                    what: "kube-controller-manager",
                    seconds: started.elapsed().as_secs(),
                    log: lines[lines.len().saturating_sub(30)..].join("\n"),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
