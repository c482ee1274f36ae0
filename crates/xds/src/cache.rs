//! Snapshots per node.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use tokio::sync::watch;
use translate::GatewayXds;
use translate::xds::encoded::EncodedRouteConfiguration;

use crate::types;

/// One resource, encoded, with its content hash.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub hash: String,
    pub any: Any,
}

/// All resources of one node.
///
/// Entries are shared (`Arc`): a snapshot built after another
/// ([`Snapshot::from_gateway_after`]) takes the previous one's entry for
/// every route configuration the translator did not rebuild, so an edit
/// copies and hashes only what it changed, not every route of every
/// Gateway (at 10,000 routes a route configuration is megabytes).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// type URL → name → entry.
    pub types: BTreeMap<&'static str, BTreeMap<String, Arc<Entry>>>,
    /// The translator's encoded route configurations the route entries
    /// were made from, by name. Held so that their bytes stay allocated:
    /// the next snapshot recognises an unchanged configuration by address
    /// (the incremental translator shares the bytes of what it did not
    /// rebuild), which is sound only while this one keeps them alive.
    route_sources: BTreeMap<String, EncodedRouteConfiguration>,
    /// The same for clusters and their endpoints: the translator shares
    /// each one it did not rebuild (`GatewayXds::clusters`), so an edit
    /// encodes and hashes only the clusters it changed.
    cluster_sources: BTreeMap<String, Arc<Cluster>>,
    endpoint_sources: BTreeMap<String, Arc<ClusterLoadAssignment>>,
}

/// Equal resources: what a push compares (the sources are how the
/// entries were obtained, not what is served).
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.types.len() == other.types.len()
            && self.types.iter().zip(&other.types).all(|((ta, a), (tb, b))| {
                ta == tb
                    && a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((na, ea), (nb, eb))| na == nb && (Arc::ptr_eq(ea, eb) || ea == eb))
            })
    }
}

fn hash_bytes(b: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    b.hash(&mut h);
    format!("{:016x}", h.finish())
}

impl Snapshot {
    pub fn from_gateway(gw: &GatewayXds) -> Self {
        Self::from_gateway_after(gw, None)
    }

    /// [`Snapshot::from_gateway`], sharing `previous`'s entry (no copy, no
    /// hash) for each route configuration whose bytes are the very ones it
    /// was made from, or equal to its entry's. The result is equal to
    /// `from_gateway(gw)`.
    pub fn from_gateway_after(gw: &GatewayXds, previous: Option<&Snapshot>) -> Self {
        let mut s = Snapshot::default();
        fn insert(s: &mut Snapshot, type_url: &'static str, name: &str, entry: Arc<Entry>) {
            s.types
                .entry(type_url)
                .or_default()
                .insert(name.to_string(), entry);
        }
        fn put<M: Message + prost::Name>(s: &mut Snapshot, type_url: &'static str, name: &str, m: &M) {
            put_bytes(s, type_url, name, m.encode_to_vec());
        }
        fn put_bytes(s: &mut Snapshot, type_url: &'static str, name: &str, value: Vec<u8>) {
            let entry = Entry {
                hash: hash_bytes(&value),
                any: Any {
                    type_url: type_url.into(),
                    value,
                },
            };
            insert(s, type_url, name, Arc::new(entry));
        }
        // A cluster (or its endpoints) that is the very one the previous
        // entry was made from (alive, held by `previous`, so the address is
        // not another's) keeps that entry; else it is encoded and hashed.
        fn put_shared<M: Message + prost::Name>(
            s: &mut Snapshot,
            previous: Option<&Snapshot>,
            type_url: &'static str,
            name: &str,
            m: &Arc<M>,
            sources: fn(&Snapshot) -> &BTreeMap<String, Arc<M>>,
        ) {
            let kept = previous
                .filter(|p| sources(p).get(name).is_some_and(|source| Arc::ptr_eq(source, m)))
                .and_then(|p| p.types.get(type_url)?.get(name).cloned());
            match kept {
                Some(entry) => insert(s, type_url, name, entry),
                None => put(s, type_url, name, &**m),
            }
        }
        // The previous entry of a route configuration, if its content is
        // `r`'s: the same allocation (alive, held by `previous`, so the
        // address is not another's), else compared byte for byte (cheaper
        // than a copy and a hash).
        let unchanged = |r: &EncodedRouteConfiguration| -> Option<Arc<Entry>> {
            let previous = previous?;
            let entry = previous.types.get(types::ROUTE)?.get(&r.name)?;
            let source = previous.route_sources.get(&r.name)?;
            let same = std::ptr::eq(source.bytes(), r.bytes()) || entry.any.value == r.bytes();
            same.then(|| Arc::clone(entry))
        };
        for c in &gw.clusters {
            put_shared(&mut s, previous, types::CLUSTER, &c.name, c, |p| {
                &p.cluster_sources
            });
            s.cluster_sources.insert(c.name.clone(), Arc::clone(c));
        }
        for e in &gw.endpoints {
            put_shared(&mut s, previous, types::ENDPOINT, &e.cluster_name, e, |p| {
                &p.endpoint_sources
            });
            s.endpoint_sources.insert(e.cluster_name.clone(), Arc::clone(e));
        }
        for x in &gw.secrets {
            put(&mut s, types::SECRET, &x.name, x);
        }
        for l in &gw.listeners {
            put(&mut s, types::LISTENER, &l.name, l);
        }
        for r in &gw.routes {
            match unchanged(r) {
                Some(entry) => insert(&mut s, types::ROUTE, &r.name, entry),
                // Already canonically encoded (maps in key order), as sent.
                None => put_bytes(&mut s, types::ROUTE, &r.name, r.bytes().to_vec()),
            }
            s.route_sources.insert(r.name.clone(), r.clone());
        }
        for t in types::PUSH_ORDER {
            s.types.entry(t).or_default();
        }
        s
    }

