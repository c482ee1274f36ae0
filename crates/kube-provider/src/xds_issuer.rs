//! The Kubernetes side of the xDS CA ([`crate::xds_ca`] holds the
//! certificate logic): the CA Secret, this replica's xDS server
//! certificate, and each Gateway's client-certificate Secret.
//!
//! - The CA lives in the Secret `<ca_secret>` (type `Opaque`, keys of
//!   [`crate::xds_ca::CaSet::to_data`]) in the controller's namespace. A
//!   replica that finds none creates one; two replicas racing both try to
//!   create, the apiserver keeps one, the loser reads it (409 → get).
//! - Every replica issues its own server certificate (DNS SANs from
//!   [`IssuerConfig::server_names`]) in memory — its key never leaves the
//!   process — and publishes it with the trust bundle on a watch channel
//!   for the xDS server; again when it nears expiry or the CA changes.
//! - Only the leader rotates the CA (with the Secret's `resourceVersion`, so
//!   a concurrent writer loses) and writes client Secrets: for every
//!   Gateway whose GatewayClass names our controller, Secret
//!   [`crate::names::xds_client_secret`] in the Gateway's namespace (type
//!   `kubernetes.io/tls`, keys `tls.crt`, `tls.key`, `ca.crt` = the trust
//!   bundle), labelled [`crate::names::labels`] and owned by the Gateway
//!   (the garbage collector deletes it with the Gateway), written with
//!   server-side apply and re-issued when [`crate::xds_ca::reissue`] says
//!   so. A Secret of that name this controller did not create (no
//!   `app.kubernetes.io/managed-by: portcullis` label) is left alone and
//!   reported. A Gateway that stops being ours has its Secret deleted.
//!
//! Checks run every [`IssuerConfig::interval`] and on every provider
//! snapshot (a new Gateway gets its Secret at once); the leader reads
//! each client Secret back from the API at most every
//! [`IssuerConfig::resync`], between which it trusts what it wrote.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::watch;

use crate::xds_ca::{Ca, CaError, CaSet, Expected, Reissue, Timing, plan_rotation, reissue, rotate};
use crate::{Client, Kind, Stores, names};

/// Besides `tls.crt`, `tls.key` and `ca.crt`, the client Secret holds the
/// file-based SDS documents of `translate::output::bootstrap::xds_client_sds`
/// (keys `xds-sds-cert.json`, `xds-sds-ca.json`) for its files as mounted
/// at [`names::XDS_CERT_DIR`]: a bootstrap from `ads_bootstrap_tls_sds_proto`
/// with `sds_dir` and `watched_directory` = `XDS_CERT_DIR` makes Envoy
/// re-read renewed certificates without a restart.
/// Field manager of the client Secrets.
const MANAGER: &str = "portcullis-xds-ca";
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "portcullis");

/// Where and how certificates are issued.
#[derive(Clone, Debug)]
pub struct IssuerConfig {
    /// The controller's namespace (the CA Secret's).
    pub namespace: String,
    /// The CA Secret's name.
    pub ca_secret: String,
    /// DNS names of this replica's xDS server certificate (the name the
    /// provisioned bootstraps send as SNI and check).
    pub server_names: Vec<String>,
    pub timing: Timing,
    /// How often certificates are checked.
    pub interval: Duration,
    /// How often the leader reads client Secrets back from the API.
    pub resync: Duration,
    /// GatewayClasses with this controllerName are ours.
    pub controller_name: String,
}

