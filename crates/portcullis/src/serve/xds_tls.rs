//! How the xDS server is bound: plaintext on loopback by default; mutually
//! authenticated TLS (`xds::tls`) when certificate files are given (flags
//! or the config file's `xdsTls`) or when Kubernetes mode's CA supplies
//! them (`crate::xds_ca`). Over TLS an Envoy is served only the Gateway
//! its client certificate names (URI SAN
//! `kube_provider::names::xds_identity`, node id `namespace/name`).
//!
//! Certificate files are read again every [`RELOAD_EVERY`]: new contents
//! (a rotated certificate, a new CA in the client bundle) apply to
//! connections accepted from then on; established ones keep going.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::state::{self, State};

/// How often certificate files are checked for new contents.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// `serve`'s (and `controller`'s) mTLS xDS flags: all three or none.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct XdsTlsArgs {
    /// PEM certificate chain the xDS server presents; with `--xds-tls-key`
    /// and `--xds-tls-client-ca`, xDS is served over TLS and every client
    /// must present a certificate naming its Gateway (default: plaintext).
    #[arg(long, requires_all = ["xds_tls_key", "xds_tls_client_ca"])]
    pub xds_tls_cert: Option<PathBuf>,
    /// PEM private key of `--xds-tls-cert`.
    #[arg(long, requires_all = ["xds_tls_cert", "xds_tls_client_ca"])]
    pub xds_tls_key: Option<PathBuf>,
    /// PEM CA bundle client certificates must chain to.
    #[arg(long, requires_all = ["xds_tls_cert", "xds_tls_key"])]
    pub xds_tls_client_ca: Option<PathBuf>,
}

/// The three files of mTLS xDS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

impl TlsFiles {
    fn read(&self) -> anyhow::Result<xds::tls::TlsMaterial> {
        let read = |p: &PathBuf, what: &str| {
            std::fs::read(p).with_context(|| format!("cannot read the xDS TLS {what} {}", p.display()))
        };
        Ok(xds::tls::TlsMaterial {
            cert_chain_pem: read(&self.cert, "certificate")?,
            key_pem: read(&self.key, "key")?,
            client_ca_pem: read(&self.client_ca, "client CA")?,
        })
    }
}

/// The files from the flags, else the config file's `xdsTls`.
pub fn files(args: &XdsTlsArgs, config: Option<&crate::config::ConfigFile>) -> Option<TlsFiles> {
    if let (Some(cert), Some(key), Some(client_ca)) =
        (&args.xds_tls_cert, &args.xds_tls_key, &args.xds_tls_client_ca)
    {
        return Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: client_ca.clone(),
        });
    }
    config?.xds_tls.as_ref().map(|t| TlsFiles {
        cert: t.cert_file.clone(),
        key: t.key_file.clone(),
        client_ca: t.client_ca_file.clone(),
    })
}

/// The node id a URI SAN entitles (Kubernetes mode's identities; `serve`
/// uses the same, so a certificate issued by either works with both).
pub fn identity(uri: &str) -> Option<String> {
    kube_provider::names::node_of_identity(uri)
}

/// Loads `files` into a [`xds::tls::ServerTls`] and keeps it current
/// (the task ends when the returned guard is dropped).
pub fn from_files(files: TlsFiles) -> anyhow::Result<(xds::tls::ServerTls, Reloader)> {
    let first = files.read()?;
    let tls = xds::tls::ServerTls::new(&first, identity)
        .with_context(|| format!("xDS TLS from {}", files.cert.display()))?;
    let handle = tls.clone();
    let task = tokio::spawn(async move {
        let mut loaded = first;
        loop {
            tokio::time::sleep(RELOAD_EVERY).await;
            // A file being replaced may be missing or half written: keep
            // the current config and try again at the next tick.
            let Ok(next) = files.read() else { continue };
            if next == loaded {
                continue;
            }
            match handle.reload(&next) {
                Ok(()) => {
                    tracing::info!(cert = %files.cert.display(), "xDS TLS certificate reloaded");
                    loaded = next;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "xDS TLS files not (yet) usable; keeping the current ones")
                }
            }
        }
    });
    Ok((tls, Reloader(Some(task))))
}

/// Stops a reload task when dropped.
pub struct Reloader(pub Option<tokio::task::JoinHandle<()>>);

