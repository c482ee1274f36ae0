//! State-of-the-world ADS: a response carries all (requested) resources
//! of a type — except a pushed change of route configurations, which
//! carries only those whose content changed.
//!
//! The xDS protocol lets SotW responses of every type but Listener and
//! Cluster hold a subset: Envoy updates the named resources in a response
//! and leaves the others as they are. At 10,000 routes one edit changes one
//! route configuration, and resending all of them would cost every Envoy
//! megabytes per edit. Only RDS is narrowed: EDS and SDS subscriptions are
//! re-made by cluster and listener updates under the same names, and
//! Envoy then expects the resource again.

use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use crate::cache::{Snapshot, SnapshotCache};
use crate::observer::Observer;
use crate::types;

#[derive(Default)]
struct TypeState {
    /// Names asked for (empty = all); None until Envoy subscribes.
    names: Option<Vec<String>>,
    sent_version: Option<String>,
    /// Name → content hash of what was last sent (RDS only): a pushed
    /// change carries only the entries that differ.
    sent_hashes: HashMap<String, String>,
    nonce: String,
    /// When the response of `nonce` was handed to the stream: its ACK
    /// (Envoy acknowledges after applying) logs the time in between.
    sent_at: crate::push_clock::PushClock,
}

/// Whether a response carries every requested resource or, for a pushed
/// change, only those that changed since they were last sent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Send {
    All,
    Changed,
}

pub(crate) struct Stream {
    cache: SnapshotCache,
    observer: Arc<dyn Observer>,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
    node: Option<String>,
    binding: crate::server::Binding,
    states: HashMap<String, TypeState>,
    nonce: u64,
}

impl Stream {
    pub(crate) fn new(
        cache: SnapshotCache,
        observer: Arc<dyn Observer>,
        tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
        binding: crate::server::Binding,
    ) -> Self {
        Self {
            cache,
            observer,
            tx,
            node: None,
            binding,
            states: HashMap::new(),
            nonce: 0,
        }
    }

    pub(crate) async fn run(mut self, mut requests: Streaming<DiscoveryRequest>) {
        let mut rx: Option<watch::Receiver<Option<Arc<Snapshot>>>> = None;
        loop {
            tokio::select! {
                msg = requests.message() => {
                    let Ok(Some(req)) = msg else { break };
                    if self.node.is_none() {
                        let Some(id) = req.node.as_ref().map(|n| n.id.clone()).filter(|id| !id.is_empty()) else {
                            let _ = self.tx.send(Err(Status::invalid_argument("the first request must carry node.id"))).await;
                            break;
                        };
                        // mTLS: only the node the client certificate names.
                        if let Err(refused) = self.binding.check(&id, self.observer.as_ref()) {
                            let _ = self.tx.send(Err(refused)).await;
                            break;
                        }
                        self.observer.connected(&id);
                        rx = Some(self.cache.subscribe(&id));
                        self.node = Some(id);
                    }
                    let snapshot = rx.as_ref().and_then(|r| r.borrow().clone());
                    if !self.on_request(req, snapshot.as_deref()).await { break; }
                }
                changed = async { match rx.as_mut() { Some(r) => r.changed().await, None => std::future::pending().await } } => {
                    if changed.is_err() { break; }
                    let snapshot = rx.as_mut().and_then(|r| r.borrow_and_update().clone());
                    if let Some(s) = snapshot
                        && !self.push_changed(&s).await { break; }
                }
            }
        }
        if let Some(node) = &self.node {
            self.observer.disconnected(node);
        }
    }

    async fn on_request(&mut self, req: DiscoveryRequest, snapshot: Option<&Snapshot>) -> bool {
        let node = self.node.clone().unwrap_or_default();
        let st = self.states.entry(req.type_url.clone()).or_default();
        if !req.response_nonce.is_empty() {
            if req.response_nonce != st.nonce {
                // A reply to an older response: superseded, ignore.
                return true;
            }
            match &req.error_detail {
                Some(err) => self.observer.nacked(
                    &node,
                    &req.type_url,
                    st.sent_version.as_deref().unwrap_or(""),
                    &err.message,
                ),
                None => self.observer.acked(&node, &req.type_url, &req.version_info),
            }
            // Push to ACK: the stream's encoding and Envoy applying the
            // update (the floor of a propagation, README "Benchmarks").
            st.sent_at
                .answered(&node, &req.type_url, req.error_detail.is_some(), "sotw");
        }
        let names = if types::is_named(&req.type_url) {
            req.resource_names.clone()
        } else {
            Vec::new()
        };
        let names_changed = st.names.as_ref() != Some(&names);
        st.names = Some(names);
        let Some(snapshot) = snapshot else { return true };
        // A first request (or a changed subscription) is always answered;
        // an ACK or NACK is not (changes are pushed as they happen, and a
        // NACKed version is not sent again).
        if req.response_nonce.is_empty() || names_changed {
            return self.send(&req.type_url, snapshot, Send::All).await;
        }
        true
    }

    async fn push_changed(&mut self, snapshot: &Snapshot) -> bool {
        for t in types::PUSH_ORDER {
            let Some(st) = self.states.get(t) else { continue };
            let Some(names) = &st.names else { continue };
            let version = snapshot.version(t, Some(names));
            if st.sent_version.as_deref() != Some(version.as_str())
                && !self.send(t, snapshot, Send::Changed).await
            {
                return false;
            }
        }
        true
    }

    async fn send(&mut self, type_url: &str, snapshot: &Snapshot, what: Send) -> bool {
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let st = self.states.entry(type_url.to_string()).or_default();
        let names = st.names.clone().unwrap_or_default();
        let version = snapshot.version(type_url, Some(&names));
        let selected = snapshot.select(type_url, Some(&names));
        let narrow = type_url == types::ROUTE;
        let resources = if narrow {
            if what == Send::All {
                // Envoy holds exactly what this response carries (a first
                // request, a changed subscription).
                st.sent_hashes.clear();
            }
            let mut resources = Vec::new();
            for (name, entry) in selected {
                if what == Send::Changed && st.sent_hashes.get(name) == Some(&entry.hash) {
                    continue;
                }
                st.sent_hashes.insert(name.clone(), entry.hash.clone());
                resources.push(entry.any.clone());
            }
            resources
        } else {
            selected.into_iter().map(|(_, e)| e.any.clone()).collect()
        };
        st.sent_version = Some(version.clone());
        st.nonce = nonce.clone();
        st.sent_at.pushed();
        tracing::debug!(
            node = self.node.as_deref().unwrap_or(""),
            type_url = types::short(type_url),
            resources = resources.len(),
            bytes = resources.iter().map(|r| r.value.len()).sum::<usize>(),
            "xds pushed"
        );
        let resp = DiscoveryResponse {
            version_info: version.clone(),
            resources,
            type_url: type_url.to_string(),
            nonce,
            ..Default::default()
        };
        if let Some(node) = &self.node {
            self.observer.pushed(node, type_url, &version);
        }
        self.tx.send(Ok(resp)).await.is_ok()
    }
}
