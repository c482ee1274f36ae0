//! Lookup tables over the input snapshot, built once per translation.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};

use api::Inputs;
use api::gateway_api::experimental::referencegrants::ReferenceGrant;
use api::k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use api::k8s_openapi::api::discovery::v1::EndpointSlice;

/// `(namespace, name)` of a namespaced object.
pub type Key = (String, String);

pub fn ns_name(meta: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The (namespace, name) of the Service an EndpointSlice belongs to: its
/// label `kubernetes.io/service-name` (a slice without it serves none).
pub fn service_of_slice(slice: &EndpointSlice) -> Option<(&str, &str)> {
    let meta = &slice.metadata;
    let name = meta.labels.as_ref()?.get("kubernetes.io/service-name")?;
    Some((meta.namespace.as_deref().unwrap_or("default"), name))
}

/// The labels of each namespace with a manifest, as selectors see them:
/// its own, and `kubernetes.io/metadata.name` as the API server sets it;
/// of two manifests for one namespace, the first counts.
pub(crate) fn namespace_labels(
    namespaces: &[api::Sourced<Namespace>],
) -> HashMap<String, BTreeMap<String, String>> {
    let mut out: HashMap<String, BTreeMap<String, String>> = HashMap::with_capacity(namespaces.len());
    for ns in namespaces {
        let Some(name) = ns.object.metadata.name.clone() else {
            continue;
        };
        let mut labels = ns.object.metadata.labels.clone().unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), name.clone());
        out.entry(name).or_insert(labels);
    }
    out
}

/// The labels of namespace `ns` among `labels` ([`namespace_labels`]); a
/// namespace with no manifest still has its `kubernetes.io/metadata.name`
/// label, as the API server would set.
pub(crate) fn labels_in(
    labels: &HashMap<String, BTreeMap<String, String>>,
    ns: &str,
) -> BTreeMap<String, String> {
    labels
        .get(ns)
        .cloned()
        .unwrap_or_else(|| BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.to_string())]))
}

pub struct Index<'a> {
    pub namespace_labels: HashMap<String, BTreeMap<String, String>>,
    /// (namespace, name) → Service (borrowed keys: lookups do not allocate).
    /// Read only through [`Index::service`], which notes the lookup.
    services: HashMap<(&'a str, &'a str), &'a Service>,
    /// Service lookups made outside a per-route recording, when the
    /// incremental translator asks for them (`crate::service_reads`).
    unscoped_service_reads: Option<crate::service_reads::Unscoped>,
    /// EndpointSlices by the (namespace, name) of the Service they belong to
    /// (label `kubernetes.io/service-name`; borrowed keys: building the
    /// index allocates none per slice). Built when first read: only
    /// clusters resolved this call read it ([`Index::slices_of`]), none
    /// after most incremental edits.
    endpoint_slices: std::sync::OnceLock<HashMap<(&'a str, &'a str), Vec<&'a EndpointSlice>>>,
    slices: &'a [api::Sourced<EndpointSlice>],
    /// Read only through [`Index::secret`], which notes the lookup.
    secrets: HashMap<(&'a str, &'a str), &'a Secret>,
    /// Secret lookups, when the incremental translator asks for them
    /// (`incremental/secrets.rs`).
    secret_reads: Option<crate::service_reads::Unscoped>,
    /// Read only through [`Index::reference_grants_in`], which notes the
    /// lookup.
    reference_grants: Vec<&'a ReferenceGrant>,
    /// Which endpoint addresses may be used (from the settings).
    pub endpoint_guard: crate::endpoint_guard::EndpointGuard,
    /// Registered extension kinds and their objects (set when hooks are
    /// given, see `extension::resources`).
    pub extensions: Option<crate::extension::resources::Extensions>,
}

impl<'a> Index<'a> {
    pub fn new(inputs: &'a Inputs) -> Self {
        Self {
            namespace_labels: namespace_labels(&inputs.namespaces),
            services: by_name(
                inputs.services.len(),
                inputs.services.iter().map(|s| (&s.object.metadata, &*s.object)),
            ),
            unscoped_service_reads: None,
            endpoint_slices: std::sync::OnceLock::new(),
            slices: &inputs.endpoint_slices,
            secrets: by_name(
                inputs.secrets.len(),
                inputs.secrets.iter().map(|s| (&s.object.metadata, &*s.object)),
            ),
            secret_reads: None,
            reference_grants: inputs.reference_grants.iter().map(|g| &*g.object).collect(),
            endpoint_guard: Default::default(),
            extensions: None,
        }
    }

