//! The provider against a mock apiserver (`tower`): a watch answered with
//! `410 Gone` (an `ERROR` event with code 410, as a real apiserver sends
//! when the resourceVersion was compacted) makes the watcher relist; the
//! objects stay in every snapshot published meanwhile, and the relist's
//! new object is published. The stores are slimmed (`slim`, `Keep`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

const ROUTES: &str = "/apis/gateway.networking.k8s.io/v1/httproutes";

fn route(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "app", "resourceVersion": version, "generation": 1,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"a copy\": 1}", "kept": "yes"},
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "gateway.networking.k8s.io/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"parentRefs": [{"name": "gw"}]},
    })
}

fn response(status: u16, body: &Value) -> http::Response<kube::client::Body> {
    let mut text = body.to_string();
    text.push('\n');
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(text.into_bytes()))
        .unwrap_or_else(|_| http::Response::new(kube::client::Body::empty()))
}

fn not_found() -> http::Response<kube::client::Body> {
    response(
        404,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

/// Counts what the mock answered.
#[derive(Default)]
struct Calls {
    lists: AtomicUsize,
    watches: AtomicUsize,
}

#[tokio::test]
async fn a_410_gone_relists_and_keeps_every_object() {
    let calls = Arc::new(Calls::default());
    let seen = calls.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let calls = seen.clone();
        async move {
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or("").to_string();
            let reply = if path == "/apis/gateway.networking.k8s.io/v1" {
                // Only HTTPRoute is served: every other kind reads as empty.
                response(
                    200,
                    &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "gateway.networking.k8s.io/v1",
                        "resources": [{"name": "httproutes", "singularName": "httproute", "namespaced": true,
                            "kind": "HTTPRoute", "verbs": ["get", "list", "watch", "patch"]}]}),
                )
            } else if path == ROUTES && !query.contains("watch=true") {
                let n = calls.lists.fetch_add(1, Ordering::SeqCst);
                let (version, items) = if n == 0 {
                    ("10", vec![route("a", "5"), route("b", "6")])
                } else {
                    // The relist after the 410: one more object.
                    ("20", vec![route("a", "5"), route("b", "6"), route("c", "15")])
                };
                response(
                    200,
                    &json!({"kind": "HTTPRouteList", "apiVersion": "gateway.networking.k8s.io/v1",
                        "metadata": {"resourceVersion": version}, "items": items}),
                )
            } else if path == ROUTES {
                let n = calls.watches.fetch_add(1, Ordering::SeqCst);
                if n == 0 {
                    response(
                        200,
                        &json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "Expired", "code": 410, "message": "too old resource version: 10 (12)"}}),
                    )
                } else {
                    // A watch that ends without events, after a while.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    http::Response::builder()
                        .status(200)
                        .body(kube::client::Body::empty())
                        .unwrap_or_else(|_| http::Response::new(kube::client::Body::empty()))
                }
            } else {
                not_found()
            };
            Ok::<_, std::convert::Infallible>(reply)
        }
    });
    let client = Client::new(service, "default");
    let metrics = metrics::KubeMetrics::default();
    let options = Options {
        debounce: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
        ..Options::default()
    };
    let (provider, mut snapshots) = start(client, options, metrics.clone()).await.expect("start");
    // The store keeps the route's identity only (no status yet, no spec,
    // no managedFields); the snapshot has the route without kubectl's
    // copy of the object.
    let a = provider
        .stores
        .get(Kind::HttpRoute, Some("app"), "a")
        .expect("a in the store");
    assert_eq!(a.metadata.managed_fields, None);
    assert_eq!(a.metadata.annotations, None);
    assert_eq!(a.data, serde_json::json!({}));
    let loaded = snapshots.borrow().clone();
    let a = loaded
        .loaded
        .inputs
        .http_routes
        .iter()
        .find(|r| r.object.metadata.name.as_deref() == Some("a"))
        .expect("a in the snapshot");
    let annotations = a.object.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["kept"]);
    assert_eq!(a.object.metadata.managed_fields, None);
    let names = |s: &provider::Snapshot| {
        s.loaded
            .inputs
            .http_routes
            .iter()
            .filter_map(|r| r.object.metadata.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&snapshots.borrow()), ["a", "b"]);
    // Every snapshot published until the relist's shows, keeps a and b.
    let relisted = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            snapshots.changed().await.expect("provider running");
            let now = names(&snapshots.borrow_and_update());
            assert!(
                now.iter().any(|n| n == "a") && now.iter().any(|n| n == "b"),
                "a snapshot without the listed objects: {now:?}"
            );
            if now.iter().any(|n| n == "c") {
                return now;
            }
        }
    })
    .await
    .expect("the relist's snapshot");
    assert_eq!(relisted, ["a", "b", "c"]);
    assert!(calls.lists.load(Ordering::SeqCst) >= 2, "relisted");
    let labels = metrics::KindLabels::of(Kind::HttpRoute);
    assert_eq!(metrics.relists.get_or_create(&labels).get(), 1);
}
