//! The reconcile loop: applies [`super::plan`] to the apiserver (see the
//! module doc of [`super`] for the rules).
//!
//! One task. It wakes on a published translation ([`Provisioner::publish`]
//! keeps only the latest verdicts), on a change of leadership, and on any
//! event of the provisioned objects themselves (label-selected watches of
//! ConfigMaps, Services and Deployments carrying our
//! [`super::objects::CONTROLLER_LABEL`]), so an object deleted or edited
//! by hand is put back. Nothing is done before those watches have listed,
//! and nothing at all while this replica is not the leader. A failed
//! write is retried (every object again, compared with the live one) on a
//! backoff timer (250 ms doubling to 30 s) that never delays a pass an
//! event asks for.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, watch};

use super::objects::{APPLIED_HASH_ANNOTATION, CONTROLLER_LABEL, controller_label, fnv};
use super::plan::{Verdicts, plan};
use super::{Config, FIELD_MANAGER, ProvisionMetrics};

struct Shared {
    verdicts: Mutex<Option<Verdicts>>,
    wake: Notify,
}

/// The handle translations publish to; the task stops when it is dropped.
pub struct Provisioner {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The live provisioned objects (ours: label-selected).
struct Live {
    config_maps: Store<ConfigMap>,
    services: Store<Service>,
    deployments: Store<Deployment>,
}

impl Provisioner {
    /// Starts the watches and the reconcile task. `snapshots` is the
    /// provider's channel (the inputs translations are made from);
    /// `leader` says whether this replica may write.
    pub fn start(
        client: Client,
        config: Config,
        snapshots: watch::Receiver<Arc<provider::Snapshot>>,
        leader: watch::Receiver<bool>,
        metrics: ProvisionMetrics,
    ) -> Provisioner {
        let shared = Arc::new(Shared {
            verdicts: Mutex::new(None),
            wake: Notify::new(),
        });
        let selector = format!("{CONTROLLER_LABEL}={}", controller_label(&config.controller_name));
        let mut tasks = Vec::new();
        let live = Live {
            config_maps: watch_owned(&client, &selector, &shared, &mut tasks),
            services: watch_owned(&client, &selector, &shared, &mut tasks),
            deployments: watch_owned(&client, &selector, &shared, &mut tasks),
        };
        tasks.push(tokio::spawn(reconcile_loop(
            client,
            config,
            snapshots,
            leader,
            live,
            shared.clone(),
            metrics,
        )));
        Provisioner { shared, tasks }
    }

    /// Takes the verdicts of one translation's status (latest wins).
    pub fn publish(&self, statuses: &[std::sync::Arc<translate::ObjectStatus>]) {
        let verdicts = Verdicts::of(statuses);
        *self
            .shared
            .verdicts
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(verdicts);
        self.shared.wake.notify_one();
    }
}

fn watch_owned<K>(
    client: &Client,
    selector: &str,
    shared: &Arc<Shared>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let stream =
        crate::backoff::retried(watcher(api, watcher::Config::default().labels(selector))).reflect(writer);
    let shared = shared.clone();
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                    shared.wake.notify_one();
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(kind = %K::kind(&()), %error, "provisioned objects: watch error; retrying");
                }
            }
        }
    }));
    reader
}

async fn reconcile_loop(
    client: Client,
    config: Config,
    snapshots: watch::Receiver<Arc<provider::Snapshot>>,
    mut leader: watch::Receiver<bool>,
    live: Live,
    shared: Arc<Shared>,
    metrics: ProvisionMetrics,
) {
    // Compared with the live objects only once they are listed (else
    // every object would be written again at start).
    let ready = async {
        live.config_maps.wait_until_ready().await?;
        live.services.wait_until_ready().await?;
        live.deployments.wait_until_ready().await
    };
    if ready.await.is_err() {
        tracing::warn!("provisioned objects: a watch stopped before listing; provisioning is off");
        return;
    }
    let mut backoff = Duration::from_millis(250);
    // A retry is a timer, not a sleep: a Gateway that keeps failing never
    // holds back the others' changes (any wake runs a pass at once).
    let mut retry_at: Option<tokio::time::Instant> = None;
    // A closed channel keeps its last value (a single replica's `true`).
    let mut election_over = false;
    loop {
        let retry = retry_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            () = shared.wake.notified() => {}
            () = tokio::time::sleep_until(retry), if retry_at.is_some() => {}
            changed = leader.changed(), if !election_over => {
                election_over = changed.is_err();
            }
        }
        // Set again below if this pass fails (a follower retries nothing:
        // becoming the leader runs a pass).
        retry_at = None;
        if !*leader.borrow_and_update() {
            continue;
        }
        let Some(verdicts) = shared
            .verdicts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            continue;
        };
        let snapshot = snapshots.borrow().clone();
        let failures = reconcile(
            &client,
            &config,
            &snapshot.loaded.inputs,
            &verdicts,
            &live,
            &metrics,
        )
        .await;
        if failures == 0 {
            backoff = Duration::from_millis(250);
            continue;
        }
        retry_at = Some(tokio::time::Instant::now() + backoff);
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// One pass; returns how many writes failed.
async fn reconcile(
    client: &Client,
    config: &Config,
    inputs: &api::Inputs,
    verdicts: &Verdicts,
    live: &Live,
    metrics: &ProvisionMetrics,
) -> usize {
    let plan = plan(inputs, verdicts, config);
    for e in &plan.errors {
        tracing::warn!(error = %e, "cannot provision a Gateway");
    }
    let mut failures = 0;
    for (gw, desired) in plan.desired {
        // The bootstrap before the pods that read it.
        let ok = apply_if_changed(client, &live.config_maps, desired.config_map, metrics).await
            && apply_if_changed(client, &live.services, desired.service, metrics).await
            && apply_if_changed(client, &live.deployments, desired.deployment, metrics).await;
        if !ok {
            tracing::warn!(namespace = %gw.namespace, name = %gw.name, "provisioning the Gateway failed; retrying");
            failures += 1;
        }
    }
    failures += remove_unkept(client, &live.deployments, &plan.keep, metrics).await;
    failures += remove_unkept(client, &live.services, &plan.keep, metrics).await;
    failures += remove_unkept(client, &live.config_maps, &plan.keep, metrics).await;
    failures
}

