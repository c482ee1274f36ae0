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

use crate::Inputs;

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
    inputs: Inputs,
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
        let mut inputs = kept.inputs.clone();
        if kept.line != line && !restamp(&mut inputs, kept.line, line) {
            return None;
        }
        self.next.entry(key).or_insert_with(|| Decoded {
            line,
            inputs: inputs.clone(),
        });
        self.reused += 1;
        Some(inputs)
    }

    /// Keeps a document's objects, decoded at `line`.
    pub(crate) fn keep(&mut self, key: (u64, usize), line: usize, inputs: &Inputs) {
        self.next.insert(
            key,
            Decoded {
                line,
                inputs: inputs.clone(),
            },
        );
    }

    /// Counts a document decoded (kept or not).
    pub(crate) fn count_decoded(&mut self) {
        self.decoded += 1;
    }
}

/// Moves every object's source from line `from` to `to`; false when an
/// object has another line (then the entry is not reused).
fn restamp(inputs: &mut Inputs, from: usize, to: usize) -> bool {
    fn each<T>(objects: &mut [crate::Sourced<T>], from: usize, to: usize) -> bool {
        objects.iter_mut().all(|o| {
            if o.source.line != from {
                return false;
            }
            o.source.line = to;
            true
        })
    }
    let Inputs {
        gateway_classes,
        gateways,
        listener_sets,
        http_routes,
        grpc_routes,
        reference_grants,
        namespaces,
        services,
        endpoint_slices,
        secrets,
        traffic_policies,
        gateway_extensions,
        gateway_parameters,
        extension_resources,
        http_proxies,
        tls_certificate_delegations,
        provisioned_addresses,
    } = inputs;
    provisioned_addresses.is_none()
        && each(gateway_classes, from, to)
        && each(gateways, from, to)
        && each(listener_sets, from, to)
        && each(http_routes, from, to)
        && each(grpc_routes, from, to)
        && each(reference_grants, from, to)
        && each(namespaces, from, to)
        && each(services, from, to)
        && each(endpoint_slices, from, to)
        && each(secrets, from, to)
        && each(traffic_policies, from, to)
        && each(gateway_extensions, from, to)
        && each(gateway_parameters, from, to)
        && each(extension_resources, from, to)
        && each(http_proxies, from, to)
        && each(tls_certificate_delegations, from, to)
}
