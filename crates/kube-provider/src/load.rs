//! Building a snapshot from the stores: every object read through the
//! file loader as it arrived (`crate::arrive`), one load kept per object
//! (see the crate doc).

use std::collections::{HashMap, HashSet};
use std::sync::PoisonError;

use api::loader::Loaded;
use kube::api::{ApiResource, DynamicObject};

use crate::{Client, Resource, Stores, metrics};

/// Which object a cached load is of.
pub(crate) type ObjectKey = (Resource, String, String);

/// Keeps each object's load (by `resourceVersion`) and merges them into
/// snapshots.
pub(crate) struct Builder {
    pub(crate) client: Client,
    pub(crate) metrics: metrics::KubeMetrics,
    pub(crate) loader: api::loader::Options,
    /// Each object's load; snapshots share its objects (`api::Sourced`).
    pub(crate) cache: HashMap<ObjectKey, (String, Loaded)>,
    /// The objects of the last build, in order (`None` before the first).
    last: Option<Vec<ObjectKey>>,
    /// Fill `Inputs::provisioned_addresses` (provisioning on).
    provisioned_addresses: bool,
    /// The addresses of the last build: they come from the provisioned
    /// Services' `status`, which the object loads leave out, so a change
    /// of them alone must still make a new snapshot.
    last_addresses: Option<api::inputs::ProvisionedAddresses>,
}

/// What a build found while reading the stores.
#[derive(Default)]
pub(crate) struct Pass {
    /// Every object of this build, in a stable order.
    pub(crate) keys: Vec<ObjectKey>,
    /// Whether any object's load differs from the previous build's.
    pub(crate) changed: bool,
}

impl Builder {
    pub(crate) fn new(client: Client, metrics: metrics::KubeMetrics, loader: api::loader::Options) -> Self {
        Self {
            client,
            metrics,
            loader,
            cache: HashMap::new(),
            last: None,
            provisioned_addresses: false,
            last_addresses: None,
        }
    }

    /// Also report the provisioned Services' addresses
    /// ([`crate::provision::addresses`]).
    pub(crate) fn with_provisioned_addresses(mut self, on: bool) -> Self {
        self.provisioned_addresses = on;
        self
    }

