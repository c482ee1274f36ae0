//! The input snapshot: every object a provider has loaded, by kind.
//!
//! Data model: [`Inputs`] is a list per kind of [`Sourced`] entries; an
//! entry is where the object was read (file and line), the object behind
//! an `Arc`, and what in it could not be read. The object is built once by
//! the loader and then only shared: a provider's caches and every snapshot
//! built from them point at the same allocation, so cloning [`Inputs`]
//! copies entries (a source, a pointer, usually an empty list), never an
//! object, and an object that did not change between two snapshots is the
//! same pointer in both (ARCHITECTURE.md §1, "Shared objects").

use gateway_api::experimental::{
    gatewayclasses::GatewayClass, gateways::Gateway, grpcroutes::GrpcRoute, httproutes::HttpRoute,
    listenersets::ListenerSet, referencegrants::ReferenceGrant,
};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::sync::Arc;

use crate::Source;
use crate::gateway_parameters::GatewayParameters;
use crate::httpproxy::{HttpProxy, TlsCertificateDelegation};
use crate::policy::{GatewayExtension, TrafficPolicy};

/// An object together with where it was read from.
///
/// The object is shared, never copied: the loader builds it once, and
/// every holder after that — the file provider's
/// per-file state and its [`crate::loader::DocumentCache`], the Kubernetes
/// provider's per-object cache, every snapshot's [`Inputs`] and their
/// clones — points at that one allocation. An object whose document did
/// not change keeps its `Arc` across loads, so a consumer can tell
/// "unchanged" with [`Arc::ptr_eq`] before comparing values (the
/// incremental translator does). Code that must change an object after it
/// was shared uses [`Arc::make_mut`], which copies only when another
/// holder still points at it.
#[derive(Debug)]
pub struct Sourced<T> {
    pub source: Source,
    pub object: Arc<T>,
    /// Values inside the object's rules (HTTPRoute, GRPCRoute) or listeners
    /// (Gateway, ListenerSet) that could not be read, see [`Unreadable`];
    /// empty otherwise.
    pub unreadable: Vec<Unreadable>,
}

/// One value inside `spec.rules[rule]` of a route that could not be read
/// (an unknown enum value such as a filter `type`, a wrong type, a missing
/// required field). Gateway API gives such a route `Accepted=False` with
/// reason `UnsupportedValue`, but dropping the whole route would let the
/// traffic of its other rules fall to a broader route (fail open). So the
/// loader neutralises the value in `object` (removes it, or puts an inert
/// placeholder in its place, see `loader/objects.rs`) and records it here;
/// the translator replaces the whole rule with the 500 and fences every
/// match whose reading the value changed. `object` must therefore never be
/// programmed as written where `unreadable` names its rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unreadable {
    /// Index in the list the value lies in (as written), named by the
    /// path's first two steps: `spec.rules` (a route rule, fenced),
    /// `spec.listeners` (a Gateway or ListenerSet listener the loader
    /// replaced with an inert one, refused), `spec.hostnames` or
    /// `spec.parentRefs` (a route's entry, neutralised by the loader).
    pub rule: usize,
    /// Where the value is, from the object root, indexes as written.
    pub path: Vec<FieldStep>,
    /// Why it cannot be read, e.g. `unknown value "Foo", expected one of ...`.
    pub message: String,
}

impl<T> Sourced<T> {
    /// An object read from `source` with nothing unreadable in it.
    pub fn new(source: Source, object: T) -> Self {
        Self {
            source,
            object: Arc::new(object),
            unreadable: Vec::new(),
        }
    }

    /// Whether `self` and `other` carry equal objects with the same
    /// unreadable values (where they were read from is not compared). The
    /// same allocation is equal without a look inside; only different
    /// allocations are compared field by field.
    pub fn same(&self, other: &Self) -> bool
    where
        T: PartialEq,
    {
        self.unreadable == other.unreadable
            && (Arc::ptr_eq(&self.object, &other.object) || self.object == other.object)
    }
}

/// Not derived: a derived `Clone` would ask `T: Clone`. Without that bound
/// the compiler proves that cloning an entry (or a whole [`Inputs`])
/// copies no object.
impl<T> Clone for Sourced<T> {
    fn clone(&self) -> Self {
        Self {
            source: self.source.clone(),
            object: Arc::clone(&self.object),
            unreadable: self.unreadable.clone(),
        }
    }
}

/// As a derived `==` (source, object, unreadable values), the object
/// compared by pointer first.
impl<T: PartialEq> PartialEq for Sourced<T> {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.same(other)
    }
}

impl Unreadable {
    /// Whether the value lies in `spec.<list>[index]`.
    pub fn is_in(&self, list: &str, index: usize) -> bool {
        self.rule == index
            && matches!(self.path.as_slice(), [FieldStep::Key(spec), FieldStep::Key(l), ..] if spec == "spec" && l == list)
    }

    /// The path as users write it: `spec.rules[1].filters[0].type`.
    pub fn field(&self) -> String {
        render_path(&self.path)
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field(), self.message)
    }
}

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldStep {
    Key(String),
    Index(usize),
}

