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
    pub provision: crate::provision_args::ProvisionArgs,
    #[command(flatten)]
    pub xds_ca: crate::xds_ca::XdsCaArgs,
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
    provisioner: std::sync::Arc<std::sync::OnceLock<kube_provider::provision::Provisioner>>,
}

impl StatusSink for KubeStatus {
    fn publish(&mut self, status: translate::Statuses<'_>) {
        if let Some(w) = self.writer.get() {
            w.publish(status);
        }
        // Which Gateways are accepted decides what is provisioned.
        if let Some(p) = self.provisioner.get() {
            p.publish(status.value);
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
    let provisioner = std::sync::Arc::new(std::sync::OnceLock::new());
    let sink = KubeStatus {
        writer: writer.clone(),
        provisioner: provisioner.clone(),
    };
    // With mTLS xDS, provisioned Envoys check the server's certificate
    // for the first name the CA issues it for.
    let xds_server_name = args.xds_ca.xds_ca.then(|| {
        args.xds_ca
            .config(&args.leader_election_namespace, &args.run.controller_name)
            .server_names
            .first()
            .cloned()
            .unwrap_or_default()
    });
    let provision = args.provision.config(
        &args.run.controller_name,
        &args.leader_election_namespace,
        args.run.xds_address,
        xds_server_name,
    );
    let kubeconfig = args.kubeconfig.clone();
    let xds_ca = args.xds_ca.clone();
    let xds_ca_namespace = args.leader_election_namespace.clone();
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
            provisioned_addresses: provision.is_some(),
            loader,
            ..Default::default()
        };
        let (provider, snapshots) = kube_provider::start(client.clone(), options, metrics.clone()).await?;
        // Without an election the leader state is always true; its sender
        // is kept with the guard: the status writer stops when the leader
        // channel closes, so a dropped sender would mean no status at all.
        let (always_leader, always_leading) = tokio::sync::watch::channel(true);
        let (leader, election) = if election.no_leader_election {
            (always_leading, None)
        } else {
            let (rx, task) = kube_provider::leader::start(client.clone(), election.config());
            (rx, Some(AbortOnDrop(task)))
        };
        // mTLS xDS (README "mTLS xDS"): the CA and this replica's server
        // certificate are ready before anything is served.
        let issuer_metrics = kube_provider::xds_issuer::IssuerMetrics::default();
        let (xds_tls, issuer) = if xds_ca.xds_ca {
            let (tls, running) = crate::xds_ca::start(
                xds_ca.config(&xds_ca_namespace, &controller_name),
                client.clone(),
                provider.stores.clone(),
                leader.clone(),
                snapshots.clone(),
                issuer_metrics.clone(),
            )
            .await?;
            (Some(tls), Some(running))
        } else {
            (None, None)
        };
        let provision_metrics = kube_provider::provision::ProvisionMetrics::default();
        if let Some(config) = provision {
            let _ = provisioner.set(kube_provider::provision::Provisioner::start(
                client.clone(),
                config,
                snapshots.clone(),
                leader.clone(),
                provision_metrics.clone(),
            ));
        }
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
            guard: Box::new((provider, writer, election, provisioner, always_leader, issuer)),
            register_metrics: Some(Box::new(move |registry| {
                metrics.register(registry);
                provision_metrics.register(registry);
                issuer_metrics.register(registry);
            })),
            xds_tls,
        })
    };
    serve::run_until(args.run, start, Some(Box::new(sink)), shutdown).await
}
