//! Building a snapshot from the stores: every object read through the
//! file loader, cached by `resourceVersion` (see the crate doc).

use std::collections::{HashMap, HashSet};

use api::loader::Loaded;
use kube::api::{ApiResource, DynamicObject};

use crate::{Client, Resource, Stores, metrics};

/// Which object a cached load is of.
pub(crate) type ObjectKey = (Resource, String, String);

/// Loads objects, caching each object's load by `resourceVersion`.
pub(crate) struct Builder {
    pub(crate) client: Client,
    pub(crate) metrics: metrics::KubeMetrics,
    pub(crate) loader: api::loader::Options,
    pub(crate) cache: HashMap<ObjectKey, (String, Loaded)>,
}

impl Builder {
    pub(crate) fn new(client: Client, metrics: metrics::KubeMetrics, loader: api::loader::Options) -> Self {
        Self {
            client,
            metrics,
            loader,
            cache: HashMap::new(),
        }
    }

    pub(crate) async fn build(&mut self, stores: &Stores) -> Loaded {
        let mut parts = Vec::new();
        let mut seen = HashSet::new();
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
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let name = object.metadata.name.clone().unwrap_or_default();
                let version = object.metadata.resource_version.clone().unwrap_or_default();
                let key = (resource.clone(), namespace, name);
                seen.insert(key.clone());
                if let Some((v, loaded)) = self.cache.get(&key)
                    && *v == version
                {
                    parts.push(loaded.clone());
                    continue;
                }
                let loaded = load_object(&watched.ar, &object, &self.loader);
                self.cache.insert(key, (version, loaded.clone()));
                parts.push(loaded);
            }
        }
        self.load_secrets(stores, &mut parts, &mut seen).await;
        self.cache.retain(|k, _| seen.contains(k));
        let held = self
            .cache
            .keys()
            .filter(|k| k.0 == Resource::Kind(crate::Kind::Secret))
            .count();
        self.metrics.secrets_held.set(held as i64);
        api::loader::merge(parts)
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
