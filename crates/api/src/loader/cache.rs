//! The decoded documents of one file, kept between loads of it, so that a
//! changed file re-decodes only its changed documents (the file provider
//! keeps one per file: `provider/src/tree.rs`).
//!
//! Keyed by a keyed hash (SipHash with this cache's own random keys, so a
//! document cannot be crafted to collide with another) and the length of a
//! document's text. Only documents that loaded cleanly on the fast path are
//! kept (`loader.rs` `load_root_fast`): their objects depend on nothing but
//! their text, the file name, the loader options and their first content
//! line, which is re-stamped when a document moved. A document with a
//! diagnostic is decoded again on every load (its lines and messages are
//! the spanned path's). The cache holds the documents of the last load
//! only, so it is bounded by the file's size.
//!
//! It holds no copy of its own: an entry's objects are the very `Arc`s the
//! load handed out (`api::Sourced`), and a reused document hands the same
//! ones out again, only its entries' lines re-stamped. So the file's last
//! load, the cache and every snapshot built from them share each object,
//! and an unchanged document is the same pointer across loads of its file.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use gateway_api::experimental::{
    gatewayclasses::GatewayClass, gateways::Gateway, grpcroutes::GrpcRoute, httproutes::HttpRoute,
    listenersets::ListenerSet, referencegrants::ReferenceGrant,
};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::gateway_parameters::GatewayParameters;
use crate::httpproxy::{HttpProxy, TlsCertificateDelegation};
use crate::policy::{GatewayExtension, TrafficPolicy};
use crate::{ExtensionObject, Inputs, Sourced};

/// One file's decoded documents (see the module docs). Cloning is cheap
/// (the documents are shared, never changed in place: a load builds the
/// next set beside them; their objects are shared with the loads).
#[derive(Clone, Default)]
pub struct DocumentCache {
    /// The file and options the entries were decoded for; another file
    /// name or other options empty the cache.
    file: String,
    options: super::Options,
    keys: RandomState,
    entries: Arc<HashMap<(u64, usize), Decoded>>,
    /// Entries of the load in progress (they replace `entries` at its end).
    next: HashMap<(u64, usize), Decoded>,
    decoded: usize,
    reused: usize,
}

#[derive(Clone)]
struct Decoded {
    /// The document's content line when it was decoded.
    line: usize,
    /// Its objects' entries (at most one: a document on the fast path is
    /// never a `List`), each kind in a variant rather than an [`Inputs`]
    /// of sixteen lists: at 10,000 documents that is ~4 MiB less.
    objects: Box<[Kept]>,
}

/// Declares [`Kept`] over every kind of [`Inputs`], and the two ways
/// between them. Both destructure [`Inputs`] exhaustively: a new kind does
/// not compile until it is listed here.
macro_rules! kept {
    ($($variant:ident($ty:ty) = $field:ident),* $(,)?) => {
        /// One entry of a kept document (its object shared, see
        /// [`crate::Sourced`]).
        #[derive(Clone)]
        enum Kept {
            $($variant(Sourced<$ty>),)*
        }

        impl Kept {
            fn source_mut(&mut self) -> &mut crate::Source {
                match self {
                    $(Kept::$variant(s) => &mut s.source,)*
                }
            }
        }

        /// The entries of `inputs` in its kinds' order; `None` when it
        /// carries what no entry holds (provisioned addresses: never read
        /// from a file).
        fn split(inputs: &Inputs) -> Option<Box<[Kept]>> {
            let Inputs {
                $($field,)*
                provisioned_addresses,
            } = inputs;
            if provisioned_addresses.is_some() {
                return None;
            }
            let mut kept = Vec::new();
            $(kept.extend($field.iter().cloned().map(Kept::$variant));)*
            Some(kept.into_boxed_slice())
        }

        /// The [`Inputs`] holding `kept` (entries cloned: pointers only).
        fn join(kept: &[Kept]) -> Inputs {
            let mut inputs = Inputs::default();
            for k in kept {
                match k {
                    $(Kept::$variant(s) => inputs.$field.push(s.clone()),)*
                }
            }
            inputs
        }
    };
}

kept! {
    GatewayClass(GatewayClass) = gateway_classes,
    Gateway(Gateway) = gateways,
    ListenerSet(ListenerSet) = listener_sets,
    HttpRoute(HttpRoute) = http_routes,
    GrpcRoute(GrpcRoute) = grpc_routes,
    ReferenceGrant(ReferenceGrant) = reference_grants,
    Namespace(Namespace) = namespaces,
    Service(Service) = services,
    EndpointSlice(EndpointSlice) = endpoint_slices,
    Secret(Secret) = secrets,
    TrafficPolicy(TrafficPolicy) = traffic_policies,
    GatewayExtension(GatewayExtension) = gateway_extensions,
    GatewayParameters(GatewayParameters) = gateway_parameters,
    Extension(ExtensionObject) = extension_resources,
    HttpProxy(HttpProxy) = http_proxies,
    TlsCertificateDelegation(TlsCertificateDelegation) = tls_certificate_delegations,
}

impl std::fmt::Debug for DocumentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentCache")
            .field("file", &self.file)
            .field("documents", &self.entries.len())
            .field("decoded", &self.decoded)
            .field("reused", &self.reused)
            .finish()
    }
}

impl DocumentCache {
    /// How many documents the last load decoded (not taken from the cache).
    pub fn decoded(&self) -> usize {
        self.decoded
    }

    /// How many documents the last load took from the cache.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// How many documents are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn begin(&mut self, file: &str, options: &super::Options) {
        if self.file != file || self.options != *options {
            self.entries = Arc::default();
            self.file = file.to_string();
            self.options = options.clone();
        }
        self.next.clear();
        self.decoded = 0;
        self.reused = 0;
    }

    pub(crate) fn end(&mut self) {
        self.entries = Arc::new(std::mem::take(&mut self.next));
    }

    pub(crate) fn key(&self, text: &str) -> (u64, usize) {
        (self.keys.hash_one(text), text.len())
    }

    /// The objects of a document decoded before, its lines re-stamped to
    /// `line`; `None` when it is not kept.
    pub(crate) fn take(&mut self, key: (u64, usize), line: usize) -> Option<Inputs> {
        let kept = self.entries.get(&key).or_else(|| self.next.get(&key))?;
        let mut objects = kept.objects.clone();
        if kept.line != line && !restamp(&mut objects, kept.line, line) {
            return None;
        }
        let inputs = join(&objects);
        self.next.entry(key).or_insert(Decoded { line, objects });
        self.reused += 1;
        Some(inputs)
    }

    /// Keeps a document's objects, decoded at `line`.
    pub(crate) fn keep(&mut self, key: (u64, usize), line: usize, inputs: &Inputs) {
        if let Some(objects) = split(inputs) {
            self.next.insert(key, Decoded { line, objects });
        }
    }

    /// Counts a document decoded (kept or not).
    pub(crate) fn count_decoded(&mut self) {
        self.decoded += 1;
    }
}

/// Moves every object's source from line `from` to `to`; false when an
/// object has another line (then the entry is not reused).
fn restamp(objects: &mut [Kept], from: usize, to: usize) -> bool {
    objects.iter_mut().all(|o| {
        let source = o.source_mut();
        if source.line != from {
            return false;
        }
        source.line = to;
        true
    })
}
