//! Writing the translator's status back to the apiserver.
//!
//! # Data model
//!
//! [`StatusWriter::publish`] turns one translation's
//! [`translate::ObjectStatus`]es into the *desired* status of each object
//! we own status on (GatewayClass, Gateway, ListenerSet, HTTPRoute,
//! GRPCRoute, TrafficPolicy, HTTPProxy in Contour's shape) and puts it in a per-object pending map —
//! latest wins, so the queue is bounded by the number of objects and a
//! burst of translations coalesces into one write per object. One writer
//! task drains it:
//!
//! - the desired status is merged with the **live** object (from the
//!   provider's reflector store): `lastTransitionTime` of a condition whose
//!   `status` did not change is kept from the live object (the translator
//!   stamps every condition with the translation's time; the object in the
//!   API is the memory that survives restarts);
//! - for routes, `status.parents` is an atomic list shared with other
//!   controllers: the entries of other `controllerName`s are kept as they
//!   are, ours are replaced (a route no longer attached to us loses ours);
//!   the write carries the live `resourceVersion`, so a concurrent change
//!   is a conflict (`409`) and the object is retried on the next round;
//! - a desired status is not even queued when it is what this writer last
//!   confirmed in the API for the object, at the object's live
//!   `resourceVersion` ([`Confirmed`]: a hash of the desired status without
//!   transition times, and the version the write made or found equal): a
//!   translation republishes every object's status, and at 10,000 routes
//!   holding each as JSON until the writer compared it with the live
//!   object was tens of MiB (README, Kubernetes mode). Any change of the
//!   object (another controller's entries, an edit, a status wiped) moves
//!   its `resourceVersion` and queues it again. The fingerprint of the
//!   status last published per object is kept with it: the translator
//!   shares an unchanged object's status between translations (the same
//!   `Arc`), so such a status is not even written as JSON to be compared;
//! - nothing is written when the merged status equals the live one (for
//!   HTTPProxy, whose status is wholly ours as it is Contour's, a field we
//!   no longer set — `loadBalancer` of a root no longer served, `errors`
//!   once fixed — is a difference too, so the apply removes it);
//! - a write is a server-side apply of `status` with field manager
//!   `portcullis` (forced: the status of our objects is ours).
//!
//! Only the leader writes ([`crate::leader`]): while this replica is not
//! the leader the pending map keeps filling (latest wins, one entry per
//! object) and nothing is sent; when it becomes the leader it writes what
//! is pending, merged with the live objects as always.
//!
//! `observedGeneration` comes from the translator (the object's
//! `metadata.generation` as loaded).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::metrics::{KindLabels, KubeMetrics};
use crate::{Client, Kind, Stores};

/// The writer's rate limit.
pub const WRITES_PER_SECOND: u32 = 100;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "portcullis";

/// One object whose status we write.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

struct Shared {
    pending: Mutex<BTreeMap<ObjectKey, Value>>,
    /// What this writer last confirmed in the API, per object.
    confirmed: Mutex<HashMap<ObjectKey, Confirmed>>,
    /// Per object, the status last published and its [`fingerprint`]: the
    /// translator shares an unchanged object's status between translations
    /// (the same `Arc`), so its fingerprint is known without writing it as
    /// JSON again (held here, the allocation is not reused meanwhile).
    published: Mutex<HashMap<ObjectKey, (Arc<translate::ObjectStatus>, u64)>>,
    /// Statuses turned into JSON by [`StatusWriter::publish`] (for tests).
    serialized: std::sync::atomic::AtomicU64,
    wake: Notify,
}

/// One object's desired status in [`StatusWriter::publish`].
enum Desired<'a> {
    /// The translator's.
    Translated(&'a Arc<translate::ObjectStatus>),
    /// A route no longer attached to our Gateways: our entries removed.
    NoParents,
}

/// A status this writer wrote (or found already there): the
/// [`fingerprint`] of the desired status, and the object's
/// `resourceVersion` after the write (or when found equal). While both
/// still hold, publishing the same status again has nothing to do.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Confirmed {
    desired: u64,
    version: String,
}