    /// The resources of a type, narrowed to `names` when given.
    pub fn select(&self, type_url: &str, names: Option<&[String]>) -> Vec<(&String, &Arc<Entry>)> {
        let Some(all) = self.types.get(type_url) else {
            return Vec::new();
        };
        match names {
            Some(names) if !names.is_empty() && !names.iter().any(|n| n == "*") => {
                names.iter().filter_map(|n| all.get_key_value(n)).collect()
            }
            _ => all.iter().collect(),
        }
    }

    /// Version of a selection: a hash of its names and content hashes, in
    /// name order (so that a client can predict it whatever order it
    /// subscribes in: the STRICT validator waits for a known version).
    pub fn version(&self, type_url: &str, names: Option<&[String]>) -> String {
        let mut h = DefaultHasher::new();
        let mut selected = self.select(type_url, names);
        selected.sort_by(|a, b| a.0.cmp(b.0));
        selected.dedup_by(|a, b| a.0 == b.0);
        for (n, e) in selected {
            n.hash(&mut h);
            e.hash.hash(&mut h);
        }
        format!("{:016x}", h.finish())
    }
}

type Publisher = watch::Sender<Option<Arc<Snapshot>>>;

/// Snapshots per node id, each published on a watch channel.
#[derive(Clone, Default)]
pub struct SnapshotCache {
    nodes: Arc<Mutex<HashMap<String, Publisher>>>,
}

impl SnapshotCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn sender(&self, node: &str) -> Publisher {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(None).0)
            .clone()
    }

    /// Publishes the snapshot of a Gateway's xDS for its node, sharing the
    /// current snapshot's entries for what did not change
    /// ([`Snapshot::from_gateway_after`]); returns whether it changed.
    pub fn set_gateway(&self, node: &str, gw: &GatewayXds) -> bool {
        let current = self.get(node);
        let snapshot = Snapshot::from_gateway_after(gw, current.as_deref());
        drop(current);
        self.set(node, snapshot)
    }

    /// Publishes a node's snapshot; returns whether it changed.
    pub fn set(&self, node: &str, snapshot: Snapshot) -> bool {
        let tx = self.sender(node);
        tx.send_if_modified(|cur| {
            if cur.as_deref() == Some(&snapshot) {
                false
            } else {
                *cur = Some(Arc::new(snapshot));
                true
            }
        })
    }

    /// Nodes that no longer exist get an empty snapshot: their Envoys stop
    /// serving what was removed rather than keep stale configuration.
    pub fn retain(&self, keep: &[String]) {
        let nodes: Vec<String> = {
            let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            nodes.keys().filter(|k| !keep.contains(k)).cloned().collect()
        };
        for n in nodes {
            self.set(&n, Snapshot::default());
        }
    }

    pub fn get(&self, node: &str) -> Option<Arc<Snapshot>> {
        self.sender(node).borrow().clone()
    }

    pub fn subscribe(&self, node: &str) -> watch::Receiver<Option<Arc<Snapshot>>> {
        self.sender(node).subscribe()
    }

    pub fn nodes(&self) -> Vec<String> {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<String> = nodes.keys().cloned().collect();
        v.sort();
        v
    }
}
