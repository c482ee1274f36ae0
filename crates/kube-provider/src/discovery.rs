//! Which resources the apiserver serves, and picking up a kind whose CRD
//! is installed after the controller started.
//!
//! At start every [`Resource`] is discovered once: a built-in [`crate::Kind`] at
//! its pinned version, an extension kind at the version its extension
//! server registered (never another one the CRD also serves: the hooks
//! would get objects of a shape their server does not read). A resource
//! not served then (its CRD is not installed, or not at that version) is
//! handed to [`late_kinds`], which watches
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
use kube::runtime::watcher;

use crate::{Client, Resource, Shared, Stores};

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
        Resource::Extension { group, kind, version } => match kube::discovery::group(client, group).await {
            Ok(api_group) => {
                let find = |v: &str| {
                    api_group
                        .versioned_resources(v)
                        .into_iter()
                        .find(|(ar, _)| ar.kind == *kind)
                        .map(|(ar, caps)| (ar, caps.scope == Scope::Namespaced))
                };
                let Some(version) = version else {
                    return Ok(find(api_group.preferred_version_or_latest()));
                };
                let found = find(version);
                if found.is_none() {
                    let others: Vec<&str> = api_group.versions().filter(|v| find(v).is_some()).collect();
                    if !others.is_empty() {
                        tracing::warn!(
                            kind = %kind,
                            group = %group,
                            registered = %version,
                            served = ?others,
                            "the apiserver serves this kind, but not at the version its extension server registered: read as empty until that version is served"
                        );
                    }
                }
                Ok(found)
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
    let stream = crate::backoff::retried(watcher(api, watcher::Config::default()));
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
                            let (watched, task) = shared.reflector(&resource, &ar, namespaced);
                            let (stores, changed) = (stores.clone(), shared.changed.clone());
                            reflectors.spawn(async move {
                                // The reflector runs in the same set; this
                                // task only publishes the store once listed.
                                let _keep = AbortOnDrop(task);
                                if watched.store.wait_until_ready().await.is_ok() {
                                    stores.insert(resource, watched);
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
            version: Some("v1".into()),
        };
        assert!(crd_may_serve("basicauths.example.portcullis.dev", &ext));
        assert!(!crd_may_serve("basicauths.other.portcullis.dev", &ext));
        assert!(!crd_may_serve("example.portcullis.dev", &ext));
    }
}

/// Extension kinds against a mock apiserver whose CRD serves the kind at
/// two versions, `v2` preferred: the provider watches the version the
/// extension server registered, never the preferred one instead.
#[cfg(test)]
mod version_tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;

    const GROUP: &str = "example.portcullis.dev";

    fn response(status: u16, body: &Value) -> http::Response<kube::client::Body> {
        http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.to_string().into_bytes()))
            .unwrap_or_else(|_| http::Response::new(kube::client::Body::empty()))
    }

    /// The mock; `paths` records every request path (with `?watch` marked).
    fn client(paths: Arc<Mutex<Vec<String>>>) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let paths = paths.clone();
            async move {
                let path = request.uri().path().to_string();
                let watch = request.uri().query().unwrap_or("").contains("watch=true");
                paths
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(format!("{path}{}", if watch { "?watch" } else { "" }));
                let group_version = |v: &str| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v});
                let reply = match path.as_str() {
                    "/apis" => response(
                        200,
                        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                            "name": GROUP,
                            "versions": [group_version("v2"), group_version("v1")],
                            "preferredVersion": group_version("v2"),
                        }]}),
                    ),
                    p if p == format!("/apis/{GROUP}/v1") || p == format!("/apis/{GROUP}/v2") => {
                        let v = p.rsplit('/').next().unwrap_or_default();
                        response(
                            200,
                            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{v}"),
                                "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true,
                                    "kind": "Widget", "verbs": ["get", "list", "watch"]}]}),
                        )
                    }
                    p if !watch
                        && (p == format!("/apis/{GROUP}/v1/widgets")
                            || p == format!("/apis/{GROUP}/v2/widgets")) =>
                    {
                        let v = p.split('/').nth(3).unwrap_or_default();
                        // The object in the shape of the version asked for,
                        // as the apiserver converts it.
                        let spec = if v == "v1" {
                            json!({"header": "x-a"})
                        } else {
                            json!({"headers": [{"name": "x-a"}]})
                        };
                        response(
                            200,
                            &json!({"kind": "WidgetList", "apiVersion": format!("{GROUP}/{v}"),
                                "metadata": {"resourceVersion": "10"},
                                "items": [{"apiVersion": format!("{GROUP}/{v}"), "kind": "Widget",
                                    "metadata": {"name": "w", "namespace": "app", "resourceVersion": "5"},
                                    "spec": spec}]}),
                        )
                    }
                    _ if watch => {
                        // A watch that ends without events, after a while.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        http::Response::new(kube::client::Body::empty())
                    }
                    _ => response(
                        404,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
                    ),
                };
                Ok::<_, std::convert::Infallible>(reply)
            }
        });
        Client::new(service, "default")
    }

    fn widget(version: Option<&str>) -> Resource {
        Resource::Extension {
            group: GROUP.into(),
            kind: "Widget".into(),
            version: version.map(String::from),
        }
    }

    #[tokio::test]
    async fn an_extension_kind_is_discovered_at_its_registered_version_only() {
        let client = client(Arc::default());
        let at = |found: Option<(ApiResource, bool)>| found.map(|(ar, namespaced)| (ar.version, namespaced));
        assert_eq!(
            at(discover(&client, &widget(Some("v1"))).await.expect("discover")),
            Some(("v1".to_string(), true)),
            "the registered version, not the preferred v2"
        );
        assert_eq!(
            at(discover(&client, &widget(Some("v2"))).await.expect("discover")),
            Some(("v2".to_string(), true))
        );
        // Served at other versions but not this one: missing (late).
        assert_eq!(
            at(discover(&client, &widget(Some("v3"))).await.expect("discover")),
            None
        );
        // No version given: the preferred one.
        assert_eq!(
            at(discover(&client, &widget(None)).await.expect("discover")),
            Some(("v2".to_string(), true))
        );
    }

    /// Through the whole provider: the registered kind is listed and
    /// watched at `v1`, and the object the hooks get is `v1`'s.
    #[tokio::test]
    async fn the_provider_watches_and_loads_the_registered_version() {
        let paths: Arc<Mutex<Vec<String>>> = Arc::default();
        let options = crate::Options {
            debounce: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
            loader: api::loader::Options {
                extension_kinds: [(GROUP.to_string(), "Widget".to_string())].into(),
                extension_versions: [((GROUP.to_string(), "Widget".to_string()), "v1".to_string())].into(),
            },
            ..crate::Options::default()
        };
        let (provider, snapshots) = crate::start(
            client(paths.clone()),
            options,
            crate::metrics::KubeMetrics::default(),
        )
        .await
        .expect("start");
        let objects: Vec<(String, String)> = snapshots
            .borrow()
            .loaded
            .inputs
            .extension_resources
            .iter()
            .map(|o| {
                let json: Value = serde_json::from_slice(&o.object.json).unwrap_or_default();
                (o.object.api_version.clone(), json["spec"].to_string())
            })
            .collect();
        assert_eq!(
            objects,
            [(format!("{GROUP}/v1"), r#"{"header":"x-a"}"#.to_string())]
        );
        assert!(provider.stores.watches(&widget(Some("v1"))));
        let seen = paths
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert!(
            seen.iter().any(|p| *p == format!("/apis/{GROUP}/v1/widgets")),
            "{seen:?}"
        );
        assert!(
            !seen
                .iter()
                .any(|p| p.starts_with(&format!("/apis/{GROUP}/v2/widgets"))),
            "never the preferred version: {seen:?}"
        );
    }
}