/// This replica's xDS server certificate, key and the trust bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerMaterial {
    pub cert_chain_pem: String,
    pub key_pem: String,
    /// Every CA of the Secret (client certificates must chain to one).
    pub client_ca_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum IssuerError {
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(transparent)]
    Ca(#[from] CaError),
    #[error(
        "Secret {namespace}/{name} exists but was not created by portcullis (no label app.kubernetes.io/managed-by=portcullis): left alone"
    )]
    Foreign { namespace: String, name: String },
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> IssuerError {
    let what = what.into();
    move |source| IssuerError::Api {
        what,
        source: Box::new(source),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IssueLabels {
    /// `server` or `client`.
    pub kind: String,
    /// [`Reissue::as_str`].
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub step: String,
}

/// `portcullis_xds_certificates_issued_total{kind,reason}`,
/// `_xds_issue_failures_total`, `_xds_ca_rotations_total{step}`.
#[derive(Clone, Default)]
pub struct IssuerMetrics {
    pub issued: Family<IssueLabels, Counter>,
    pub failures: Counter,
    pub rotations: Family<StepLabels, Counter>,
}

impl IssuerMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "xds_certificates_issued",
            "xDS certificates issued by the controller's CA, per kind (server, client) and reason",
            self.issued.clone(),
        );
        registry.register(
            "xds_issue_failures",
            "Failed reads or writes of the xDS CA Secret or of a client-certificate Secret",
            self.failures.clone(),
        );
        registry.register(
            "xds_ca_rotations",
            "Steps of the xDS CA rotation (add_next, promote, drop_previous)",
            self.rotations.clone(),
        );
    }
}

/// What the leader last wrote or read of a client Secret.
struct Known {
    uid: String,
    cert_pem: String,
    bundle: String,
    checked: Instant,
}

struct Issuer {
    client: Client,
    config: IssuerConfig,
    stores: Stores,
    metrics: IssuerMetrics,
    server: Option<ServerMaterial>,
    known: HashMap<(String, String), Known>,
    last_resync: Option<Instant>,
}

/// The SDS documents of the client Secret (see above).
fn sds_documents() -> impl Iterator<Item = (&'static str, String)> {
    let dir = names::XDS_CERT_DIR;
    let tls = translate::output::bootstrap::XdsClientTls {
        cert_chain_file: format!("{dir}/tls.crt"),
        private_key_file: format!("{dir}/tls.key"),
        ca_file: format!("{dir}/ca.crt"),
        // Not part of the SDS documents (the SAN check is in the bootstrap).
        server_name: String::new(),
    };
    translate::output::bootstrap::xds_client_sds(&tls, dir)
        .into_iter()
        .map(|(file, doc)| (file, doc.to_string()))
}