/// A hash of a desired status, without its `lastTransitionTime`s (the
/// translator stamps every condition with the translation's time; the
/// time written is the live one's when the condition's status is
/// unchanged, see [`keep_transition_times`]). Object keys are hashed in
/// order, so the fingerprint does not depend on how a map was built.
fn fingerprint(status: &Value) -> u64 {
    fn walk(value: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match value {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => (1u8, b).hash(h),
            Value::Number(n) => (2u8, n.to_string()).hash(h),
            Value::String(s) => (3u8, s).hash(h),
            Value::Array(items) => {
                (4u8, items.len()).hash(h);
                for item in items {
                    walk(item, h);
                }
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map
                    .keys()
                    .filter(|k| k.as_str() != "lastTransitionTime")
                    .collect();
                keys.sort();
                (5u8, keys.len()).hash(h);
                for k in keys {
                    k.hash(h);
                    walk(&map[k], h);
                }
            }
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    walk(status, &mut h);
    h.finish()
}

/// The handle translations publish to; the writer task stops when the
/// handle is dropped.
pub struct StatusWriter {
    shared: Arc<Shared>,
    stores: Stores,
    controller_name: String,
    task: tokio::task::JoinHandle<()>,
    metrics: KubeMetrics,
}

impl Drop for StatusWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StatusWriter {
    pub fn start(
        client: Client,
        stores: Stores,
        controller_name: String,
        leader: tokio::sync::watch::Receiver<bool>,
        metrics: KubeMetrics,
    ) -> StatusWriter {
        let shared = Arc::new(Shared {
            pending: Mutex::new(BTreeMap::new()),
            confirmed: Mutex::new(HashMap::new()),
            published: Mutex::new(HashMap::new()),
            serialized: Default::default(),
            wake: Notify::new(),
        });
        let task = tokio::spawn(write_loop(
            client,
            stores.clone(),
            controller_name.clone(),
            shared.clone(),
            metrics.clone(),
            leader,
        ));
        StatusWriter {
            shared,
            stores,
            controller_name,
            task,
            metrics,
        }
    }

    /// Statuses [`StatusWriter::publish`] has written as JSON so far.
    pub fn serialized(&self) -> u64 {
        self.shared.serialized.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Queues the status of one translation (see the module doc), each
    /// condition stamped with the translation's transition time. A status
    /// is written as JSON only when it is not the very one last published
    /// for its object (whose fingerprint is kept) or must be queued.
    pub fn publish(&self, statuses: translate::Statuses<'_>) {
        let mut desired = BTreeMap::new();
        for s in statuses.value {
            let Some(kind) = Kind::from_name(&s.kind) else {
                continue;
            };
            if !matches!(
                kind,
                Kind::GatewayClass
                    | Kind::Gateway
                    | Kind::ListenerSet
                    | Kind::HttpRoute
                    | Kind::GrpcRoute
                    | Kind::TrafficPolicy
                    | Kind::HttpProxy
            ) {
                continue;
            }
            desired.insert(
                ObjectKey {
                    kind,
                    namespace: s.metadata.namespace.clone(),
                    name: s.metadata.name.clone(),
                },
                Desired::Translated(s),
            );
        }
        // A route that still carries our entries but got no status from
        // this translation (no longer attached to our Gateways) loses them.
        for kind in [Kind::HttpRoute, Kind::GrpcRoute] {
            for route in self.stores.all(kind) {
                let key = ObjectKey {
                    kind,
                    namespace: route.metadata.namespace.clone(),
                    name: route.metadata.name.clone().unwrap_or_default(),
                };
                if !desired.contains_key(&key) && has_our_parents(&route, &self.controller_name) {
                    desired.insert(key, Desired::NoParents);
                }
            }
        }
        let confirmed = self
            .shared
            .confirmed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut pending = self.shared.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let mut published = self
            .shared
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut last = std::mem::take(&mut *published);
        let to_json = |s: &translate::ObjectStatus| {
            self.shared
                .serialized
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            serde_json::to_value(translate::status::Timed::new(&s.status, statuses.time)).ok()
        };
        for (key, desired) in desired {
            // The fingerprint, and the JSON when it had to be made for it.
            let (print, json) = match desired {
                Desired::Translated(s) => match last.remove(&key) {
                    Some((was, print)) if Arc::ptr_eq(&was, s) => (print, None),
                    _ => {
                        let Some(json) = to_json(s) else {
                            continue;
                        };
                        (fingerprint(&json), Some(json))
                    }
                },
                Desired::NoParents => {
                    let json = json!({"parents": []});
                    (fingerprint(&json), Some(json))
                }
            };
            if let Desired::Translated(s) = desired {
                published.insert(key.clone(), (Arc::clone(s), print));
            }
            let live = self
                .stores
                .get(key.kind, key.namespace.as_deref(), &key.name)
                .and_then(|o| o.metadata.resource_version.clone());
            let done = confirmed
                .get(&key)
                .is_some_and(|c| Some(&c.version) == live.as_ref() && c.desired == print);
            if done {
                // Also drops an older desired status still queued: the
                // latest is already in the API.
                pending.remove(&key);
                continue;
            }
            let json = match (json, desired) {
                (Some(json), _) => Some(json),
                (None, Desired::Translated(s)) => to_json(s),
                (None, Desired::NoParents) => None,
            };
            if let Some(json) = json {
                pending.insert(key, json);
            }
        }
        drop(published);
        drop(confirmed);
        self.metrics.status_queue_depth.set(pending.len() as i64);
        drop(pending);
        self.shared.wake.notify_one();
    }
}

fn has_our_parents(route: &DynamicObject, controller: &str) -> bool {
    route.data["status"]["parents"]
        .as_array()
        .is_some_and(|p| p.iter().any(|e| e["controllerName"] == controller))
}

async fn write_loop(
    client: Client,
    stores: Stores,
    controller: String,
    shared: Arc<Shared>,
    metrics: KubeMetrics,
    mut leader: tokio::sync::watch::Receiver<bool>,
) {
    // A closed leader channel (no election: `--no-leader-election` drops
    // its sender at once) keeps its last value for good; it must not stop
    // the writer.
    let mut election_open = true;
    loop {
        tokio::select! {
            () = shared.wake.notified() => {}
            changed = leader.changed(), if election_open => {
                if changed.is_err() {
                    election_open = false;
                }
            }
        }
        let leading = *leader.borrow_and_update();
        metrics.leader.set(i64::from(leading));
        if !leading {
            continue;
        }
        let batch = std::mem::take(&mut *shared.pending.lock().unwrap_or_else(PoisonError::into_inner));
        metrics.status_queue_depth.set(0);
        let mut retry = BTreeMap::new();
        for (key, desired) in batch {
            let print = fingerprint(&desired);
            let outcome = write_one(&client, &stores, &controller, &key, desired.clone()).await;
            let version = match &outcome {
                Outcome::Written(version) | Outcome::Unchanged(version) => version.clone(),
                _ => None,
            };
            {
                let mut confirmed = shared.confirmed.lock().unwrap_or_else(PoisonError::into_inner);
                match version {
                    Some(version) => {
                        confirmed.insert(
                            key.clone(),
                            Confirmed {
                                desired: print,
                                version,
                            },
                        );
                    }
                    None => {
                        confirmed.remove(&key);
                    }
                }
            }
            if !matches!(outcome, Outcome::Unchanged(_) | Outcome::Gone) {
                // At most WRITES_PER_SECOND requests: a Gateway change that
                // touches every route must not flood the apiserver.
                tokio::time::sleep(Duration::from_secs(1) / WRITES_PER_SECOND).await;
            }
            let labels = KindLabels::of(key.kind);
            match outcome {
                Outcome::Written(_) => {
                    metrics.status_writes.get_or_create(&labels).inc();
                }
                Outcome::Unchanged(_) | Outcome::Gone => {
                    metrics.status_unchanged.get_or_create(&labels).inc();
                }
                Outcome::Conflict => {
                    metrics.status_conflicts.get_or_create(&labels).inc();
                    retry.insert(key, desired);
                }
                Outcome::Failed(error) => {
                    metrics.status_failures.get_or_create(&labels).inc();
                    tracing::warn!(kind = key.kind.name(), namespace = key.namespace.as_deref().unwrap_or(""), name = %key.name, %error, "status write failed; retrying");
                    retry.insert(key, desired);
                }
            }
        }
        if !retry.is_empty() {
            // Let the store catch up with the change that conflicted; a
            // newer desired status queued meanwhile wins over the retry.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut pending = shared.pending.lock().unwrap_or_else(PoisonError::into_inner);
            for (k, v) in retry {
                pending.entry(k).or_insert(v);
            }
            metrics.status_queue_depth.set(pending.len() as i64);
            drop(pending);
            shared.wake.notify_one();
        }
    }
}

/// What a write did; `Written` and `Unchanged` carry the object's
/// `resourceVersion` after it, for [`Confirmed`].
enum Outcome {
    Written(Option<String>),
    Unchanged(Option<String>),
    Gone,
    Conflict,
    Failed(kube::Error),
}

async fn write_one(
    client: &Client,
    stores: &Stores,
    controller: &str,
    key: &ObjectKey,
    desired: Value,
) -> Outcome {
    let Some(live) = stores.get(key.kind, key.namespace.as_deref(), &key.name) else {
        return Outcome::Gone;
    };
    let live_status = live.data.get("status").cloned().unwrap_or(Value::Null);
    let route = matches!(key.kind, Kind::HttpRoute | Kind::GrpcRoute);
    let merged = if route {
        merge_parents(&live_status, desired, controller)
    } else {
        let mut d = desired;
        keep_transition_times(&live_status, &mut d);
        d
    };
    let unchanged = owned_equal(&live_status, &merged)
        && (key.kind != Kind::HttpProxy || owned_equal(&merged, &live_status));
    if unchanged {
        return Outcome::Unchanged(live.metadata.resource_version.clone());
    }
    let ar = key.kind.api_resource();
    let api: Api<DynamicObject> = match key.namespace.as_deref() {
        Some(ns) if key.kind.namespaced() => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    let mut metadata = json!({"name": key.name});
    if let Some(ns) = key.namespace.as_deref().filter(|_| key.kind.namespaced()) {
        metadata["namespace"] = ns.into();
    }
    if route {
        // `parents` is atomic: our merge is only valid against this version.
        metadata["resourceVersion"] = live.metadata.resource_version.clone().unwrap_or_default().into();
    }
    let body = json!({
        "apiVersion": ar.api_version,
        "kind": ar.kind,
        "metadata": metadata,
        "status": merged,
    });
    match api
        .patch_status(
            &key.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(written) => Outcome::Written(written.metadata.resource_version),
        Err(kube::Error::Api(e)) if e.code == 409 => Outcome::Conflict,
        Err(kube::Error::Api(e)) if e.code == 404 => Outcome::Gone,
        Err(e) => Outcome::Failed(e),
    }
}

/// Whether the live status already says everything `merged` says (the
/// apiserver may hold more fields, e.g. another manager's). An empty list
/// we would write equals an absent one (a route without parents has no
/// `status.parents` until someone writes it).
fn owned_equal(live: &Value, merged: &Value) -> bool {
    match (live, merged) {
        (Value::Object(l), Value::Object(m)) => m.iter().all(|(k, v)| match l.get(k) {
            Some(lv) => owned_equal(lv, v),
            None => v.as_array().is_some_and(Vec::is_empty),
        }),
        (Value::Array(l), Value::Array(m)) => {
            l.len() == m.len() && l.iter().zip(m).all(|(a, b)| owned_equal(a, b))
        }
        (l, m) => l == m,
    }
}

/// `status.parents` of a route: other controllers' entries kept, ours
/// replaced by `desired.parents`, transition times kept.
fn merge_parents(live: &Value, desired: Value, controller: &str) -> Value {
    let live_parents = live["parents"].as_array().cloned().unwrap_or_default();
    let mut ours = desired["parents"].as_array().cloned().unwrap_or_default();
    for entry in &mut ours {
        if let Some(old) = live_parents
            .iter()
            .find(|p| p["controllerName"] == entry["controllerName"] && p["parentRef"] == entry["parentRef"])
        {
            keep_transition_times(old, entry);
        }
    }
    let mut parents: Vec<Value> = live_parents
        .into_iter()
        .filter(|p| p["controllerName"] != controller)
        .collect();
    parents.extend(ours);
    json!({ "parents": parents })
}

/// Copies `lastTransitionTime` from `old` into `new` for every condition
/// whose `status` is unchanged. Conditions are matched by `type` within
/// lists that correspond: the same key of an object, listeners by `name`,
/// route parents by `parentRef` and `controllerName`, policy ancestors by
/// `ancestorRef` and `controllerName`.
pub fn keep_transition_times(old: &Value, new: &mut Value) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            if n.contains_key("lastTransitionTime") && n.contains_key("type") {
                if o.get("type") == n.get("type")
                    && o.get("status") == n.get("status")
                    && let Some(t) = o.get("lastTransitionTime")
                {
                    n.insert("lastTransitionTime".into(), t.clone());
                }
                return;
            }
            for (k, v) in n.iter_mut() {
                if let Some(ov) = o.get(k) {
                    keep_transition_times(ov, v);
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            for item in n.iter_mut() {
                if let Some(old) = o.iter().find(|c| same_identity(c, item)) {
                    keep_transition_times(old, item);
                }
            }
        }
        _ => {}
    }
}

fn same_identity(a: &Value, b: &Value) -> bool {
    let keys: &[&str] = if b.get("lastTransitionTime").is_some() {
        &["type"]
    } else if b.get("parentRef").is_some() {
        &["parentRef", "controllerName"]
    } else if b.get("ancestorRef").is_some() {
        &["ancestorRef", "controllerName"]
    } else if b.get("name").is_some() {
        &["name"]
    } else {
        return false;
    };
    keys.iter().all(|k| a.get(*k) == b.get(*k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, status: &str, time: &str) -> Value {
        json!({"type": t, "status": status, "reason": "R", "message": "", "observedGeneration": 1, "lastTransitionTime": time})
    }

    #[test]
    fn transition_time_kept_only_when_status_unchanged() {
        let old = json!({"conditions": [cond("Accepted", "True", "T0"), cond("Programmed", "True", "T0")],
            "listeners": [{"name": "http", "conditions": [cond("Accepted", "True", "T0")]}]});
        let mut new = json!({"conditions": [cond("Accepted", "True", "T1"), cond("Programmed", "False", "T1")],
            "listeners": [{"name": "http", "conditions": [cond("Accepted", "True", "T1")]}]});
        keep_transition_times(&old, &mut new);
        assert_eq!(new["conditions"][0]["lastTransitionTime"], "T0");
        assert_eq!(new["conditions"][1]["lastTransitionTime"], "T1");
        assert_eq!(new["listeners"][0]["conditions"][0]["lastTransitionTime"], "T0");
    }

    #[test]
    fn route_parents_of_other_controllers_are_kept() {
        let pr = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "default", "name": "gw"});
        let live = json!({"parents": [
            {"parentRef": pr, "controllerName": "other.example/ctl", "conditions": [cond("Accepted", "True", "T0")]},
            {"parentRef": pr, "controllerName": "us", "conditions": [cond("Accepted", "True", "T0")]},
        ]});
        let desired = json!({"parents": [{"parentRef": pr, "controllerName": "us", "conditions": [cond("Accepted", "True", "T1")]}]});
        let merged = merge_parents(&live, desired, "us");
        assert_eq!(merged["parents"].as_array().map(Vec::len), Some(2));
        assert_eq!(merged["parents"][0]["controllerName"], "other.example/ctl");
        assert_eq!(merged["parents"][1]["conditions"][0]["lastTransitionTime"], "T0");
        assert!(owned_equal(&live, &merged));
        let gone = merge_parents(&live, json!({"parents": []}), "us");
        assert_eq!(gone["parents"].as_array().map(Vec::len), Some(1));
        assert!(!owned_equal(&live, &gone));
    }

    /// An HTTPProxy's status is compared both ways: a field the live
    /// status has and we no longer set is a change.
    #[test]
    fn a_dropped_field_is_seen_both_ways() {
        let live = json!({"currentStatus": "valid", "loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]},
            "conditions": [{"type": "Valid", "status": "True", "errors": []}]});
        let merged = json!({"currentStatus": "valid", "conditions": [{"type": "Valid", "status": "True"}]});
        assert!(owned_equal(&live, &merged));
        assert!(!owned_equal(&merged, &live));
        let same = json!({"currentStatus": "valid", "loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]},
            "conditions": [{"type": "Valid", "status": "True"}]});
        assert!(owned_equal(&same, &live) && owned_equal(&live, &same));
    }
}

/// The writer against a mock apiserver: answers a real one rarely gives.
#[cfg(test)]
mod mock_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kube::api::DynamicObject;
    use kube::runtime::{reflector, watcher};

    use super::*;

    fn route() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "app", "resourceVersion": "7", "generation": 1},
            "spec": {},
        }))
        .expect("route")
    }

    /// The stores of a route reflector holding `route` (its writer kept
    /// alive beside them).
    fn route_stores(route: DynamicObject) -> (Stores, reflector::store::Writer<DynamicObject>) {
        let ar = Kind::HttpRoute.api_resource();
        let mut writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
        writer.apply_watcher_event(&watcher::Event::Apply(route));
        let stores = Stores::default();
        stores.insert(
            crate::Resource::Kind(Kind::HttpRoute),
            crate::Watched {
                ar,
                namespaced: true,
                store: writer.as_reader(),
                fresh: crate::Fresh::default(),
            },
        );
        (stores, writer)
    }

    /// Route `app/r` at `version` with `status`, as the API holds it.
    fn live(version: &str, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "app", "resourceVersion": version, "generation": 1},
            "status": status,
        }))
        .expect("route")
    }

    /// A client whose apiserver answers every PATCH with `answer`,
    /// counting them in `seen`.
    fn answering(answer: DynamicObject, seen: Arc<AtomicUsize>) -> Client {
        let answer = serde_json::to_value(answer).expect("json");
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (seen, answer) = (seen.clone(), answer.clone());
            async move {
                assert_eq!(request.method(), http::Method::PATCH);
                seen.fetch_add(1, Ordering::SeqCst);
                http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        Client::new(service, "default")
    }

    /// Waits until the writer's queue is drained (at most 2 s), then a
    /// little more for its write to land.
    async fn settle(metrics: &KubeMetrics) {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if metrics.status_queue_depth.get() == 0 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// A 409 on the first status write is retried, and the retry wins.
    #[tokio::test]
    async fn a_conflict_is_retried() {
        let patches = Arc::new(AtomicUsize::new(0));
        let seen = patches.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let seen = seen.clone();
            async move {
                assert_eq!(request.method(), http::Method::PATCH);
                assert!(
                    request.uri().path().ends_with("/httproutes/r/status"),
                    "{}",
                    request.uri()
                );
                let n = seen.fetch_add(1, Ordering::SeqCst);
                let (status, body) = if n == 0 {
                    (
                        409,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "the object has been modified"}),
                    )
                } else {
                    (200, serde_json::to_value(route()).expect("json"))
                };
                http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        let client = Client::new(service, "default");
        let (stores, _writer) = route_stores(route());
        // No election: the sender is gone at once (`--no-leader-election`).
        let leader = tokio::sync::watch::channel(true).1;
        let metrics = KubeMetrics::default();
        let status_writer = StatusWriter::start(client, stores, "us".into(), leader, metrics.clone());
        let parent = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra", "name": "gw"});
        let statuses = [std::sync::Arc::new(translate::ObjectStatus::new(
            "gateway.networking.k8s.io/v1",
            "HTTPRoute",
            Some("app"),
            "r",
            json!({"parents": [{"parentRef": parent, "controllerName": "us", "conditions": []}]}),
        ))];
        status_writer.publish(translate::status::Timed::new(&statuses, ""));
        let labels = KindLabels::of(Kind::HttpRoute);
        for _ in 0..100 {
            if metrics.status_writes.get_or_create(&labels).get() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(metrics.status_conflicts.get_or_create(&labels).get(), 1);
        assert_eq!(metrics.status_writes.get_or_create(&labels).get(), 1);
        assert_eq!(patches.load(Ordering::SeqCst), 2);
    }

    /// A status this writer wrote is not queued again while the object's
    /// `resourceVersion` is the one the write made, whatever the
    /// translation's timestamps; a change of the object queues it again
    /// (and the writer compares it with the live status: equal, nothing
    /// written).
    #[tokio::test]
    async fn a_confirmed_status_is_not_queued_again() {
        let patches = Arc::new(AtomicUsize::new(0));
        let parent = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra", "name": "gw"});
        let cond = |time: &str| json!({"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "observedGeneration": 1, "lastTransitionTime": time});
        let written =
            json!({"parents": [{"parentRef": parent, "controllerName": "us", "conditions": [cond("T1")]}]});
        let client = answering(live("8", written.clone()), patches.clone());
        let (stores, mut writer) = route_stores(live("7", json!({})));
        let leader = tokio::sync::watch::channel(true).1;
        let metrics = KubeMetrics::default();
        let status_writer = StatusWriter::start(client, stores, "us".into(), leader, metrics.clone());
        let publish = |time: &str| {
            let statuses = [std::sync::Arc::new(translate::ObjectStatus::new(
                "gateway.networking.k8s.io/v1",
                "HTTPRoute",
                Some("app"),
                "r",
                json!({"parents": [{"parentRef": parent, "controllerName": "us", "conditions": [cond(time)]}]}),
            ))];
            status_writer.publish(translate::status::Timed::new(&statuses, time));
        };
        let labels = KindLabels::of(Kind::HttpRoute);
        publish("T1");
        settle(&metrics).await;
        assert_eq!(patches.load(Ordering::SeqCst), 1, "the first status is written");
        // The store sees the write.
        writer.apply_watcher_event(&watcher::Event::Apply(live("8", written.clone())));
        publish("T2");
        assert_eq!(
            metrics.status_queue_depth.get(),
            0,
            "a confirmed status was queued again"
        );
        settle(&metrics).await;
        assert_eq!(metrics.status_unchanged.get_or_create(&labels).get(), 0);
        assert_eq!(patches.load(Ordering::SeqCst), 1);
        // Someone else changed the object: compared again, still equal.
        writer.apply_watcher_event(&watcher::Event::Apply(live("9", written)));
        publish("T3");
        assert_eq!(metrics.status_queue_depth.get(), 1, "a changed object is queued");
        settle(&metrics).await;
        assert_eq!(metrics.status_unchanged.get_or_create(&labels).get(), 1);
        assert_eq!(patches.load(Ordering::SeqCst), 1, "nothing to write");
    }

    /// The translator shares an unchanged object's status between
    /// translations (the same `Arc`): publishing it again writes no JSON
    /// while it is confirmed in the API; once the object changes, it is
    /// written as JSON to be queued; a new status is written as JSON.
    #[tokio::test]
    async fn a_shared_status_is_not_written_as_json_again() {
        let parent = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra", "name": "gw"});
        let body = || {
            json!({"parents": [{"parentRef": parent, "controllerName": "us", "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "observedGeneration": 1}]}]})
        };
        let mut written = body();
        written["parents"][0]["conditions"][0]["lastTransitionTime"] = json!("T1");
        let client = answering(live("8", written.clone()), Arc::default());
        let (stores, mut writer) = route_stores(live("7", json!({})));
        let leader = tokio::sync::watch::channel(true).1;
        let metrics = KubeMetrics::default();
        let status_writer = StatusWriter::start(client, stores, "us".into(), leader, metrics.clone());
        let status = || {
            [Arc::new(translate::ObjectStatus::new(
                "gateway.networking.k8s.io/v1",
                "HTTPRoute",
                Some("app"),
                "r",
                body(),
            ))]
        };
        let first = status();
        status_writer.publish(translate::status::Timed::new(&first, "T1"));
        assert_eq!(status_writer.serialized(), 1);
        settle(&metrics).await;
        writer.apply_watcher_event(&watcher::Event::Apply(live("8", written.clone())));
        // The same status, a later translation: no JSON, nothing queued.
        status_writer.publish(translate::status::Timed::new(&first, "T2"));
        assert_eq!(
            status_writer.serialized(),
            1,
            "a shared status was written as JSON again"
        );
        assert_eq!(metrics.status_queue_depth.get(), 0);
        // Someone else changed the object: queued, so written as JSON.
        writer.apply_watcher_event(&watcher::Event::Apply(live("9", written)));
        status_writer.publish(translate::status::Timed::new(&first, "T3"));
        assert_eq!(status_writer.serialized(), 2);
        assert_eq!(metrics.status_queue_depth.get(), 1);
        // An equal status in a new allocation: not known, written as JSON.
        status_writer.publish(translate::status::Timed::new(&status(), "T4"));
        assert_eq!(status_writer.serialized(), 3);
    }

    #[test]
    fn a_fingerprint_ignores_transition_times_and_key_order() {
        let a = json!({"conditions": [{"type": "A", "status": "True", "lastTransitionTime": "T0"}]});
        let b = json!({"conditions": [{"lastTransitionTime": "T1", "status": "True", "type": "A"}]});
        let c = json!({"conditions": [{"type": "A", "status": "False", "lastTransitionTime": "T0"}]});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }
}
