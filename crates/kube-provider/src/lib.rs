//! The Kubernetes provider: kube-runtime reflectors over every kind the
//! translator reads, coalesced into the same [`provider::Snapshot`]s the
//! file provider publishes, so `portcullis controller` shares everything
//! after the provider with `serve` (see `portcullis::serve`, "the provider
//! seam"); and the status writer ([`status`]) that writes the translator's
//! status back with server-side apply.
//!
//! # Data model
//!
//! One reflector store per [`Resource`] — a built-in [`Kind`], or an
//! extension server's registered kind (config `extensionManager.resources`
//! and `policyResources`, watched as unstructured objects at the version
//! they were registered at) — holding the objects as the apiserver returned them
//! (`DynamicObject`: untyped JSON). A snapshot is built from
//! the stores by reading each object through the **same loader as file
//! mode** (`api::loader`): the object's JSON (without `status` and
//! `managedFields`) is loaded as a one-document file named
//! `api:<plural>/<namespace>/<name>.json`, so a field that does not parse
//! is reported exactly as in file mode (kind, namespace/name, field path),
//! and an HTTPRoute rule with an unreadable value is fenced, not dropped.
//! Each object is loaded **as it arrives** (in the reflector's stream,
//! before the store sees it: [`arrive`]), so an event re-reads only the
//! object it names; the build takes the fresh loads and keeps one per
//! object (`load.rs`). `resourceVersion` and `managedFields` are not part
//! of what is loaded, so a change of `status` alone (our own status
//! writes, one per changed route) loads the same, and the build stops
//! there: nothing is merged or published.
//!
//! What a store keeps of an object is what the controller reads from it
//! after the load ([`Keep`]): for most kinds only the object's identity
//! (name, namespace, `resourceVersion`, `generation`) and, for the kinds we
//! write status on, its `status` (the status writer merges with other
//! controllers' `status.parents` entries and keeps transition times); the
//! spec stays whole only where the provider reads it again (Gateway and
//! ListenerSet listeners and HTTPProxy roots name the Secrets to fetch,
//! GatewayClass and Gateway decide the xDS certificates and the
//! provisioned addresses, Services carry those addresses). No store keeps
//! `managedFields` or kubectl's `last-applied-configuration` (`slim`):
//! at 10,000 routes a store holding each route's spec as untyped JSON was
//! the controller's largest part (README, Kubernetes mode).
//!
//! # When snapshots are published
//!
//! - Nothing before every kind's initial list is complete ([`start`]
//!   returns once the first snapshot is built from complete lists).
//! - Events are coalesced: a burst is built `debounce` after its last event
//!   and at most `max_delay` after its first ([`Options`]); a build in
//!   which no object loads differently publishes nothing.
//! - Watch errors (an outage, `410 Gone`, a relist) never shrink the
//!   snapshot: a reflector keeps its store through errors, and a relist
//!   replaces the store only once the new list is complete (kube-runtime's
//!   `InitDone`). The watcher retries with [`backoff`] (250 ms doubling,
//!   capped at 3 s, jittered); errors are logged and counted
//!   ([`metrics::KubeMetrics`]).
//! - A kind whose resource the apiserver does not serve (a CRD not
//!   installed) is read as empty until its CRD appears: [`discovery`]
//!   watches CustomResourceDefinitions (metadata only) and starts the
//!   kind's reflector then, without a restart.
//!
//! Secrets (`secrets.rs`): only `type=kubernetes.io/tls` (a field selector),
//! the only Secrets a listener or an HTTPProxy can use, and of those only
//! the metadata is watched; the data of a Secret is fetched (and held) only
//! while a Gateway or ListenerSet listener, or an HTTPProxy root's
//! `tls.secretName`, references it, again when its `resourceVersion`
//! changes. The provider never holds the cluster's other Secrets.

