//! Helpers shared by the Kubernetes-mode tests (a real etcd and
//! kube-apiserver from `testkit::kube`): objects applied, read and deleted
//! through the API as unstructured JSON, polling for status, the
//! manifests every world needs (Namespaces, a Service with its
//! EndpointSlice), and `portcullis controller` started against the
//! cluster.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ::kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::Serve;

/// The `apiVersion` of the Gateway API kinds the tests read.
pub const GATEWAY_API: &str = "gateway.networking.k8s.io/v1";

/// A cluster with the repository's CRDs applied, and a client for it;
/// None when the test is skipped (no apiserver binaries).
pub async fn cluster(test: &str) -> Option<(testkit::kube::Cluster, ::kube::Client)> {
    let cluster = testkit::kube::Cluster::start(test).await?;
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .expect("apply CRDs");
    let client = cluster.client().await.expect("client");
    Some((cluster, client))
}

/// The API of `doc`'s kind (discovered), namespaced when the kind is and
/// `doc` names a namespace.
pub async fn api_for(client: &::kube::Client, doc: &Value) -> Api<DynamicObject> {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = doc["kind"].as_str().expect("kind");
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = ::kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discover {kind}: {e}"));
    match doc["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == ::kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// Applies every document of `yaml` with server-side apply (manager `test`).
pub async fn apply(client: &::kube::Client, yaml: &str) {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("test YAML");
    apply_docs(client, &docs).await;
}

/// [`apply`] for documents already parsed; null documents are skipped.
pub async fn apply_docs(client: &::kube::Client, docs: &[Value]) {
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let api = api_for(client, doc).await;
        let name = doc["metadata"]["name"].as_str().expect("name");
        api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(doc))
            .await
            .unwrap_or_else(|e| panic!("apply {} {name}: {e}", doc["kind"]));
    }
}

/// A plain create of `doc`, as a client that does not ask for strict
/// field validation sends it (server-side apply validates fields).
pub async fn create(client: &::kube::Client, doc: &Value) {
    let api = api_for(client, doc).await;
    let name = doc["metadata"]["name"].as_str().expect("name");
    let object: DynamicObject = serde_json::from_value(doc.clone()).expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {} {name}: {e}", doc["kind"]));
}

/// The skeleton of an object: what [`api_for`] needs to find its API.
pub fn doc(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
    let mut doc = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(ns) = ns {
        doc["metadata"]["namespace"] = ns.into();
    }
    doc
}

/// The object as JSON, None if it does not exist; an API error is the
/// caller's (e.g. while the apiserver restarts).
pub async fn try_get(
    client: &::kube::Client,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> Result<Option<Value>, ::kube::Error> {
    let api = api_for(client, &doc(api_version, kind, ns, name)).await;
    let obj: Option<DynamicObject> = api.get_opt(name).await?;
    Ok(obj.map(|o| serde_json::to_value(o).expect("json")))
}

/// The object as JSON, None if it does not exist; panics on an API error.
pub async fn get(
    client: &::kube::Client,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    try_get(client, api_version, kind, ns, name).await.expect("get")
}

/// Deletes the object (background propagation); panics on an API error.
pub async fn delete(client: &::kube::Client, api_version: &str, kind: &str, ns: Option<&str>, name: &str) {
    let api = api_for(client, &doc(api_version, kind, ns, name)).await;
    api.delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("delete {kind} {name}: {e}"));
}

/// The condition of type `type_` in a `conditions` array.
pub fn condition<'a>(conditions: &'a Value, type_: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == type_)
}

/// Whether a condition of type `type_` is `True`.
pub fn condition_true(conditions: &Value, type_: &str) -> bool {
    conditions
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

/// Polls `f` (an async check) until it returns `Some`; `Err` naming
/// `what` after `timeout`, for a caller that has more to read before it
/// fails.
pub async fn try_eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if start.elapsed() >= timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `f` (an async check) until it returns `Some`, or panics.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    try_eventually(what, timeout, f)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Where the cluster reaches a loopback echo backend: the apiserver
/// refuses loopback endpoint addresses, so the backend is forwarded from
/// the host's address.
pub fn forward(backend: &echo::Handle) -> SocketAddr {
    testkit::kube::forward_from_host(backend.addr()).expect("forward from the host's address")
}

/// A Namespace document per name, each followed by `---`.
pub fn namespaces(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n---\n"))
        .collect()
}

/// The world of the controller tests, followed by `---`: Namespaces
/// `infra` and `app`, [`super::gateway`] on `gw_port`, HTTPRoute `app/r`
/// (`/a` to Service `a`, `/b` to `b`), HTTPRoute `app/bad` (a regular
/// expression RE2 refuses, fenced, beside `/api` to `a`), and Services `a`
/// and `b` on `a` and `b` (addresses from [`forward`]).
pub fn routes_world(gw_port: u16, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        r#"{namespaces}{gateway}{r}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: bad, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: RegularExpression, value: "/api/v(1)\\1"}}}}]
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
{svc_a}
---
{svc_b}
---
"#,
        namespaces = namespaces(&["infra", "app"]),
        gateway = super::gateway(gw_port),
        r = super::prefix_route("r", &[("/a", "a"), ("/b", "b")]),
        svc_a = super::service_at("app", "a", a),
        svc_b = super::service_at("app", "b", b),
    )
}

/// `portcullis controller` against `kubeconfig` with xDS and the admin
/// API on loopback ports `xds` and `admin`, its run directory `run_dir`,
/// then `args` and `env`; Envoy (when it starts one) is the tests' own.
pub fn controller(
    kubeconfig: &Path,
    run_dir: &Path,
    xds: u16,
    admin: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> Serve {
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--xds-address", &format!("127.0.0.1:{xds}")])
        .args(["--admin-address", &format!("127.0.0.1:{admin}")])
        .arg("--run-dir")
        .arg(run_dir)
        .args(args)
        .envs(env.iter().copied())
        .env("ENVOY_BIN", envoy)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start portcullis controller");
    Serve {
        child,
        run_dir: run_dir.to_path_buf(),
    }
}
