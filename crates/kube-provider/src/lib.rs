//! The Kubernetes provider: kube-runtime reflectors over every kind the
//! translator reads, coalesced into the same [`provider::Snapshot`]s the
//! file provider publishes, so `portcullis controller` shares everything
//! after the provider with `serve` (see `portcullis::serve`, "the provider
//! seam"); and the status writer ([`status`]) that writes the translator's
//! status back with server-side apply.
//!
//! # Data model
//!
//! One reflector store per [`Kind`], holding the objects as the apiserver
//! returned them (`DynamicObject`: untyped JSON). A snapshot is built from
//! the stores by reading each object through the **same loader as file
//! mode** (`api::loader`): the object's JSON (without `status` and
//! `managedFields`) is loaded as a one-document file named
//! `api:<plural>/<namespace>/<name>.json`, so a field that does not parse
//! is reported exactly as in file mode (kind, namespace/name, field path),
//! and an HTTPRoute rule with an unreadable value is fenced, not dropped.
//! The load of each object is cached by `resourceVersion`: an event
//! re-reads only the object it names. `resourceVersion` and
//! `managedFields` are not part of what is loaded, so a change of `status`
//! alone (our own status writes) builds an equal snapshot and publishes
//! nothing.
//!
//! # When snapshots are published
//!
//! - Nothing before every kind's initial list is complete ([`start`]
//!   returns once the first snapshot is built from complete lists).
//! - Events are coalesced: a burst is built `debounce` after its last event
//!   and at most `max_delay` after its first ([`Options`]); a build whose
//!   result equals the previous snapshot publishes nothing.
//! - Watch errors (an outage, `410 Gone`, a relist) never shrink the
//!   snapshot: a reflector keeps its store through errors, and a relist
//!   replaces the store only once the new list is complete (kube-runtime's
//!   `InitDone`). The watcher retries with backoff; errors are logged and
//!   counted ([`metrics::KubeMetrics`]).
//! - A kind whose resource the apiserver does not serve (a CRD not
//!   installed) is reported once and read as empty.
//!
//! Secrets: only `type=kubernetes.io/tls` (a field selector), the only
//! Secrets a Gateway listener can use, and of those only the metadata is
//! watched; the data of a Secret is fetched (and held) only while a
//! Gateway or ListenerSet listener references it, again when its
//! `resourceVersion` changes. The provider never holds the cluster's other
//! Secrets.

pub mod leader;
pub mod metrics;
pub mod names;
pub mod provision;
pub mod status;
pub mod xds_ca;
pub mod xds_issuer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::loader::Loaded;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, watch};

pub use kube::Client;

/// A kind the provider watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    GatewayClass,
    Gateway,
    ListenerSet,
    HttpRoute,
    GrpcRoute,
    ReferenceGrant,
    Namespace,
    Service,
    EndpointSlice,
    Secret,
    TrafficPolicy,
    GatewayExtension,
    GatewayParameters,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::GatewayClass,
        Kind::Gateway,
        Kind::ListenerSet,
        Kind::HttpRoute,
        Kind::GrpcRoute,
        Kind::ReferenceGrant,
        Kind::Namespace,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
        Kind::TrafficPolicy,
        Kind::GatewayExtension,
        Kind::GatewayParameters,
    ];

    /// `(group, version, kind, plural, namespaced)`: the versions are the
    /// storage versions of Gateway API v1.5.1 (`crds/gateway-api/`).
    pub fn resource(self) -> (&'static str, &'static str, &'static str, &'static str, bool) {
        const GW: &str = "gateway.networking.k8s.io";
        match self {
            Kind::GatewayClass => (GW, "v1", "GatewayClass", "gatewayclasses", false),
            Kind::Gateway => (GW, "v1", "Gateway", "gateways", true),
            Kind::ListenerSet => (GW, "v1", "ListenerSet", "listenersets", true),
            Kind::HttpRoute => (GW, "v1", "HTTPRoute", "httproutes", true),
            Kind::GrpcRoute => (GW, "v1", "GRPCRoute", "grpcroutes", true),
            Kind::ReferenceGrant => (GW, "v1beta1", "ReferenceGrant", "referencegrants", true),
            Kind::Namespace => ("", "v1", "Namespace", "namespaces", false),
            Kind::Service => ("", "v1", "Service", "services", true),
            Kind::EndpointSlice => ("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true),
            Kind::Secret => ("", "v1", "Secret", "secrets", true),
            Kind::TrafficPolicy => (
                api::policy::GROUP,
                api::policy::VERSION,
                "TrafficPolicy",
                "trafficpolicies",
                true,
            ),
            Kind::GatewayExtension => (
                api::policy::GROUP,
                api::policy::VERSION,
                "GatewayExtension",
                "gatewayextensions",
                true,
            ),
            Kind::GatewayParameters => (
                api::policy::GROUP,
                api::policy::VERSION,
                api::gateway_parameters::KIND,
                "gatewayparameters",
                true,
            ),
        }
    }

    pub fn name(self) -> &'static str {
        self.resource().2
    }

    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural, _) = self.resource();
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }

    pub fn namespaced(self) -> bool {
        self.resource().4
    }

    /// The kind named `kind` (as in `ObjectStatus::kind`).
    pub fn from_name(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == kind)
    }

    fn field_selector(self) -> Option<&'static str> {
        match self {
            Kind::Secret => Some("type=kubernetes.io/tls"),
            _ => None,
        }
    }
}

