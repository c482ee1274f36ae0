//! `portcullis controller`: Kubernetes mode. The Kubernetes provider
//! (`kube_provider`) feeds the same pipeline as `serve` (see
//! `serve`'s module doc, "the provider seam"), and the translator's status
//! goes back to the apiserver through `kube_provider::status`.

use std::path::PathBuf;

use crate::serve::{self, Source, StatusSink};

#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig file; default: in-cluster configuration, else
    /// `$KUBECONFIG` or `~/.kube/config`.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE,
    /// else `default`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "portcullis-controller")]
    pub leader_election_id: String,
    /// Seconds a leader that stopped renewing keeps the Lease.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// Always write status (a single replica; no Lease).
    #[arg(long)]
    pub no_leader_election: bool,
    #[command(flatten)]
    pub run: serve::RunArgs,
}

pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let signals = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = sigterm.recv() => {}
            }
        };
        controller_until(args, signals).await
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The status sink of Kubernetes mode: the status writer, created once the
/// provider's stores exist (the writer merges with the live objects).
struct KubeStatus {
    writer: std::sync::Arc<std::sync::OnceLock<kube_provider::status::StatusWriter>>,
}

impl StatusSink for KubeStatus {
    fn publish(&mut self, status: &[translate::ObjectStatus]) {
        if let Some(w) = self.writer.get() {
            w.publish(status);
        }
    }
}

struct Election {
    no_leader_election: bool,
    namespace: String,
    name: String,
    lease_duration: std::time::Duration,
}

impl Election {
    fn config(&self) -> kube_provider::leader::LeaderConfig {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .unwrap_or_default();
        kube_provider::leader::LeaderConfig {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            identity: format!("{}-{}", host.trim(), std::process::id()),
            lease_duration: self.lease_duration,
            // client-go's defaults keep this ratio (15 s / 2 s).
            retry_period: (self.lease_duration / 7).max(std::time::Duration::from_millis(200)),
        }
    }
}

/// Aborts the election task when the controller stops.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the controller until `shutdown` completes.
pub async fn controller_until(
    args: Args,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let writer = std::sync::Arc::new(std::sync::OnceLock::new());
    let sink = KubeStatus {
        writer: writer.clone(),
    };
    let kubeconfig = args.kubeconfig.clone();
    let controller_name = args.run.controller_name.clone();
    let election = Election {
        no_leader_election: args.no_leader_election,
        namespace: args.leader_election_namespace.clone(),
        name: args.leader_election_id.clone(),
        lease_duration: std::time::Duration::from_secs(args.lease_duration_seconds.max(1)),
    };
    // The extension servers' registered kinds are watched and loaded too.
    let start = |loader: api::loader::Options| async move {
        let client = kube_provider::client(kubeconfig.as_deref()).await?;
        let metrics = kube_provider::metrics::KubeMetrics::default();
        let options = kube_provider::Options {
            loader,
            ..Default::default()
        };
        let (provider, snapshots) = kube_provider::start(client.clone(), options, metrics.clone()).await?;
        let (leader, election) = if election.no_leader_election {
            (tokio::sync::watch::channel(true).1, None)
        } else {
            let (rx, task) = kube_provider::leader::start(client.clone(), election.config());
            (rx, Some(AbortOnDrop(task)))
        };
        let _ = writer.set(kube_provider::status::StatusWriter::start(
            client,
            provider.stores.clone(),
            controller_name,
            leader,
            metrics.clone(),
        ));
        Ok(Source {
            snapshots,
            health: None,
            what: "kubernetes".into(),
            guard: Box::new((provider, writer, election)),
            register_metrics: Some(Box::new(move |registry| metrics.register(registry))),
        })
    };
    serve::run_until(args.run, start, Some(Box::new(sink)), shutdown).await
}