// Module docs explain the data model to maintainers and link the private
// items that carry it (`cargo doc --document-private-items` resolves them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod backoff;
pub mod discovery;
pub mod leader;
mod load;
pub mod metrics;
pub mod names;
pub mod provision;
#[cfg(test)]
mod relist_tests;
mod secrets;
pub mod status;
pub mod xds_ca;
pub mod xds_issuer;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, watch};

pub use kube::Client;

/// A built-in kind the provider watches.
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
    HttpProxy,
    TlsCertificateDelegation,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
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
        Kind::HttpProxy,
        Kind::TlsCertificateDelegation,
    ];

    /// `(group, version, kind, plural, namespaced)`: the versions are the
    /// storage versions of Gateway API v1.5.1 (`crds/gateway-api/`) and
    /// Contour v1 (`crds/portcullis/httpproxies.yaml`, generated from
    /// `api::httpproxy`).
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
            Kind::HttpProxy => (
                api::httpproxy::GROUP,
                api::httpproxy::VERSION,
                "HTTPProxy",
                "httpproxies",
                true,
            ),
            Kind::TlsCertificateDelegation => (
                api::httpproxy::GROUP,
                api::httpproxy::VERSION,
                "TLSCertificateDelegation",
                "tlscertificatedelegations",
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

    /// What the store of this kind keeps of an object (see the crate doc).
    pub fn keep(self) -> Keep {
        match self {
            // Read again after the load: `secrets` (listeners' and roots'
            // certificate references), `xds_issuer` (our GatewayClasses'
            // Gateways), `provision::addresses` (Gateways, Services).
            Kind::GatewayClass | Kind::Gateway | Kind::ListenerSet | Kind::HttpProxy | Kind::Service => {
                Keep::Whole
            }
            // Status written back by us, merged with the live status.
            Kind::HttpRoute | Kind::GrpcRoute | Kind::TrafficPolicy => Keep::Status,
            Kind::ReferenceGrant
            | Kind::Namespace
            | Kind::EndpointSlice
            | Kind::Secret
            | Kind::GatewayExtension
            | Kind::GatewayParameters
            | Kind::TlsCertificateDelegation => Keep::Identity,
        }
    }

    fn field_selector(self) -> Option<&'static str> {
        match self {
            Kind::Secret => Some("type=kubernetes.io/tls"),
            _ => None,
        }
    }
}

/// What one reflector watches: a built-in kind, or a kind an extension
/// server registered (`(group, kind)` as in [`api::loader::Options`], at
/// the `version` it was registered at; its plural comes from discovery).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Kind(Kind),
    Extension {
        group: String,
        kind: String,
        /// The registered version, watched exactly (Envoy Gateway's
        /// extension manager does the same: the hooks receive the objects
        /// in the shape of the version their server registered). `None`
        /// (no version given, as in tests) takes the one discovery prefers.
        version: Option<String>,
    },
}

impl Resource {
    /// The kind's name, for logs and metric labels.
    pub fn name(&self) -> &str {
        match self {
            Resource::Kind(k) => k.name(),
            Resource::Extension { kind, .. } => kind,
        }
    }

    /// What the store of this resource keeps of an object (an extension
    /// kind is only loaded).
    pub fn keep(&self) -> Keep {
        match self {
            Resource::Kind(k) => k.keep(),
            Resource::Extension { .. } => Keep::Identity,
        }
    }

    /// Every resource the provider watches with `loader`'s extension kinds.
    fn all(loader: &api::loader::Options) -> Vec<Resource> {
        Kind::ALL
            .into_iter()
            .map(Resource::Kind)
            .chain(loader.extension_kinds.iter().map(|(group, kind)| {
                Resource::Extension {
                    group: group.clone(),
                    kind: kind.clone(),
                    version: loader
                        .extension_versions
                        .get(&(group.clone(), kind.clone()))
                        .cloned(),
                }
            }))
            .collect()
    }
}

