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
    fn publish(&mut self, _snapshot: &provider::Snapshot, output: &translate::Output) {
        if let Some(w) = self.writer.get() {
            w.publish(&output.status);
        }
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
    let start = async move {
        let client = kube_provider::client(kubeconfig.as_deref()).await?;
        let (provider, snapshots) =
            kube_provider::start(client.clone(), kube_provider::Options::default()).await?;
        let _ = writer.set(kube_provider::status::StatusWriter::start(
            client,
            provider.stores.clone(),
            controller_name,
        ));
        Ok(Source {
            snapshots,
            health: None,
            what: "kubernetes".into(),
            guard: Box::new((provider, writer)),
        })
    };
    serve::run_until(args.run, start, Some(Box::new(sink)), shutdown).await
}
