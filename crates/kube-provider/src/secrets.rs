//! Which Secrets' data the provider holds: only `kubernetes.io/tls`
//! Secrets that a spec the translator reads names — a Gateway or
//! ListenerSet listener's `tls.certificateRefs`, an HTTPProxy root's
//! `spec.virtualhost.tls.secretName` (`name`, or `namespace/name` through a
//! TLSCertificateDelegation). Whether the reference is permitted
//! (ReferenceGrant, delegation) is the translator's decision; a Secret no
//! spec names is never fetched.

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject};
use kube::runtime::reflector;

use crate::load::{Builder, Pass, load_object};
use crate::{Kind, Resource, Stores};

impl Builder {
    /// The referenced Secrets (that exist as `kubernetes.io/tls` Secrets),
    /// fetched when their `resourceVersion` changed. A fetch that fails
    /// keeps the last good load: an outage never takes a certificate away.
    pub(crate) async fn load_secrets(&mut self, stores: &Stores, pass: &mut Pass) {
        let Some(meta) = &stores.secrets else { return };
        let ar = Kind::Secret.api_resource();
        for (namespace, name) in referenced_secrets(stores) {
            let reference = reflector::ObjectRef::new_with(&name, ar.clone()).within(&namespace);
            let Some(object) = meta.get(&reference) else {
                continue;
            };
            let version = object.metadata.resource_version.clone().unwrap_or_default();
            let key = (Resource::Kind(Kind::Secret), namespace.clone(), name.clone());
            if self.cache.get(&key).is_some_and(|(v, _)| *v == version) {
                pass.keys.push(key);
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &ar);
            match api.get_opt(&name).await {
                Ok(Some(secret)) => {
                    self.cached_or(pass, key, version, |loader| load_object(&ar, &secret, loader));
                }
                // Deleted since: the metadata watch will say so.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(namespace, name, %error, "cannot read a referenced Secret; keeping its last version");
                    if self.cache.contains_key(&key) {
                        pass.keys.push(key);
                    }
                }
            }
        }
    }
}

/// `namespace/name` of every Secret a listener or an HTTPProxy root names
/// (see the module doc).
pub(crate) fn referenced_secrets(stores: &Stores) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for kind in [Kind::Gateway, Kind::ListenerSet] {
        for object in stores.all(kind) {
            listener_secrets(&object, &mut out);
        }
    }
    for object in stores.all(Kind::HttpProxy) {
        proxy_secret(&object, &mut out);
    }
    out
}

fn own_namespace(object: &DynamicObject) -> String {
    object
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into())
}

/// A Gateway's or ListenerSet's `spec.listeners[].tls.certificateRefs`.
fn listener_secrets(object: &DynamicObject, out: &mut BTreeSet<(String, String)>) {
    let own = own_namespace(object);
    let listeners = object.data["spec"]["listeners"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for listener in listeners {
        let refs = listener["tls"]["certificateRefs"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for r in refs {
            let core = r["group"].as_str().is_none_or(str::is_empty);
            let secret = r["kind"].as_str().is_none_or(|k| k == "Secret");
            if let (true, true, Some(name)) = (core, secret, r["name"].as_str()) {
                let ns = r["namespace"].as_str().unwrap_or(&own).to_string();
                out.insert((ns, name.to_string()));
            }
        }
    }
}

/// An HTTPProxy's `spec.virtualhost.tls.secretName`: `name` in the
/// proxy's namespace, or `namespace/name` (delegated).
fn proxy_secret(object: &DynamicObject, out: &mut BTreeSet<(String, String)>) {
    let Some(secret) = object.data["spec"]["virtualhost"]["tls"]["secretName"].as_str() else {
        return;
    };
    let secret = secret.trim();
    if secret.is_empty() {
        return;
    }
    match secret.split_once('/') {
        Some((ns, name)) => {
            out.insert((ns.to_string(), name.to_string()));
        }
        None => {
            out.insert((own_namespace(object), secret.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).expect("object")
    }

    #[test]
    fn proxy_secrets_are_own_or_delegated() {
        let mut out = BTreeSet::new();
        proxy_secret(
            &object(
                serde_json::json!({"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
                "metadata": {"name": "p", "namespace": "app"},
                "spec": {"virtualhost": {"fqdn": "a", "tls": {"secretName": "own"}}}}),
            ),
            &mut out,
        );
        proxy_secret(
            &object(
                serde_json::json!({"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
                "metadata": {"name": "q", "namespace": "app"},
                "spec": {"virtualhost": {"fqdn": "b", "tls": {"secretName": "certs/wild"}}}}),
            ),
            &mut out,
        );
        // A child (no virtualhost) names no Secret.
        proxy_secret(
            &object(
                serde_json::json!({"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
                "metadata": {"name": "c", "namespace": "app"}, "spec": {"routes": []}}),
            ),
            &mut out,
        );
        let want: BTreeSet<(String, String)> = [("app", "own"), ("certs", "wild")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(out, want);
    }
}
