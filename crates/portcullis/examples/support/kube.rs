//! What the Kubernetes-mode examples share: the benchmark's HTTPRoute and
//! server-side apply of any manifest.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// HTTPRoute `app/r-I` on Gateway `infra/gw`: `/r/I` to Service `a`.
pub fn route(i: usize) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("r-{i}"), "namespace": "app"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": format!("/r/{i}")}}],
             "backendRefs": [{"name": "a", "port": 80}]},
        ]},
    }))
    .unwrap_or_else(|e| panic!("route: {e}"))
}

/// Applies each document (server-side, field manager `bench`), its kind
/// discovered from the apiserver.
pub async fn apply(client: &kube::Client, docs: &[serde_json::Value]) {
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = doc["kind"].as_str().unwrap_or_default();
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("discover {kind}: {e}"));
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        api.patch(name, &PatchParams::apply("bench").force(), &Patch::Apply(doc))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    }
}