fn secret_text(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

impl Issuer {
    fn ca_what(&self) -> String {
        format!("Secret {}/{}", self.config.namespace, self.config.ca_secret)
    }

    /// The CA Secret (created if absent) and its resourceVersion.
    async fn ca(&self) -> Result<(CaSet, Option<String>), IssuerError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let what = self.ca_what();
        let existing = api
            .get_opt(&self.config.ca_secret)
            .await
            .map_err(api_err(format!("get {what}")))?;
        let secret = match existing {
            Some(s) => s,
            None => {
                let set = CaSet::new(Ca::generate(SystemTime::now(), self.config.timing.ca_validity)?);
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.config.ca_secret.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
                        ..Default::default()
                    },
                    type_: Some("Opaque".into()),
                    data: Some(
                        set.to_data()
                            .into_iter()
                            .map(|(k, v)| (k, ByteString(v)))
                            .collect(),
                    ),
                    ..Default::default()
                };
                match api.create(&PostParams::default(), &secret).await {
                    Ok(s) => {
                        tracing::info!(secret = %what, "xDS CA created");
                        s
                    }
                    // Another replica created it first: use theirs.
                    Err(kube::Error::Api(e)) if e.code == 409 => api
                        .get(&self.config.ca_secret)
                        .await
                        .map_err(api_err(format!("get {what}")))?,
                    Err(e) => return Err(api_err(format!("create {what}"))(e)),
                }
            }
        };
        let data: BTreeMap<String, Vec<u8>> = secret
            .data
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        let set = CaSet::from_data(&data, &what)?;
        Ok((set, secret.metadata.resource_version))
    }

    /// The leader's CA rotation step, if one is due; the set in force.
    async fn rotate(&self, set: CaSet, version: Option<String>) -> Result<CaSet, IssuerError> {
        let now = SystemTime::now();
        let Some(step) = plan_rotation(&set, now, &self.config.timing) else {
            return Ok(set);
        };
        let next = rotate(&set, step, now, &self.config.timing)?;
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let what = self.ca_what();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.config.ca_secret.clone()),
                namespace: Some(self.config.namespace.clone()),
                // Optimistic concurrency: a concurrent writer wins, this
                // replica reads theirs at the next check.
                resource_version: version,
                labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some(
                next.to_data()
                    .into_iter()
                    .map(|(k, v)| (k, ByteString(v)))
                    .collect(),
            ),
            ..Default::default()
        };
        api.replace(&self.config.ca_secret, &PostParams::default(), &secret)
            .await
            .map_err(api_err(format!("update {what}")))?;
        let name = match step {
            crate::xds_ca::Rotation::AddNext => "add_next",
            crate::xds_ca::Rotation::Promote => "promote",
            crate::xds_ca::Rotation::DropPrevious => "drop_previous",
        };
        self.metrics
            .rotations
            .get_or_create(&StepLabels { step: name.into() })
            .inc();
        tracing::info!(secret = %what, step = name, "xDS CA rotation");
        Ok(next)
    }

    /// This replica's server certificate, issued again when due.
    fn server(&mut self, set: &CaSet) -> Result<Option<ServerMaterial>, IssuerError> {
        let expected = Expected::Server {
            dns_names: &self.config.server_names,
        };
        let current = self.server.as_ref();
        let Some(reason) = reissue(
            current.map(|m| m.cert_chain_pem.as_str()),
            current.map(|m| m.client_ca_pem.as_str()),
            &expected,
            set,
            SystemTime::now(),
            &self.config.timing,
        ) else {
            return Ok(None);
        };
        let issued = set.current.issue_server(
            &self.config.server_names,
            SystemTime::now(),
            self.config.timing.cert_validity,
        )?;
        let material = ServerMaterial {
            cert_chain_pem: issued.cert_pem,
            key_pem: issued.key_pem,
            client_ca_pem: set.bundle(),
        };
        self.count("server", reason);
        tracing::info!(reason = reason.as_str(), "xDS server certificate issued");
        self.server = Some(material.clone());
        Ok(Some(material))
    }

    fn count(&self, kind: &str, reason: Reissue) {
        self.metrics
            .issued
            .get_or_create(&IssueLabels {
                kind: kind.into(),
                reason: reason.as_str().into(),
            })
            .inc();
    }

    /// `(namespace, name, uid)` of every Gateway of our GatewayClasses.
    fn our_gateways(&self) -> Vec<(String, String, String)> {
        let ours: HashSet<String> = self
            .stores
            .all(Kind::GatewayClass)
            .iter()
            .filter(|c| {
                c.data["spec"]["controllerName"].as_str() == Some(self.config.controller_name.as_str())
            })
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        self.stores
            .all(Kind::Gateway)
            .iter()
            .filter(|g| {
                g.data["spec"]["gatewayClassName"]
                    .as_str()
                    .is_some_and(|c| ours.contains(c))
            })
            .filter(|g| g.metadata.deletion_timestamp.is_none())
            .filter_map(|g| {
                Some((
                    g.metadata.namespace.clone()?,
                    g.metadata.name.clone()?,
                    g.metadata.uid.clone()?,
                ))
            })
            .collect()
    }

    /// The leader's pass over the client Secrets.
    async fn clients(&mut self, set: &CaSet) {
        let resync = self.last_resync.is_none_or(|t| t.elapsed() >= self.config.resync);
        if resync {
            self.last_resync = Some(Instant::now());
        }
        let gateways = self.our_gateways();
        let live: HashSet<(String, String)> = gateways
            .iter()
            .map(|(ns, n, _)| (ns.clone(), n.clone()))
            .collect();
        for (ns, name, uid) in gateways {
            if let Err(e) = self.client_secret(set, &ns, &name, &uid, resync).await {
                self.metrics.failures.inc();
                tracing::warn!(gateway = %format!("{ns}/{name}"), error = %e, "xDS client certificate not written");
            }
        }
        // A Gateway seen before and not ours now: its Secret goes at once
        // (the resync below also catches those no replica remembers).
        let gone: Vec<(String, String)> = self
            .known
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        self.known.retain(|k, _| live.contains(k));
        for (ns, gw) in gone {
            if let Err(e) = self.delete_client_secret(&ns, &gw).await {
                self.metrics.failures.inc();
                tracing::warn!(error = %e, "xDS client Secret of a Gateway no longer ours not deleted");
            }
        }
        if resync && let Err(e) = self.delete_orphans(&live).await {
            self.metrics.failures.inc();
            tracing::warn!(error = %e, "xDS client Secrets of Gateways no longer ours not deleted");
        }
    }

    async fn client_secret(
        &mut self,
        set: &CaSet,
        ns: &str,
        gw: &str,
        uid: &str,
        resync: bool,
    ) -> Result<(), IssuerError> {
        let key = (ns.to_string(), gw.to_string());
        let secret_name = names::xds_client_secret(gw);
        let identity = names::xds_identity(ns, gw);
        let expected = Expected::Client { identity: &identity };
        let now = SystemTime::now();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        // From memory, unless it is time to read the API again (someone
        // may have deleted or edited it) or the Gateway was re-created.
        let (cert, bundle) = match self.known.get(&key) {
            Some(k) if !resync && k.uid == uid && k.checked.elapsed() < self.config.resync => {
                (Some(k.cert_pem.clone()), Some(k.bundle.clone()))
            }
            _ => {
                let existing = api
                    .get_opt(&secret_name)
                    .await
                    .map_err(api_err(format!("get Secret {ns}/{secret_name}")))?;
                if let Some(s) = &existing {
                    let labels = s.metadata.labels.clone().unwrap_or_default();
                    if labels.get(MANAGED_BY.0).map(String::as_str) != Some(MANAGED_BY.1) {
                        return Err(IssuerError::Foreign {
                            namespace: ns.into(),
                            name: secret_name,
                        });
                    }
                }
                let owned = existing.as_ref().is_some_and(|s| {
                    s.metadata
                        .owner_references
                        .as_ref()
                        .is_some_and(|o| o.iter().any(|o| o.uid == uid))
                });
                let cert = existing.as_ref().and_then(|s| secret_text(s, "tls.crt"));
                let bundle = existing.as_ref().and_then(|s| secret_text(s, "ca.crt"));
                // Owned by a former Gateway of that name: issue anew.
                if owned { (cert, bundle) } else { (None, None) }
            }
        };
        let Some(reason) = reissue(
            cert.as_deref(),
            bundle.as_deref(),
            &expected,
            set,
            now,
            &self.config.timing,
        ) else {
            if let Some(k) = self.known.get_mut(&key)
                && resync
            {
                k.checked = Instant::now();
            }
            if !self.known.contains_key(&key)
                && let (Some(cert_pem), Some(bundle)) = (cert, bundle)
            {
                self.known.insert(
                    key,
                    Known {
                        uid: uid.into(),
                        cert_pem,
                        bundle,
                        checked: Instant::now(),
                    },
                );
            }
            return Ok(());
        };
        let issued = set
            .current
            .issue_client(&identity, now, self.config.timing.cert_validity)?;
        let bundle = set.bundle();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(secret_name.clone()),
                namespace: Some(ns.into()),
                labels: Some(
                    names::labels(ns, gw)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                ),
                owner_references: Some(vec![OwnerReference {
                    api_version: "gateway.networking.k8s.io/v1".into(),
                    kind: "Gateway".into(),
                    name: gw.into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(
                [
                    ("tls.crt", issued.cert_pem.clone()),
                    ("tls.key", issued.key_pem),
                    ("ca.crt", bundle.clone()),
                ]
                .into_iter()
                .chain(sds_documents())
                .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
                .collect(),
            ),
            ..Default::default()
        };
        api.patch(
            &secret_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(api_err(format!("apply Secret {ns}/{secret_name}")))?;
        self.count("client", reason);
        tracing::info!(secret = %format!("{ns}/{secret_name}"), reason = reason.as_str(), "xDS client certificate issued");
        self.known.insert(
            key,
            Known {
                uid: uid.into(),
                cert_pem: issued.cert_pem,
                bundle,
                checked: Instant::now(),
            },
        );
        Ok(())
    }

    /// Deletes the client Secret of Gateway `ns/gw` if it is ours (a
    /// deleted Gateway's is already gone or going: not found is fine).
    async fn delete_client_secret(&self, ns: &str, gw: &str) -> Result<(), IssuerError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let name = names::xds_client_secret(gw);
        let Some(s) = api
            .get_opt(&name)
            .await
            .map_err(api_err(format!("get Secret {ns}/{name}")))?
        else {
            return Ok(());
        };
        let ours = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY.0))
            .is_some_and(|v| v == MANAGED_BY.1);
        if !ours {
            return Ok(());
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(secret = %format!("{ns}/{name}"), "xDS client Secret of a Gateway no longer ours deleted");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(api_err(format!("delete Secret {ns}/{name}"))(e)),
        }
    }

    /// Deletes client Secrets (ours by label and name) whose Gateway is
    /// not one of ours any more (its class changed; a deleted Gateway's
    /// go with it through the owner reference).
    async fn delete_orphans(&self, live: &HashSet<(String, String)>) -> Result<(), IssuerError> {
        let api: Api<Secret> = Api::all(self.client.clone());
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let list = api
            .list(
                &ListParams::default()
                    .labels(&selector)
                    .fields("type=kubernetes.io/tls"),
            )
            .await
            .map_err(api_err("list xDS client Secrets"))?;
        for s in list.items {
            let (Some(ns), Some(name)) = (s.metadata.namespace.clone(), s.metadata.name.clone()) else {
                continue;
            };
            // Only the client Secret: owned by a Gateway and named after it.
            let owner = s
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.iter().find(|o| o.kind == "Gateway"))
                .map(|o| o.name.clone());
            let Some(owner) = owner else { continue };
            if name != names::xds_client_secret(&owner) {
                continue;
            }
            if !live.contains(&(ns.clone(), owner.clone())) {
                Api::<Secret>::namespaced(self.client.clone(), &ns)
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map_err(api_err(format!("delete Secret {ns}/{name}")))?;
                tracing::info!(secret = %format!("{ns}/{name}"), "xDS client Secret of a Gateway no longer ours deleted");
            }
        }
        Ok(())
    }

    /// One check: the CA (and its rotation, if leading), the server
    /// certificate, the client Secrets (if leading).
    async fn tick(
        &mut self,
        leading: bool,
        tx: &watch::Sender<Option<ServerMaterial>>,
    ) -> Result<(), IssuerError> {
        let (mut set, version) = self.ca().await?;
        if leading {
            set = self.rotate(set, version).await?;
        }
        if let Some(m) = self.server(&set)? {
            tx.send_replace(Some(m));
        }
        if leading {
            self.clients(&set).await;
        }
        Ok(())
    }
}