/// How events are coalesced (Contour's holdoff is 100 ms, capped at 500),
/// and what the loader accepts.
#[derive(Clone, Debug)]
pub struct Options {
    /// Quiet time after the last event of a burst. Default 20 ms.
    pub debounce: Duration,
    /// Longest time from the first event of a burst to its build. Default 500 ms.
    pub max_delay: Duration,
    /// Fill `Inputs::provisioned_addresses` from the Services the
    /// provisioner made ([`provision::addresses`]). Default false.
    pub provisioned_addresses: bool,
    /// The extension servers' registered kinds: watched, and loaded as
    /// in file mode.
    pub loader: api::loader::Options,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(20),
            max_delay: Duration::from_millis(500),
            provisioned_addresses: false,
            loader: api::loader::Options::default(),
        }
    }
}

/// Why the provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the {kind} reflector stopped before its initial list completed")]
    Stopped { kind: String },
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

/// What a store keeps of an object once it is loaded (see the crate doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The object (its spec is read again after the load).
    Whole,
    /// Identity and `status` (we write status on this kind).
    Status,
    /// Identity only: name, namespace, `resourceVersion`, `generation`.
    Identity,
}

/// The loads of objects that arrived since the last build, by
/// `(namespace, name)` with their `resourceVersion`: filled by [`arrive`],
/// taken by the build (`load.rs`).
pub(crate) type Fresh = Arc<Mutex<HashMap<(String, String), (String, api::loader::Loaded)>>>;

/// One watched resource's store, with what it was discovered as.
#[derive(Clone)]
struct Watched {
    ar: ApiResource,
    namespaced: bool,
    store: Store<DynamicObject>,
    fresh: Fresh,
}

/// The reflector stores, by resource (a resource the apiserver does not
/// serve has none until its CRD appears). Shared with the status writer,
/// which reads the live objects.
#[derive(Clone, Default)]
pub struct Stores {
    stores: Arc<RwLock<BTreeMap<Resource, Watched>>>,
    /// Secrets: metadata only.
    secrets: Option<Store<PartialObjectMeta<DynamicObject>>>,
}

impl Stores {
    fn watched(&self, resource: &Resource) -> Option<Watched> {
        self.stores
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(resource)
            .cloned()
    }

    fn insert(&self, resource: Resource, watched: Watched) {
        self.stores
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(resource, watched);
    }

    /// Every resource that has a store, in a stable order.
    fn resources(&self) -> Vec<Resource> {
        self.stores
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// The live object, if the store has it.
    pub fn get(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let watched = self.watched(&Resource::Kind(kind))?;
        let mut key = reflector::ObjectRef::new_with(name, watched.ar.clone());
        if watched.namespaced {
            key = key.within(namespace.unwrap_or("default"));
        }
        watched.store.get(&key)
    }

    /// Every object of `kind`.
    pub fn all(&self, kind: Kind) -> Vec<Arc<DynamicObject>> {
        self.all_of(&Resource::Kind(kind))
    }

    /// Every object of `resource`.
    pub fn all_of(&self, resource: &Resource) -> Vec<Arc<DynamicObject>> {
        self.watched(resource)
            .map(|w| w.store.state())
            .unwrap_or_default()
    }

    /// Whether `resource` has a store (its kind is served and watched).
    pub fn watches(&self, resource: &Resource) -> bool {
        self.watched(resource).is_some()
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

/// What every reflector shares.
#[derive(Clone)]
struct Shared {
    client: Client,
    metrics: metrics::KubeMetrics,
    /// Woken by every event; the publish loop builds after a burst.
    changed: Arc<Notify>,
    /// What objects are loaded with ([`arrive`]).
    loader: api::loader::Options,
}

impl Shared {
    /// Starts the reflector of a discovered resource; its store is ready
    /// once the initial list is complete. Objects are loaded as they
    /// arrive ([`arrive`]) and kept as [`Resource::keep`] says.
    fn reflector(
        &self,
        resource: &Resource,
        ar: &ApiResource,
        namespaced: bool,
    ) -> (Watched, tokio::task::JoinHandle<()>) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), ar);
        let mut config = watcher::Config::default();
        if let Resource::Kind(kind) = resource
            && let Some(fields) = kind.field_selector()
        {
            config = config.fields(fields);
        }
        let writer = reflector::store::Writer::new(ar.clone());
        let store = writer.as_reader();
        let fresh = Fresh::default();
        let (keep, loader) = (resource.keep(), self.loader.clone());
        let (arrived, loaded_ar) = (fresh.clone(), ar.clone());
        let (pruned, listed) = (fresh.clone(), store.clone());
        let stream = backoff::retried(watcher(api, config))
            .map(move |mut event| {
                if let Ok(event) = &mut event {
                    arrive(event, &loaded_ar, &loader, keep, &arrived);
                }
                event
            })
            .reflect(writer)
            .inspect(move |event| {
                // The store now holds exactly the relist's objects: a load
                // of an object the relist no longer has (listed during a
                // relist that failed) will never be taken.
                if let Ok(watcher::Event::InitDone) = event {
                    prune(&pruned, &listed);
                }
            });
        let task = tokio::spawn(drive(
            stream,
            resource.name().to_string(),
            metrics::KindLabels::named(resource.name()),
            self.metrics.clone(),
            self.changed.clone(),
        ));
        (
            Watched {
                ar: ar.clone(),
                namespaced,
                store,
                fresh,
            },
            task,
        )
    }
}