/// How events are coalesced (Contour's holdoff is 100 ms, capped at 500).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Quiet time after the last event of a burst. Default 20 ms.
    pub debounce: Duration,
    /// Longest time from the first event of a burst to its build. Default 500 ms.
    pub max_delay: Duration,
    /// Fill `Inputs::provisioned_addresses` from the Services the
    /// provisioner made ([`provision::addresses`]). Default false.
    pub provisioned_addresses: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(20),
            max_delay: Duration::from_millis(500),
            provisioned_addresses: false,
        }
    }
}

/// Why the provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the {kind} reflector stopped before its initial list completed")]
    Stopped { kind: &'static str },
    #[error("the snapshot builder stopped before the first snapshot")]
    NoSnapshot,
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
}

/// A client from a kubeconfig file, or (`None`) the default: in-cluster
/// configuration, else `$KUBECONFIG` / `~/.kube/config`.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<Client, StartError> {
    let error = |message: String| StartError::Kubeconfig {
        path: kubeconfig.map_or_else(|| "(default)".into(), |p| p.display().to_string()),
        message,
    };
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| error(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| error(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| error(e.to_string()))
}

/// The reflector stores, by kind (a kind the apiserver does not serve has
/// none). Shared with the status writer, which reads the live objects.
#[derive(Clone)]
pub struct Stores {
    stores: Arc<HashMap<Kind, Store<DynamicObject>>>,
    /// Secrets: metadata only.
    secrets: Option<Store<PartialObjectMeta<DynamicObject>>>,
}

impl Stores {
    /// The live object, if the store has it.
    pub fn get(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let store = self.stores.get(&kind)?;
        let mut key = reflector::ObjectRef::new_with(name, kind.api_resource());
        if kind.namespaced() {
            key = key.within(namespace.unwrap_or("default"));
        }
        store.get(&key)
    }

    /// Every object of `kind`.
    pub fn all(&self, kind: Kind) -> Vec<Arc<DynamicObject>> {
        self.stores.get(&kind).map(Store::state).unwrap_or_default()
    }
}

/// A running provider: its tasks stop when it is dropped.
pub struct KubeProvider {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub stores: Stores,
}

