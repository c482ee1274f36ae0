//! `portcullis controller --xds-ca`: mutually authenticated xDS with
//! certificates from the controller's own CA (`kube_provider::xds_issuer`,
//! README "mTLS xDS"). The issuer publishes this replica's server
//! certificate; this module turns it into the xDS server's TLS and follows
//! its renewals.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// The controller's xDS CA flags.
#[derive(clap::Args, Clone, Debug)]
pub struct XdsCaArgs {
    /// Serve xDS over mutually authenticated TLS with certificates from
    /// the controller's CA (kept in the Secret `--xds-ca-secret`); each
    /// Gateway of our class gets a client-certificate Secret
    /// `portcullis-<gateway>-xds`. Needs `--no-envoy` (provisioned Envoys).
    #[arg(long)]
    pub xds_ca: bool,
    /// The CA Secret, in the leader-election namespace.
    #[arg(long, default_value = "portcullis-xds-ca")]
    pub xds_ca_secret: String,
    /// DNS names of the xDS server certificate (repeatable; default
    /// `portcullis-xds.<namespace>.svc`): the name Envoys send as SNI and
    /// check the certificate for.
    #[arg(long = "xds-server-name")]
    pub xds_server_names: Vec<String>,
    /// Validity of the CA.
    #[arg(long, default_value_t = 365 * 86_400)]
    pub xds_ca_validity_seconds: u64,
    /// A new CA is prepared when the current one has less than this left.
    #[arg(long, default_value_t = 30 * 86_400)]
    pub xds_ca_renew_before_seconds: u64,
    /// Validity of server and client certificates.
    #[arg(long, default_value_t = 86_400)]
    pub xds_cert_validity_seconds: u64,
    /// Certificates are issued again when they have less than this left.
    #[arg(long, default_value_t = 8 * 3600)]
    pub xds_cert_renew_before_seconds: u64,
    /// How often certificates are checked.
    #[arg(long, default_value_t = 10)]
    pub xds_cert_check_seconds: u64,
}

impl XdsCaArgs {
    /// The issuer's configuration (the CA Secret lives in `namespace`).
    pub fn config(&self, namespace: &str, controller_name: &str) -> kube_provider::xds_issuer::IssuerConfig {
        let server_names = if self.xds_server_names.is_empty() {
            vec![format!("portcullis-xds.{namespace}.svc")]
        } else {
            self.xds_server_names.clone()
        };
        let interval = Duration::from_secs(self.xds_cert_check_seconds.max(1));
        kube_provider::xds_issuer::IssuerConfig {
            namespace: namespace.into(),
            ca_secret: self.xds_ca_secret.clone(),
            server_names,
            timing: kube_provider::xds_ca::Timing {
                ca_validity: Duration::from_secs(self.xds_ca_validity_seconds),
                ca_renew_before: Duration::from_secs(self.xds_ca_renew_before_seconds),
                cert_validity: Duration::from_secs(self.xds_cert_validity_seconds),
                cert_renew_before: Duration::from_secs(self.xds_cert_renew_before_seconds),
            },
            interval,
            resync: (interval * 30).max(Duration::from_secs(60)),
            controller_name: controller_name.into(),
        }
    }
}

fn material(m: &kube_provider::xds_issuer::ServerMaterial) -> xds::tls::TlsMaterial {
    xds::tls::TlsMaterial {
        cert_chain_pem: m.cert_chain_pem.clone().into_bytes(),
        key_pem: m.key_pem.clone().into_bytes(),
        client_ca_pem: m.client_ca_pem.clone().into_bytes(),
    }
}

/// What the controller keeps while it runs: the issuer and the task that
/// reloads the xDS server's TLS (both stop when dropped).
pub struct Running {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the issuer; returns once this replica has its server
/// certificate, with the xDS server's TLS following its renewals.
pub async fn start(
    config: kube_provider::xds_issuer::IssuerConfig,
    client: kube_provider::Client,
    stores: kube_provider::Stores,
    leader: tokio::sync::watch::Receiver<bool>,
    snapshots: tokio::sync::watch::Receiver<Arc<provider::Snapshot>>,
    metrics: kube_provider::xds_issuer::IssuerMetrics,
) -> anyhow::Result<(xds::tls::ServerTls, Running)> {
    let (mut rx, issuer) =
        kube_provider::xds_issuer::start(client, config, stores, leader, snapshots, metrics)
            .await
            .context("the xDS CA")?;
    let first = rx
        .borrow_and_update()
        .clone()
        .context("the xDS CA issued no server certificate")?;
    let tls = xds::tls::ServerTls::new(&material(&first), crate::serve::xds_tls::identity)?;
    let handle = tls.clone();
    let reload = tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let Some(m) = rx.borrow_and_update().clone() else {
                continue;
            };
            match handle.reload(&material(&m)) {
                Ok(()) => tracing::info!("xDS server certificate renewed"),
                Err(e) => {
                    tracing::error!(error = %e, "the renewed xDS server certificate is unusable; keeping the current one")
                }
            }
        }
    });
    Ok((
        tls,
        Running {
            tasks: vec![issuer, reload],
        },
    ))
}