    /// The snapshot of the stores, or `None` when it would equal the last
    /// one. Only the objects that arrived since the last build were loaded
    /// again (`crate::arrive`);
    /// a change that loads the same (a status write: ours after every
    /// translation, at scale one per route) is found without merging
    /// every object, which is what a build costs.
    pub(crate) async fn build(&mut self, stores: &Stores) -> Option<Loaded> {
        let mut pass = Pass::default();
        for resource in stores.resources() {
            if resource == Resource::Kind(crate::Kind::Secret) {
                continue;
            }
            let Some(watched) = stores.watched(&resource) else {
                continue;
            };
            let mut objects = watched.store.state();
            objects.sort_by(|a, b| {
                (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                    .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
            });
            for object in objects {
                let id = (
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                // The load made when the object arrived, if not yet taken
                // (during a relist it may be of a newer version than the
                // store's, which is as good).
                let arrived = watched
                    .fresh
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                let key = (resource.clone(), id.0, id.1);
                match arrived {
                    Some((version, loaded)) => self.cached_or(&mut pass, key, version, |_| loaded),
                    None if self.cache.contains_key(&key) => pass.keys.push(key),
                    // Every object is loaded before its store holds it.
                    None => {
                        tracing::debug!(kind = resource.name(), name = %key.2, "an object without its load")
                    }
                }
            }
        }
        self.load_secrets(stores, &mut pass).await;
        let seen: HashSet<&ObjectKey> = pass.keys.iter().collect();
        self.cache.retain(|k, _| seen.contains(k));
        let held = self
            .cache
            .keys()
            .filter(|k| k.0 == Resource::Kind(crate::Kind::Secret))
            .count();
        self.metrics.secrets_held.set(held as i64);
        let addresses = self
            .provisioned_addresses
            .then(|| crate::provision::addresses::collect(stores));
        if addresses != self.last_addresses {
            pass.changed = true;
        }
        // An object added, removed or moved changes the set of keys.
        if !pass.changed && self.last.as_ref() == Some(&pass.keys) {
            return None;
        }
        let parts = pass
            .keys
            .iter()
            .filter_map(|k| self.cache.get(k).map(|(_, loaded)| loaded.clone()))
            .collect::<Vec<_>>();
        self.last = Some(pass.keys);
        let mut loaded = api::loader::merge(parts);
        loaded.inputs.provisioned_addresses = addresses.clone();
        self.last_addresses = addresses;
        Some(loaded)
    }

    /// Records `key` in `pass`: its cached load when `version` is the
    /// cached one, else `load()` (marking the pass changed if the load
    /// differs from the cached one).
    pub(crate) fn cached_or(
        &mut self,
        pass: &mut Pass,
        key: ObjectKey,
        version: String,
        load: impl FnOnce(&api::loader::Options) -> Loaded,
    ) {
        match self.cache.get_mut(&key) {
            Some((v, _)) if *v == version => {}
            Some((v, loaded)) => {
                let fresh = load(&self.loader);
                if fresh != *loaded {
                    pass.changed = true;
                    *loaded = fresh;
                }
                *v = version;
            }
            None => {
                let fresh = load(&self.loader);
                pass.changed = true;
                self.cache.insert(key.clone(), (version, fresh));
            }
        }
        pass.keys.push(key);
    }
}

/// Reads one object through the file loader (see the crate doc).
pub(crate) fn load_object(ar: &ApiResource, object: &DynamicObject, loader: &api::loader::Options) -> Loaded {
    let mut value = serde_json::to_value(object).unwrap_or(serde_json::Value::Null);
    if let Some(map) = value.as_object_mut() {
        // List items of built-in kinds come without their type.
        map.insert("apiVersion".into(), ar.api_version.clone().into());
        map.insert("kind".into(), ar.kind.clone().into());
        map.remove("status");
        // Neither changes what is translated; dropping them makes a
        // status write (ours included) load to the same snapshot, which
        // then publishes nothing (no translation per status write).
        if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
    }
    let file = format!(
        "api:{}/{}{}.json",
        ar.plural,
        object
            .metadata
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or("")
    );
    api::loader::load_str_with(&file, &value.to_string(), loader)
}

#[cfg(test)]
mod tests {
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    use super::*;
    use crate::{Fresh, Kind, Watched};

    fn route(version: &str, path: &str, status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "app", "resourceVersion": version, "generation": 1,
                "labels": {"team": "a"}, "annotations": {"note": "kept in the load"}},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}]}]},
            "status": status,
        }))
        .expect("route")
    }

    /// A route reflector as the provider's: every event goes through
    /// `arrive` before the store.
    struct Routes {
        writer: reflector::store::Writer<DynamicObject>,
        fresh: Fresh,
        stores: Stores,
    }

    impl Routes {
        fn new() -> Self {
            let ar = Kind::HttpRoute.api_resource();
            let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
            let fresh = Fresh::default();
            let stores = Stores::default();
            stores.insert(
                Resource::Kind(Kind::HttpRoute),
                Watched {
                    ar,
                    namespaced: true,
                    store: writer.as_reader(),
                    fresh: fresh.clone(),
                },
            );
            Self {
                writer,
                fresh,
                stores,
            }
        }

        fn apply(&mut self, mut event: watcher::Event<DynamicObject>) {
            crate::arrive(
                &mut event,
                &Kind::HttpRoute.api_resource(),
                &api::loader::Options::default(),
                Kind::HttpRoute.keep(),
                &self.fresh,
            );
            self.writer.apply_watcher_event(&event);
        }
    }

    fn builder() -> Builder {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no apiserver"))
        });
        Builder::new(
            Client::new(service, "default"),
            metrics::KubeMetrics::default(),
            api::loader::Options::default(),
        )
    }

    /// A new `resourceVersion` that loads the same (a status write) builds
    /// nothing; a spec change builds a snapshot.
    #[tokio::test]
    async fn a_status_write_builds_nothing() {
        let mut routes = Routes::new();
        routes.apply(watcher::Event::Apply(route("1", "/a", json!({}))));
        let mut builder = builder();
        let first = builder.build(&routes.stores).await.expect("the first build");
        assert_eq!(first.inputs.http_routes.len(), 1);
        assert!(builder.build(&routes.stores).await.is_none(), "nothing changed");
        routes.apply(watcher::Event::Apply(route("2", "/a", json!({"parents": []}))));
        assert!(builder.build(&routes.stores).await.is_none(), "a status write");
        routes.apply(watcher::Event::Apply(route("3", "/b", json!({"parents": []}))));
        let edited = builder.build(&routes.stores).await.expect("a spec change");
        assert_ne!(edited, first);
        routes.apply(watcher::Event::Delete(route("3", "/b", json!({}))));
        let deleted = builder.build(&routes.stores).await.expect("a delete");
        assert!(deleted.inputs.http_routes.is_empty());
        assert!(
            routes.fresh.lock().expect("fresh").is_empty(),
            "no load left behind"
        );
    }

    /// The route store keeps the route's identity and status only (the
    /// status writer's reads); its spec, labels and annotations are in the
    /// snapshot, loaded as the route arrived.
    #[tokio::test]
    async fn a_route_store_keeps_no_spec() {
        let mut routes = Routes::new();
        let status =
            json!({"parents": [{"controllerName": "other", "parentRef": {"name": "gw"}, "conditions": []}]});
        routes.apply(watcher::Event::Apply(route("1", "/a", status.clone())));
        let held = routes
            .stores
            .get(Kind::HttpRoute, Some("app"), "r")
            .expect("in the store");
        assert_eq!(
            held.data,
            json!({"status": status}),
            "the store keeps only status"
        );
        assert_eq!(held.metadata.resource_version.as_deref(), Some("1"));
        assert_eq!(held.metadata.generation, Some(1));
        assert_eq!(
            (held.metadata.labels.clone(), held.metadata.annotations.clone()),
            (None, None)
        );
        let loaded = builder().build(&routes.stores).await.expect("a build");
        let route = &loaded.inputs.http_routes[0];
        let rules = route.object.spec.rules.as_ref().expect("rules");
        let path = rules[0].matches.as_ref().expect("matches")[0]
            .path
            .as_ref()
            .expect("path");
        assert_eq!(path.value.as_deref(), Some("/a"));
        let annotations = route.object.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("note").map(String::as_str),
            Some("kept in the load")
        );
    }

    /// An object listed by a relist that failed, and absent from the next
    /// one, leaves no load behind.
    #[test]
    fn a_relist_prunes_loads_of_objects_it_no_longer_lists() {
        let mut routes = Routes::new();
        routes.apply(watcher::Event::Init);
        routes.apply(watcher::Event::InitApply(route("1", "/a", json!({}))));
        // The relist failed; the next one lists nothing.
        routes.apply(watcher::Event::Init);
        routes.apply(watcher::Event::InitDone);
        let watched = routes
            .stores
            .watched(&Resource::Kind(Kind::HttpRoute))
            .expect("watched");
        crate::prune(&routes.fresh, &watched.store);
        assert!(routes.fresh.lock().expect("fresh").is_empty());
    }

    /// Snapshots share the cached objects (`api::Sourced`): a route not
    /// edited is the same allocation in the snapshot after another
    /// route's edit, and the cache keeps no copy of its own.
    #[tokio::test]
    async fn snapshots_share_the_objects_of_unedited_routes() {
        use std::sync::Arc;

        let named = |name: &str, version: &str, path: &str| {
            let mut r = route(version, path, json!({}));
            r.metadata.name = Some(name.into());
            r
        };
        let mut routes = Routes::new();
        routes.apply(watcher::Event::Apply(named("a", "1", "/a")));
        routes.apply(watcher::Event::Apply(named("b", "2", "/b")));
        let mut builder = builder();
        let first = builder.build(&routes.stores).await.expect("the first build");
        routes.apply(watcher::Event::Apply(named("b", "3", "/edited")));
        let edited = builder.build(&routes.stores).await.expect("an edit");
        let (old, new) = (&first.inputs.http_routes, &edited.inputs.http_routes);
        assert!(
            Arc::ptr_eq(&old[0].object, &new[0].object),
            "route a kept its object"
        );
        assert!(!Arc::ptr_eq(&old[1].object, &new[1].object), "route b is new");
        drop(first);
        let a = &edited.inputs.http_routes[0].object;
        assert_eq!(Arc::strong_count(a), 2, "this snapshot and the cache, no copy");
    }
}