impl Drop for Reloader {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.abort();
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    /// The certificate's URI SANs: authenticated, so a client cannot grow
    /// the label set (the node id it asked for is its own claim).
    identity: String,
}

/// The serve observer, plus what only mTLS xDS reports.
pub struct TlsObserver {
    inner: state::Observer,
    refused: Family<RefusedLabels, Counter>,
    handshake_failures: Counter,
}

/// The observer of the xDS server; registers the mTLS metrics
/// (`portcullis_xds_refused_streams_total{identity}`,
/// `portcullis_xds_tls_handshake_failures_total`).
pub fn observer(state: &Arc<State>) -> Arc<TlsObserver> {
    let refused = Family::<RefusedLabels, Counter>::default();
    let handshake_failures = Counter::default();
    {
        let mut r = state.metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        r.register(
            "xds_refused_streams",
            "xDS streams refused because the client certificate does not name the node (Gateway) asked for",
            refused.clone(),
        );
        r.register(
            "xds_tls_handshake_failures",
            "xDS TLS handshakes that failed (no client certificate, an untrusted one, a timeout)",
            handshake_failures.clone(),
        );
    }
    Arc::new(TlsObserver {
        inner: state::Observer(state.clone()),
        refused,
        handshake_failures,
    })
}

impl xds::Observer for TlsObserver {
    fn connected(&self, node: &str) {
        self.inner.connected(node);
    }
    fn disconnected(&self, node: &str) {
        self.inner.disconnected(node);
    }
    fn pushed(&self, node: &str, type_url: &str, version: &str) {
        self.inner.pushed(node, type_url, version);
    }
    fn acked(&self, node: &str, type_url: &str, version: &str) {
        self.inner.acked(node, type_url, version);
    }
    fn nacked(&self, node: &str, type_url: &str, version: &str, message: &str) {
        self.inner.nacked(node, type_url, version, message);
    }
    fn refused(&self, _node: &str, identity: &str) {
        let identity: String = identity.chars().take(512).collect();
        self.refused.get_or_create(&RefusedLabels { identity }).inc();
    }
    fn handshake_failed(&self, _error: &str) {
        self.handshake_failures.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_from_flags_else_the_config_file() {
        let dir = std::env::temp_dir().join(format!("portcullis-xds-tls-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let config = dir.join("c.yaml");
        std::fs::write(
            &config,
            "xdsTls: {certFile: s.crt, keyFile: s.key, clientCaFile: ca.crt}\n",
        )
        .expect("write");
        let none = XdsTlsArgs::default();
        assert_eq!(files(&none, None), None);
        let file = crate::config::load(&config).expect("config");
        let from_file = files(&none, Some(&file)).expect("TLS");
        assert_eq!(from_file.cert, PathBuf::from("s.crt"));
        assert_eq!(from_file.client_ca, PathBuf::from("ca.crt"));
        let flags = XdsTlsArgs {
            xds_tls_cert: Some("f.crt".into()),
            xds_tls_key: Some("f.key".into()),
            xds_tls_client_ca: Some("f-ca.crt".into()),
        };
        assert_eq!(
            files(&flags, Some(&file)).expect("TLS").cert,
            PathBuf::from("f.crt")
        );
        let typo = dir.join("typo.yaml");
        std::fs::write(&typo, "xdsTls: {certFile: a, keyFile: b}\n").expect("write");
        assert!(crate::config::load(&typo).is_err(), "clientCaFile is required");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unusable_files_are_refused_with_the_file_named() {
        let dir = std::env::temp_dir().join(format!("portcullis-xds-tls-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in ["s.crt", "s.key", "ca.crt"] {
            std::fs::write(dir.join(f), "not PEM").expect("write");
        }
        let files = TlsFiles {
            cert: dir.join("s.crt"),
            key: dir.join("s.key"),
            client_ca: dir.join("ca.crt"),
        };
        let e = from_files(files).err().expect("refused");
        assert!(format!("{e:#}").contains("no PEM certificate"), "{e:#}");
        let missing = TlsFiles {
            cert: dir.join("absent.crt"),
            key: dir.join("s.key"),
            client_ca: dir.join("ca.crt"),
        };
        let e = from_files(missing).err().expect("refused");
        assert!(format!("{e:#}").contains("absent.crt"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
