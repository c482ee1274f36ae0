//! Which resources the apiserver serves, and picking up a kind whose CRD
//! is installed after the controller started.
//!
//! At start every [`Resource`] is discovered once: a built-in [`Kind`] at
//! its pinned version, an extension kind at the version discovery prefers
//! that has it. A resource not served then (its CRD is not installed, or
//! not at our version) is handed to [`late_kinds`], which watches
//! CustomResourceDefinitions — **metadata only**: a CRD's name is
//! `<plural>.<group>`, all that is needed to tell whether it can be one of
//! ours, and the cluster's CRDs (their schemas run to megabytes) are never
//! held. Every event of a CRD whose name matches a missing resource (its
//! creation, its `Established` condition, a new version) rediscovers that
//! resource, once a second for up to [`RECHECK_FOR`] (the apiserver's
//! discovery lags the CRD's creation by a moment); once it is served its
//! reflector starts, and its objects enter the snapshots when its initial
//! list is complete.
//!
//! A watch rather than periodic rediscovery: the kind is picked up within
//! a second of its CRD becoming served, and nothing is polled while no CRD
//! changes. It needs `list`/`watch` on `customresourcedefinitions`; without
//! it the watch keeps retrying (logged) and a late CRD needs a restart, as
//! before.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::discovery::Scope;
use kube::runtime::{WatchStreamExt, watcher};

use crate::{Client, Resource, Shared, Stores, Watched};

/// How long CRD events of a missing resource keep it rediscovered.
pub const RECHECK_FOR: Duration = Duration::from_secs(30);

/// `Some((resource, namespaced))` if the apiserver serves `resource`,
/// `None` if it does not; an error when it cannot be asked (unreachable).
pub async fn discover(
    client: &Client,
    resource: &Resource,
) -> Result<Option<(ApiResource, bool)>, kube::Error> {
    match resource {
        Resource::Kind(kind) => {
            let (group, version, name, _, _) = kind.resource();
            match kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, name)).await {
                // Our own `ApiResource`: the stores are keyed by it.
                Ok(_) => Ok(Some((kind.api_resource(), kind.namespaced()))),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                Err(kube::Error::Discovery(_)) => Ok(None),
                Err(error) => Err(error),
            }
        }
        Resource::Extension { group, kind } => match kube::discovery::group(client, group).await {
            Ok(api_group) => {
                // The preferred version first, then the others.
                let preferred = api_group.preferred_version_or_latest().to_string();
                let versions = std::iter::once(preferred.clone())
                    .chain(api_group.versions().filter(|v| *v != preferred).map(String::from))
                    .collect::<Vec<_>>();
                Ok(versions.iter().find_map(|v| {
                    api_group
                        .versioned_resources(v)
                        .into_iter()
                        .find(|(ar, _)| ar.kind == *kind)
                        .map(|(ar, caps)| (ar, caps.scope == Scope::Namespaced))
                }))
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(error) => Err(error),
        },
    }
}

/// Whether the CRD named `crd` (`<plural>.<group>`) can serve `resource`.
pub fn crd_may_serve(crd: &str, resource: &Resource) -> bool {
    match resource {
        Resource::Kind(kind) => {
            let (group, _, _, plural, _) = kind.resource();
            crd == format!("{plural}.{group}")
        }
        // The plural of an extension kind is not known before discovery.
        Resource::Extension { group, .. } => crd
            .split_once('.')
            .is_some_and(|(_, crd_group)| crd_group == group),
    }
}

/// Watches CRDs and starts the reflector of each `missing` resource once
/// it is served (see the module doc). Runs until aborted; the reflectors
/// it started stop with it.
pub(crate) async fn late_kinds(shared: Shared, stores: Stores, mut missing: Vec<Resource>) {
    // Metadata only (`PartialObjectMeta`): the schemas are never fetched.
    let api: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(shared.client.clone());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut reflectors = tokio::task::JoinSet::new();
    // Missing resources a CRD event named, until when to rediscover them.
    let mut recheck: BTreeMap<Resource, Instant> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = stream.next() => {
                let names: Vec<String> = match event {
                    Some(Ok(watcher::Event::Apply(crd) | watcher::Event::InitApply(crd))) => {
                        crd.metadata.name.into_iter().collect()
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => {
                        tracing::warn!(%error, "cannot watch CustomResourceDefinitions; a CRD installed now needs a restart");
                        continue;
                    }
                    None => return,
                };
                let until = Instant::now() + RECHECK_FOR;
                for resource in &missing {
                    if names.iter().any(|n| crd_may_serve(n, resource)) {
                        recheck.insert(resource.clone(), until);
                    }
                }
                if recheck.is_empty() {
                    continue;
                }
                // Try at once; the tick retries.
                tick.reset_immediately();
            }
            _ = tick.tick(), if !recheck.is_empty() => {
                let now = Instant::now();
                let due: Vec<Resource> = recheck.keys().cloned().collect();
                for resource in due {
                    match discover(&shared.client, &resource).await {
                        Ok(Some((ar, namespaced))) => {
                            recheck.remove(&resource);
                            missing.retain(|m| *m != resource);
                            tracing::info!(kind = resource.name(), version = %ar.version, "CRD installed: watching this kind");
                            shared.metrics.late_kinds.get_or_create(&crate::metrics::KindLabels::named(resource.name())).inc();
                            let (store, task) = shared.reflector(&resource, &ar);
                            let (stores, changed) = (stores.clone(), shared.changed.clone());
                            reflectors.spawn(async move {
                                // The reflector runs in the same set; this
                                // task only publishes the store once listed.
                                let _keep = AbortOnDrop(task);
                                if store.wait_until_ready().await.is_ok() {
                                    stores.insert(resource, Watched { ar, namespaced, store });
                                    changed.notify_one();
                                }
                                std::future::pending::<()>().await;
                            });
                        }
                        Ok(None) => {
                            if recheck.get(&resource).is_some_and(|until| *until <= now) {
                                recheck.remove(&resource);
                            }
                        }
                        Err(error) => {
                            tracing::warn!(kind = resource.name(), %error, "cannot discover this kind; retrying");
                        }
                    }
                }
            }
        }
    }
}

/// Aborts a task when dropped (the reflector of a late kind stops with the
/// provider).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;

    #[test]
    fn crd_names_match_their_resources() {
        let proxy = Resource::Kind(Kind::HttpProxy);
        assert!(crd_may_serve("httpproxies.projectcontour.io", &proxy));
        assert!(!crd_may_serve(
            "tlscertificatedelegations.projectcontour.io",
            &proxy
        ));
        assert!(!crd_may_serve("httpproxies.projectcontour.io.evil", &proxy));
        let ext = Resource::Extension {
            group: "example.portcullis.dev".into(),
            kind: "BasicAuth".into(),
        };
        assert!(crd_may_serve("basicauths.example.portcullis.dev", &ext));
        assert!(!crd_may_serve("basicauths.other.portcullis.dev", &ext));
        assert!(!crd_may_serve("example.portcullis.dev", &ext));
    }
}
