//! Delta ADS: responses carry only what changed, and removals.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use crate::cache::{Snapshot, SnapshotCache};
use crate::observer::Observer;
use crate::types;

#[derive(Default)]
struct TypeState {
    wildcard: bool,
    names: BTreeSet<String>,
    /// What the Envoy has (or was last sent): name → version.
    known: HashMap<String, String>,
    /// Names reported as absent, so they are reported once.
    reported_absent: BTreeSet<String>,
    nonce: String,
    version: String,
    responded: bool,
    /// When the response of `nonce` was handed to the stream (see sotw.rs).
    sent_at: crate::push_clock::PushClock,
}

pub(crate) struct Stream {
    cache: SnapshotCache,
    observer: Arc<dyn Observer>,
    tx: mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    node: Option<String>,
    binding: crate::server::Binding,
    states: HashMap<String, TypeState>,
    nonce: u64,
}

impl Stream {
    pub(crate) fn new(
        cache: SnapshotCache,
        observer: Arc<dyn Observer>,
        tx: mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
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

    pub(crate) async fn run(mut self, mut requests: Streaming<DeltaDiscoveryRequest>) {
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
                    if let Some(s) = snapshot {
                        for t in types::PUSH_ORDER {
                            if self.states.contains_key(t) && !self.send_diff(t, &s, false).await {
                                return;
                            }
                        }
                    }
                }
            }
        }
        if let Some(node) = &self.node {
            self.observer.disconnected(node);
        }
    }

    async fn on_request(&mut self, req: DeltaDiscoveryRequest, snapshot: Option<&Snapshot>) -> bool {
        let node = self.node.clone().unwrap_or_default();
        let first = !self.states.contains_key(&req.type_url);
        let st = self.states.entry(req.type_url.clone()).or_default();
        if first {
            // After a reconnect Envoy says what it already has.
            st.known = req.initial_resource_versions.clone().into_iter().collect();
            st.wildcard = !types::is_named(&req.type_url) && req.resource_names_subscribe.is_empty();
        }
        if !req.response_nonce.is_empty() {
            if req.response_nonce != st.nonce {
                return true;
            }
            match &req.error_detail {
                Some(err) => self
                    .observer
                    .nacked(&node, &req.type_url, &st.version, &err.message),
                None => self.observer.acked(&node, &req.type_url, &st.version),
            }
            st.sent_at
                .answered(&node, &req.type_url, req.error_detail.is_some(), "delta");
        }
        for n in &req.resource_names_subscribe {
            if n == "*" {
                st.wildcard = true;
            } else {
                st.names.insert(n.clone());
                st.reported_absent.remove(n);
            }
        }
        for n in &req.resource_names_unsubscribe {
            if n == "*" {
                st.wildcard = false;
            } else {
                st.names.remove(n);
                st.known.remove(n);
            }
        }
        let subscription_changed =
            !req.resource_names_subscribe.is_empty() || !req.resource_names_unsubscribe.is_empty();
        match snapshot {
            Some(s) if first || subscription_changed => self.send_diff(&req.type_url, s, first).await,
            _ => true,
        }
    }

    /// Sends what `type_url`'s subscriber lacks; `force` sends even an
    /// empty response (Envoy waits for one to finish initialising).
    async fn send_diff(&mut self, type_url: &str, snapshot: &Snapshot, force: bool) -> bool {
        let Some(st) = self.states.get_mut(type_url) else {
            return true;
        };
        let all = snapshot.types.get(type_url);
        let wanted: Vec<&String> = match all {
            Some(all) if st.wildcard => all.keys().collect(),
            Some(all) => st.names.iter().filter(|n| all.contains_key(*n)).collect(),
            None => Vec::new(),
        };
        let mut resources = Vec::new();
        for name in &wanted {
            let Some(entry) = all.and_then(|a| a.get(*name)) else {
                continue;
            };
            if st.known.get(*name) != Some(&entry.hash) {
                resources.push(Resource {
                    name: (*name).clone(),
                    version: entry.hash.clone(),
                    resource: Some(entry.any.clone()),
                    ..Default::default()
                });
            }
        }
        let wanted_set: BTreeSet<&String> = wanted.iter().copied().collect();
        let mut removed: Vec<String> = st
            .known
            .keys()
            .filter(|n| !wanted_set.contains(n))
            .cloned()
            .collect();
        // Explicitly requested names that do not exist: say so once, so
        // Envoy does not wait for them.
        for n in &st.names {
            if !wanted_set.contains(n) && !st.known.contains_key(n) && st.reported_absent.insert(n.clone()) {
                removed.push(n.clone());
            }
        }
        removed.sort();
        removed.dedup();
        if resources.is_empty() && removed.is_empty() && !force && st.responded {
            return true;
        }
        for r in &resources {
            st.known.insert(r.name.clone(), r.version.clone());
        }
        for n in &removed {
            st.known.remove(n);
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        st.nonce = nonce.clone();
        st.version = snapshot.version(type_url, None);
        st.responded = true;
        st.sent_at.pushed();
        tracing::debug!(
            node = self.node.as_deref().unwrap_or(""),
            type_url = types::short(type_url),
            resources = resources.len(),
            removed = removed.len(),
            bytes = resources
                .iter()
                .filter_map(|r| r.resource.as_ref())
                .map(|a| a.value.len())
                .sum::<usize>(),
            "xds pushed (delta)"
        );
        let version = st.version.clone();
        let resp = DeltaDiscoveryResponse {
            system_version_info: version.clone(),
            resources,
            type_url: type_url.to_string(),
            removed_resources: removed,
            nonce,
            ..Default::default()
        };
        if let Some(node) = &self.node {
            self.observer.pushed(node, type_url, &version);
        }
        self.tx.send(Ok(resp)).await.is_ok()
    }
}