    /// The EndpointSlices of Service `ns/name`, by name.
    pub fn slices_of<'s>(&'s self, ns: &'s str, name: &'s str) -> &'s [&'s EndpointSlice] {
        let by_service = self.endpoint_slices.get_or_init(|| {
            let mut by_service: HashMap<(&str, &str), Vec<&EndpointSlice>> =
                HashMap::with_capacity(self.slices.len());
            for es in self.slices {
                if let Some(service) = service_of_slice(&es.object) {
                    by_service.entry(service).or_default().push(&es.object);
                }
            }
            for slices in by_service.values_mut() {
                slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            }
            by_service
        });
        by_service.get(&(ns, name)).map_or(&[], Vec::as_slice)
    }

    /// Service `ns/name`. The lookup is noted (found or not) for the
    /// incremental translator: in the recording open on this thread, else
    /// as unscoped when [`Index::record_lookups`] asked for it
    /// (`crate::service_reads`).
    pub fn service(&self, ns: &str, name: &str) -> Option<&'a Service> {
        if let Some(unscoped) = &self.unscoped_service_reads {
            let key = crate::service_reads::key(ns, name);
            if !crate::service_reads::note(key) {
                unscoped.note(key);
            }
        }
        self.service_untracked(ns, name)
    }

    /// The ReferenceGrants of namespace `ns` (where a grant for a
    /// reference into `ns` must live). The lookup is noted as a Service
    /// lookup is ([`Index::service`]), under the namespace's grants key
    /// (`service_reads::grants_key`): an edit of ReferenceGrants then
    /// rebuilds only the routes that looked into a changed grant's
    /// namespace (`incremental/reference_grants.rs`).
    pub fn reference_grants_in<'s>(&'s self, ns: &'s str) -> impl Iterator<Item = &'a ReferenceGrant> + 's {
        if let Some(unscoped) = &self.unscoped_service_reads {
            let key = crate::service_reads::grants_key(ns);
            if !crate::service_reads::note(key) {
                unscoped.note(key);
            }
        }
        self.reference_grants
            .iter()
            .copied()
            .filter(move |g| g.metadata.namespace.as_deref().unwrap_or("default") == ns)
    }

    /// Service `ns/name`, the lookup not noted: only for the readers the
    /// incremental translator rebuilds by their own rule when a Service
    /// changes (ClusterLoadAssignments, the endpoint guard:
    /// `incremental/services.rs`).
    pub fn service_untracked(&self, ns: &str, name: &str) -> Option<&'a Service> {
        self.services.get(&(ns, name)).copied()
    }

    /// Notes Service and Secret lookups from now on
    /// (`crate::service_reads`, `incremental/secrets.rs`).
    pub(crate) fn record_lookups(&mut self) {
        self.unscoped_service_reads = Some(Default::default());
        self.secret_reads = Some(Default::default());
    }

    /// The Service lookups made outside any recording since
    /// [`Index::record_lookups`].
    pub(crate) fn unscoped_service_reads(&mut self) -> Option<crate::service_reads::Reads> {
        self.unscoped_service_reads.take().map(|u| u.into_reads())
    }

    /// Secret `ns/name`. The lookup is noted (found or not) for the
    /// incremental translator when [`Index::record_lookups`] asked
    /// for it: never per route, always for the whole call
    /// (`incremental/secrets.rs`).
    pub fn secret(&self, ns: &str, name: &str) -> Option<&'a Secret> {
        if let Some(reads) = &self.secret_reads {
            reads.note(crate::service_reads::key(ns, name));
        }
        self.secrets.get(&(ns, name)).copied()
    }

    /// The Secret lookups made since [`Index::record_lookups`].
    pub(crate) fn secret_reads(&mut self) -> Option<crate::service_reads::Reads> {
        self.secret_reads.take().map(|u| u.into_reads())
    }

    /// Labels of a namespace ([`labels_in`]). Asked only for the namespace
    /// of the object asking (a route's, a ListenerSet's): the incremental
    /// translator relies on it (`incremental/namespaces.rs`).
    pub fn labels_of_namespace(&self, ns: &str) -> BTreeMap<String, String> {
        labels_in(&self.namespace_labels, ns)
    }
}

type Meta = api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Objects by (namespace, name); `n` of them (sized once: the index is
/// built on every translation).
fn by_name<'a, T>(
    n: usize,
    items: impl Iterator<Item = (&'a Meta, &'a T)>,
) -> HashMap<(&'a str, &'a str), &'a T> {
    let mut out = HashMap::with_capacity(n);
    for (meta, obj) in items {
        let ns = meta.namespace.as_deref().unwrap_or("default");
        let name = meta.name.as_deref().unwrap_or_default();
        // The loader keeps the first of duplicates; so does the index.
        out.entry((ns, name)).or_insert(obj);
    }
    out
}