/// The hash of an object as it will be applied (without the annotation
/// that carries it).
fn applied_hash<K: Serialize>(object: &K) -> String {
    let text = serde_json::to_string(object).unwrap_or_default();
    format!("{:016x}", fnv(text.as_bytes()))
}

/// Applies `desired` unless the live object already carries its hash (and
/// thus every field as desired: the hash covers the owner's uid too).
/// Returns whether the object is as desired now.
async fn apply_if_changed<K>(
    client: &Client,
    live: &Store<K>,
    mut desired: K,
    metrics: &ProvisionMetrics,
) -> bool
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let hash = applied_hash(&desired);
    let namespace = desired.namespace().unwrap_or_default();
    let name = desired.name_any();
    let current = live.get(&ObjectRef::new(&name).within(&namespace));
    if current
        .as_ref()
        .and_then(|c| c.annotations().get(APPLIED_HASH_ANNOTATION))
        .is_some_and(|h| *h == hash)
    {
        ProvisionMetrics::of(&metrics.unchanged, &K::kind(&()));
        return true;
    }
    desired
        .annotations_mut()
        .insert(APPLIED_HASH_ANNOTATION.into(), hash);
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    // Not among ours: an object of that name that someone else made is
    // never taken over (a forced apply would merge into it). One carrying
    // our label is ours and the watch is only behind.
    if current.is_none() {
        let ours = desired.labels().get(CONTROLLER_LABEL).cloned();
        match api.get_opt(&name).await {
            Ok(None) => {}
            Ok(Some(existing)) if existing.labels().get(CONTROLLER_LABEL) == ours.as_ref() => {}
            Ok(Some(_)) => {
                ProvisionMetrics::of(&metrics.failures, &K::kind(&()));
                tracing::warn!(kind = %K::kind(&()), %namespace, %name, "cannot provision: an object of this name exists and was not made by this controller");
                return false;
            }
            Err(error) => {
                ProvisionMetrics::of(&metrics.failures, &K::kind(&()));
                tracing::warn!(kind = %K::kind(&()), %namespace, %name, %error, "provisioning read failed");
                return false;
            }
        }
    }
    // Forced: these fields are ours (a user's edit of them is undone).
    match api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await
    {
        Ok(_) => {
            ProvisionMetrics::of(&metrics.writes, &K::kind(&()));
            tracing::info!(kind = %K::kind(&()), %namespace, %name, "provisioned");
            true
        }
        Err(error) => {
            ProvisionMetrics::of(&metrics.failures, &K::kind(&()));
            tracing::warn!(kind = %K::kind(&()), %namespace, %name, %error, "provisioning write failed");
            false
        }
    }
}

/// Deletes every live object of ours that no Gateway of ours keeps;
/// returns how many deletes failed.
async fn remove_unkept<K>(
    client: &Client,
    live: &Store<K>,
    keep: &std::collections::BTreeSet<(String, String)>,
    metrics: &ProvisionMetrics,
) -> usize
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let mut failures = 0;
    let unkept: BTreeMap<(String, String), Option<String>> = live
        .state()
        .iter()
        .map(|o| ((o.namespace().unwrap_or_default(), o.name_any()), o.uid()))
        .filter(|(k, _)| !keep.contains(k))
        .collect();
    for ((namespace, name), uid) in unkept {
        let api: Api<K> = Api::namespaced(client.clone(), &namespace);
        // The uid precondition: never delete a newer object of that name.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                ProvisionMetrics::of(&metrics.deletes, &K::kind(&()));
                tracing::info!(kind = %K::kind(&()), %namespace, %name, "removed: its Gateway is no longer ours");
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(error) => {
                ProvisionMetrics::of(&metrics.failures, &K::kind(&()));
                tracing::warn!(kind = %K::kind(&()), %namespace, %name, %error, "removing a provisioned object failed");
                failures += 1;
            }
        }
    }
    failures
}