impl Drop for KubeProvider {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts a reflector per kind and returns once every initial list is
/// complete and the first snapshot is built from them.
pub async fn start(
    client: Client,
    options: Options,
    metrics: metrics::KubeMetrics,
) -> Result<(KubeProvider, watch::Receiver<Arc<provider::Snapshot>>), StartError> {
    let changed = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    let mut stores = HashMap::new();
    let mut secrets = None;
    for kind in Kind::ALL {
        let ar = kind.api_resource();
        let (group, version, name, _, _) = kind.resource();
        // An apiserver that cannot be reached yet (the controller started
        // first, an outage) is waited for: nothing is served before the
        // initial lists anyway.
        let mut backoff = Duration::from_millis(500);
        let served = loop {
            match kube::discovery::pinned_kind(&client, &GroupVersionKind::gvk(group, version, name)).await {
                Ok(_) => break true,
                Err(kube::Error::Api(e)) if e.code == 404 => break false,
                Err(kube::Error::Discovery(_)) => break false,
                Err(error) => {
                    tracing::warn!(kind = name, %error, "cannot discover this kind; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        };
        if !served {
            tracing::warn!(
                kind = name,
                "the apiserver does not serve this kind (CRD not installed?): read as empty"
            );
            continue;
        }
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut config = watcher::Config::default();
        if let Some(fields) = kind.field_selector() {
            config = config.fields(fields);
        }
        let labels = metrics::KindLabels::of(kind);
        if kind == Kind::Secret {
            // Metadata only: the data of a Secret is fetched when a
            // listener references it (see `Builder::load_secrets`).
            let writer = reflector::store::Writer::<PartialObjectMeta<DynamicObject>>::new(ar.clone());
            secrets = Some(writer.as_reader());
            // `Api<PartialObjectMeta<_>>` asks for metadata only.
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &ar);
            let stream = watcher(api, config).default_backoff().reflect(writer);
            tasks.push(tokio::spawn(drive(
                stream,
                name,
                labels,
                metrics.clone(),
                changed.clone(),
            )));
            continue;
        }
        let writer = reflector::store::Writer::new(ar.clone());
        stores.insert(kind, writer.as_reader());
        let stream = watcher(api, config).default_backoff().reflect(writer);
        tasks.push(tokio::spawn(drive(
            stream,
            name,
            labels,
            metrics.clone(),
            changed.clone(),
        )));
    }
    let stores = Stores {
        stores: Arc::new(stores),
        secrets,
    };
    let provider = KubeProvider {
        tasks,
        stores: stores.clone(),
    };
    // Nothing is built before every initial list is complete.
    if let Some(store) = &stores.secrets {
        store
            .wait_until_ready()
            .await
            .map_err(|_| StartError::Stopped { kind: "Secret" })?;
    }
    for (kind, store) in stores.stores.iter() {
        let started = Instant::now();
        store
            .wait_until_ready()
            .await
            .map_err(|_| StartError::Stopped { kind: kind.name() })?;
        tracing::debug!(
            kind = kind.name(),
            ms = started.elapsed().as_millis() as u64,
            "initial list complete"
        );
    }
    let mut builder = Builder {
        client: client.clone(),
        metrics: metrics.clone(),
        cache: HashMap::new(),
        provisioned_addresses: options.provisioned_addresses,
    };
    let first = builder.build(&stores).await;
    let (tx, rx) = watch::channel(Arc::new(provider::Snapshot {
        generation: 1,
        loaded: first,
        debounce_latency: None,
    }));
    metrics.snapshots.inc();
    let mut provider = provider;
    provider.tasks.push(tokio::spawn(publish_loop(
        builder, stores, changed, tx, options, metrics,
    )));
    Ok((provider, rx))
}

async fn publish_loop(
    mut builder: Builder,
    stores: Stores,
    changed: Arc<Notify>,
    tx: watch::Sender<Arc<provider::Snapshot>>,
    options: Options,
    metrics: metrics::KubeMetrics,
) {
    let mut generation = 1;
    loop {
        changed.notified().await;
        let first = Instant::now();
        // Coalesce the burst.
        loop {
            let left = options.max_delay.saturating_sub(first.elapsed());
            if left.is_zero() {
                break;
            }
            let quiet = options.debounce.min(left);
            if tokio::time::timeout(quiet, changed.notified()).await.is_err() {
                break;
            }
        }
        let loaded = builder.build(&stores).await;
        if loaded == tx.borrow().loaded {
            continue;
        }
        generation += 1;
        metrics.snapshots.inc();
        let snapshot = provider::Snapshot {
            generation,
            loaded,
            debounce_latency: Some(first.elapsed()),
        };
        if tx.send(Arc::new(snapshot)).is_err() {
            return;
        }
    }
}

/// Drives one reflector: counts events and errors, wakes the builder.
async fn drive<K>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    name: &'static str,
    labels: metrics::KindLabels,
    metrics: metrics::KubeMetrics,
    changed: Arc<Notify>,
) {
    let mut initial = true;
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                metrics.watch_events.get_or_create(&labels).inc();
                changed.notify_one();
            }
            Ok(watcher::Event::InitDone) => {
                if !initial {
                    metrics.relists.get_or_create(&labels).inc();
                }
                initial = false;
                changed.notify_one();
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(error) => {
                // The store keeps its objects; the watcher retries.
                metrics.watch_errors.get_or_create(&labels).inc();
                tracing::warn!(kind = name, %error, "watch error; keeping the last objects and retrying");
            }
        }
    }
}

/// Loads objects, caching each object's load by `resourceVersion`.
struct Builder {
    client: Client,
    metrics: metrics::KubeMetrics,
    cache: HashMap<(Kind, String, String), (String, Loaded)>,
    provisioned_addresses: bool,
}

impl Builder {
    async fn build(&mut self, stores: &Stores) -> Loaded {
        let mut parts = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for kind in Kind::ALL {
            if kind == Kind::Secret {
                self.load_secrets(stores, &mut parts, &mut seen).await;
                continue;
            }
            let mut objects = stores.all(kind);
            objects.sort_by(|a, b| {
                (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                    .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
            });
            for object in objects {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let name = object.metadata.name.clone().unwrap_or_default();
                let version = object.metadata.resource_version.clone().unwrap_or_default();
                let key = (kind, namespace, name);
                seen.insert(key.clone());
                if let Some((v, loaded)) = self.cache.get(&key)
                    && *v == version
                {
                    parts.push(loaded.clone());
                    continue;
                }
                let loaded = load_object(kind, &object);
                self.cache.insert(key, (version, loaded.clone()));
                parts.push(loaded);
            }
        }
        self.cache.retain(|k, _| seen.contains(k));
        let held = self.cache.keys().filter(|k| k.0 == Kind::Secret).count();
        self.metrics.secrets_held.set(held as i64);
        let mut loaded = api::loader::merge(parts);
        if self.provisioned_addresses {
            loaded.inputs.provisioned_addresses = Some(provision::addresses::collect(stores));
        }
        loaded
    }

    /// The Secrets a listener references (and that exist as
    /// `kubernetes.io/tls` Secrets), fetched when their `resourceVersion`
    /// changed. A fetch that fails keeps the last good load: an outage
    /// never takes a certificate away.
    async fn load_secrets(
        &mut self,
        stores: &Stores,
        parts: &mut Vec<Loaded>,
        seen: &mut std::collections::HashSet<(Kind, String, String)>,
    ) {
        let Some(meta) = &stores.secrets else { return };
        let ar = Kind::Secret.api_resource();
        for (namespace, name) in referenced_secrets(stores) {
            let reference = reflector::ObjectRef::new_with(&name, ar.clone()).within(&namespace);
            let Some(object) = meta.get(&reference) else {
                continue;
            };
            let version = object.metadata.resource_version.clone().unwrap_or_default();
            let key = (Kind::Secret, namespace.clone(), name.clone());
            seen.insert(key.clone());
            if let Some((v, loaded)) = self.cache.get(&key)
                && *v == version
            {
                parts.push(loaded.clone());
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &ar);
            match api.get_opt(&name).await {
                Ok(Some(secret)) => {
                    let loaded = load_object(Kind::Secret, &secret);
                    self.cache.insert(key, (version, loaded.clone()));
                    parts.push(loaded);
                }
                // Deleted since: the metadata watch will say so.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(namespace, name, %error, "cannot read a referenced Secret; keeping its last version");
                    if let Some((_, loaded)) = self.cache.get(&key) {
                        parts.push(loaded.clone());
                    }
                }
            }
        }
    }
}

/// `namespace/name` of every Secret a Gateway or ListenerSet listener
/// names in `tls.certificateRefs` (the only Secrets the translator reads).
fn referenced_secrets(stores: &Stores) -> std::collections::BTreeSet<(String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for kind in [Kind::Gateway, Kind::ListenerSet] {
        for object in stores.all(kind) {
            let own = object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let listeners = object.data["spec"]["listeners"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for listener in listeners {
                let refs = listener["tls"]["certificateRefs"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for r in refs {
                    let core = r["group"].as_str().is_none_or(str::is_empty);
                    let secret = r["kind"].as_str().is_none_or(|k| k == "Secret");
                    if let (true, true, Some(name)) = (core, secret, r["name"].as_str()) {
                        let ns = r["namespace"].as_str().unwrap_or(&own).to_string();
                        out.insert((ns, name.to_string()));
                    }
                }
            }
        }
    }
    out
}

/// Reads one object through the file loader (see the module doc).
fn load_object(kind: Kind, object: &DynamicObject) -> Loaded {
    let (group, version, kind_name, plural, _) = kind.resource();
    let mut value = serde_json::to_value(object).unwrap_or(serde_json::Value::Null);
    if let Some(map) = value.as_object_mut() {
        // List items of built-in kinds come without their type.
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind_name.into());
        map.remove("status");
        // Neither changes what is translated; dropping them makes a
        // status write (ours included) load to the same snapshot, which
        // then publishes nothing (no translation per status write).
        if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
    }
    let file = format!(
        "api:{plural}/{}{}.json",
        object
            .metadata
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or("")
    );
    api::loader::load_str(&file, &value.to_string())
}