/// Prepares the CA (creating its Secret if absent) and this replica's
/// server certificate, then keeps them and (while `leader` says so) the
/// client Secrets current. Returns once the first server certificate is
/// issued (retrying while the apiserver cannot be reached); the task stops
/// when the handle is aborted.
pub async fn start(
    client: Client,
    config: IssuerConfig,
    stores: Stores,
    mut leader: watch::Receiver<bool>,
    mut wake: watch::Receiver<Arc<provider::Snapshot>>,
    metrics: IssuerMetrics,
) -> Result<
    (
        watch::Receiver<Option<ServerMaterial>>,
        tokio::task::JoinHandle<()>,
    ),
    IssuerError,
> {
    config.timing.validate()?;
    let (tx, mut rx) = watch::channel(None);
    let mut issuer = Issuer {
        client,
        config,
        stores,
        metrics,
        server: None,
        known: HashMap::new(),
        last_resync: None,
    };
    let mut backoff = Duration::from_millis(500);
    loop {
        let leading = *leader.borrow();
        match issuer.tick(leading, &tx).await {
            Ok(()) if rx.borrow_and_update().is_some() => break,
            Ok(()) => {}
            // A CA Secret that cannot be read is the operator's to fix:
            // serving xDS with a CA of our own would split the replicas.
            Err(e @ IssuerError::Ca(_)) => return Err(e),
            Err(e) => {
                issuer.metrics.failures.inc();
                tracing::warn!(error = %e, "xDS CA not ready; retrying");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(issuer.config.interval) => {}
                changed = leader.changed() => if changed.is_err() { return },
                changed = wake.changed() => if changed.is_err() { return },
            }
            let leading = *leader.borrow_and_update();
            let _ = wake.borrow_and_update();
            if let Err(e) = issuer.tick(leading, &tx).await {
                issuer.metrics.failures.inc();
                tracing::warn!(error = %e, "xDS certificates not checked");
            }
        }
    });
    Ok((rx, task))
}