/// Renders steps as `spec.rules[0].matches`.
pub fn render_path(path: &[FieldStep]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            FieldStep::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            FieldStep::Index(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// Everything one load produced. Namespaced objects always have
/// `metadata.namespace` set (the loader defaults it to `default`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    pub gateway_classes: Vec<Sourced<GatewayClass>>,
    pub gateways: Vec<Sourced<Gateway>>,
    /// ListenerSets (Gateway API v1.5): listeners added to a Gateway that
    /// admits them through `spec.allowedListeners`.
    pub listener_sets: Vec<Sourced<ListenerSet>>,
    pub http_routes: Vec<Sourced<HttpRoute>>,
    pub grpc_routes: Vec<Sourced<GrpcRoute>>,
    pub reference_grants: Vec<Sourced<ReferenceGrant>>,
    pub namespaces: Vec<Sourced<Namespace>>,
    pub services: Vec<Sourced<Service>>,
    pub endpoint_slices: Vec<Sourced<EndpointSlice>>,
    pub secrets: Vec<Sourced<Secret>>,
    pub traffic_policies: Vec<Sourced<TrafficPolicy>>,
    pub gateway_extensions: Vec<Sourced<GatewayExtension>>,
    /// Provisioning parameters a GatewayClass may name (Kubernetes mode).
    pub gateway_parameters: Vec<Sourced<GatewayParameters>>,
    /// Contour's HTTPProxies (`projectcontour.io/v1`).
    pub http_proxies: Vec<Sourced<HttpProxy>>,
    pub tls_certificate_delegations: Vec<Sourced<TlsCertificateDelegation>>,
    /// Objects of the kinds an extension server registered (see
    /// [`ExtensionObject`]); empty unless the loader was given such kinds.
    pub extension_resources: Vec<Sourced<ExtensionObject>>,
    /// The addresses of the Services provisioned for Gateways, by
    /// (namespace, name), when a provisioner runs (Kubernetes mode, see
    /// `kube_provider::provision`). Not loaded from any file: `None` (file
    /// mode, or provisioning off) reports the configured status address
    /// as always; `Some` reports each Gateway's own addresses, and a
    /// Gateway without any is `Programmed=False` (`AddressNotAssigned`).
    pub provisioned_addresses: Option<ProvisionedAddresses>,
}

/// See [`Inputs::provisioned_addresses`].
pub type ProvisionedAddresses = std::collections::BTreeMap<(String, String), Vec<ProvisionedAddress>>;

/// One address of a provisioned Gateway, as Gateway API's
/// `status.addresses` entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProvisionedAddress {
    /// `IPAddress` or `Hostname`.
    pub type_: AddressType,
    pub value: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressType {
    IpAddress,
    Hostname,
}

impl AddressType {
    /// The Gateway API's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressType::IpAddress => "IPAddress",
            AddressType::Hostname => "Hostname",
        }
    }
}

/// An object of a kind an extension server registered (Envoy Gateway's
/// `resources`, `policyResources`, `backendResources`). portcullis does not
/// know its schema: it keeps the object as JSON, which is what the
/// extension protocol sends (`ExtensionResource.unstructured_bytes`), and
/// reads only its identity (and, for policies, its `targetRefs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensionObject {
    /// `group/version` (or `version` for the core group), as written.
    pub api_version: String,
    pub kind: String,
    /// Defaulted to `default` when absent.
    pub namespace: String,
    pub name: String,
    /// The object as JSON, `status` removed, `metadata.namespace` set.
    /// Shared: every hook call that passes it refers to these bytes.
    pub json: std::sync::Arc<[u8]>,
}

impl ExtensionObject {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }
}

impl Inputs {
    /// The number of objects of all kinds.
    pub fn len(&self) -> usize {
        self.gateway_classes.len()
            + self.gateways.len()
            + self.listener_sets.len()
            + self.http_routes.len()
            + self.grpc_routes.len()
            + self.reference_grants.len()
            + self.namespaces.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
            + self.traffic_policies.len()
            + self.gateway_extensions.len()
            + self.gateway_parameters.len()
            + self.extension_resources.len()
            + self.http_proxies.len()
            + self.tls_certificate_delegations.len()
    }

    /// Whether no object was loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends every object of `other` (used to merge per-file loads).
    pub fn extend(&mut self, other: Inputs) {
        self.gateway_classes.extend(other.gateway_classes);
        self.gateways.extend(other.gateways);
        self.listener_sets.extend(other.listener_sets);
        self.http_routes.extend(other.http_routes);
        self.grpc_routes.extend(other.grpc_routes);
        self.reference_grants.extend(other.reference_grants);
        self.namespaces.extend(other.namespaces);
        self.services.extend(other.services);
        self.endpoint_slices.extend(other.endpoint_slices);
        self.secrets.extend(other.secrets);
        self.traffic_policies.extend(other.traffic_policies);
        self.gateway_extensions.extend(other.gateway_extensions);
        self.gateway_parameters.extend(other.gateway_parameters);
        if other.provisioned_addresses.is_some() {
            self.provisioned_addresses = other.provisioned_addresses;
        }
        self.extension_resources.extend(other.extension_resources);
        self.http_proxies.extend(other.http_proxies);
        self.tls_certificate_delegations
            .extend(other.tls_certificate_delegations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Never equal, not even to itself: only a pointer compare can find
    /// two entries of it equal.
    #[derive(Debug)]
    struct Never;
    impl PartialEq for Never {
        fn eq(&self, _: &Self) -> bool {
            false
        }
    }

    #[test]
    fn the_same_allocation_is_equal_unread() {
        let a = Sourced::new(Source::new("a.yaml", 1), Never);
        let shared = a.clone();
        assert!(
            a.same(&shared) && a == shared,
            "one allocation: equal without a look"
        );
        let copy = Sourced::new(a.source.clone(), Never);
        assert!(!a.same(&copy) && a != copy, "two allocations: compared by value");
        let moved = Sourced {
            source: Source::new("a.yaml", 2),
            ..a.clone()
        };
        assert!(a.same(&moved) && a != moved, "`==` still compares the source");
    }
}