/// What one watch event does before the store sees it: the object is
/// loaded (as in file mode, `load::load_object`) into `fresh`, then
/// reduced to what the store keeps (`keep`). A deleted object's unbuilt
/// load is dropped.
pub(crate) fn arrive(
    event: &mut watcher::Event<DynamicObject>,
    ar: &ApiResource,
    loader: &api::loader::Options,
    keep: Keep,
    fresh: &Fresh,
) {
    let key = |o: &DynamicObject| {
        (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    };
    match event {
        watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
            // What is loaded is slimmed too: kubectl's copy of the object
            // would be a second copy in every snapshot.
            slim(object);
            let loaded = load::load_object(ar, object, loader);
            let version = object.metadata.resource_version.clone().unwrap_or_default();
            fresh
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key(object), (version, loaded));
            reduce(object, keep);
        }
        watcher::Event::Delete(object) => {
            fresh
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key(object));
            slim(object);
            reduce(object, keep);
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

/// Drops the unbuilt loads of objects `store` does not hold.
fn prune(fresh: &Fresh, store: &Store<DynamicObject>) {
    let listed: std::collections::HashSet<(String, String)> = store
        .state()
        .iter()
        .map(|o| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    fresh
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|k, _| listed.contains(k));
}

/// Reduces a loaded object to what its store keeps (see [`Keep`]).
fn reduce(object: &mut DynamicObject, keep: Keep) {
    if keep == Keep::Whole {
        return;
    }
    let status = match (keep, &mut object.data) {
        (Keep::Status, serde_json::Value::Object(map)) => map.remove("status"),
        _ => None,
    };
    object.data = match status {
        Some(status) => serde_json::json!({ "status": status }),
        None => serde_json::Value::Object(serde_json::Map::new()),
    };
    let meta = &mut object.metadata;
    meta.labels = None;
    meta.annotations = None;
    meta.owner_references = None;
    meta.finalizers = None;
}

/// What a store keeps of an object: not `managedFields`, nor kubectl's
/// `last-applied-configuration` annotation (a second copy of the whole
/// object); nothing reads them, and at scale they are most of a store's
/// memory.
fn slim<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Starts a reflector per served resource and returns once every initial
/// list is complete and the first snapshot is built from them.
pub async fn start(
    client: Client,
    options: Options,
    metrics: metrics::KubeMetrics,
) -> Result<(KubeProvider, watch::Receiver<Arc<provider::Snapshot>>), StartError> {
    let shared = Shared {
        client: client.clone(),
        metrics: metrics.clone(),
        changed: Arc::new(Notify::new()),
        loader: options.loader.clone(),
    };
    let mut tasks = Vec::new();
    let mut found = BTreeMap::new();
    let mut missing = Vec::new();
    let mut secrets = None;
    for resource in Resource::all(&options.loader) {
        // An apiserver that cannot be reached yet (the controller started
        // first, an outage) is waited for: nothing is served before the
        // initial lists anyway.
        let mut retry = backoff::watch();
        let served = loop {
            match discovery::discover(&client, &resource).await {
                Ok(served) => break served,
                Err(error) => {
                    tracing::warn!(kind = resource.name(), %error, "cannot discover this kind; retrying");
                    tokio::time::sleep(retry.next().unwrap_or(backoff::CAP)).await;
                }
            }
        };
        let Some((ar, namespaced)) = served else {
            tracing::warn!(
                kind = resource.name(),
                "the apiserver does not serve this kind (CRD not installed?): read as empty until its CRD appears"
            );
            missing.push(resource);
            continue;
        };
        if resource == Resource::Kind(Kind::Secret) {
            // Metadata only: the data of a Secret is fetched when a
            // listener or an HTTPProxy references it (see `secrets`).
            let writer = reflector::store::Writer::<PartialObjectMeta<DynamicObject>>::new(ar.clone());
            secrets = Some(writer.as_reader());
            // `Api<PartialObjectMeta<_>>` asks for metadata only.
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &ar);
            let config = watcher::Config::default().fields("type=kubernetes.io/tls");
            let stream = backoff::retried(watcher(api, config))
                .modify(slim)
                .reflect(writer);
            tasks.push(tokio::spawn(drive(
                stream,
                "Secret".into(),
                metrics::KindLabels::of(Kind::Secret),
                metrics.clone(),
                shared.changed.clone(),
            )));
            continue;
        }
        let (watched, task) = shared.reflector(&resource, &ar, namespaced);
        tasks.push(task);
        found.insert(resource, watched);
    }
    let stores = Stores {
        secrets,
        ..Stores::default()
    };
    // Nothing is built before every initial list is complete.
    if let Some(store) = &stores.secrets {
        store.wait_until_ready().await.map_err(|_| StartError::Stopped {
            kind: "Secret".into(),
        })?;
    }
    for (resource, watched) in found {
        let started = Instant::now();
        watched
            .store
            .wait_until_ready()
            .await
            .map_err(|_| StartError::Stopped {
                kind: resource.name().to_string(),
            })?;
        tracing::debug!(
            kind = resource.name(),
            ms = started.elapsed().as_millis() as u64,
            "initial list complete"
        );
        stores.insert(resource, watched);
    }
    if !missing.is_empty() {
        tasks.push(tokio::spawn(discovery::late_kinds(
            shared.clone(),
            stores.clone(),
            missing,
        )));
    }
    let provider = KubeProvider {
        tasks,
        stores: stores.clone(),
    };
    let mut builder = load::Builder::new(client.clone(), metrics.clone(), options.loader.clone())
        .with_provisioned_addresses(options.provisioned_addresses);
    let first = builder.build(&stores).await.unwrap_or_default();
    let (tx, rx) = watch::channel(Arc::new(provider::Snapshot {
        generation: 1,
        loaded: first,
        debounce_latency: None,
    }));
    metrics.snapshots.inc();
    let mut provider = provider;
    provider.tasks.push(tokio::spawn(publish_loop(
        builder,
        stores,
        shared.changed,
        tx,
        options,
        metrics,
    )));
    Ok((provider, rx))
}

async fn publish_loop(
    mut builder: load::Builder,
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
        let waited = first.elapsed();
        let loaded = builder.build(&stores).await;
        tracing::debug!(
            coalesced_ms = waited.as_millis() as u64,
            build_ms = (first.elapsed() - waited).as_millis() as u64,
            changed = loaded.is_some(),
            "snapshot built"
        );
        // Nothing that loads differently (a status write): nothing to publish.
        let Some(loaded) = loaded else { continue };
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
    name: String,
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
