//! End to end, Kubernetes mode, the kinds beyond Gateway API: Contour's
//! HTTPProxy and TLSCertificateDelegation, an extension server's
//! registered kind (config `extensionManager.resources`), and a CRD
//! installed after the controller started. A real etcd + kube-apiserver
//! (testkit), `portcullis controller` with the real Envoy it supervises,
//! echo backends on loopback reached through EndpointSlices, real HTTP(S);
//! objects created through the API, status read back through the API.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::httpproxy::{certificate, delegated_tls_root, https_gateway, tls_get, tls_secret};
use common::kube::{api_for, apply, forward, get, namespaces};
use common::{echo_pod, free_port, http, request, service_at, wait_for, work_dir};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// One sample of the controller's metrics (0 when absent).
fn metric(admin: u16, series: &str) -> f64 {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn start_controller(
    kubeconfig: &Path,
    run_dir: &Path,
    xds: u16,
    admin: u16,
    extra: &[&str],
) -> common::Serve {
    let mut args = vec!["--listener-address", "127.0.0.1", "--no-leader-election"];
    args.extend(extra);
    common::kube::controller(kubeconfig, run_dir, xds, admin, &args, &[])
}

/// Whether `p` is the CRD of one of Contour's kinds (generated from the
/// Rust types into `crds/portcullis/`).
fn is_contour(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| n == "httpproxies.yaml" || n == "tlscertificatedelegations.yaml")
}

/// Contour's CRDs.
fn contour_crds() -> Vec<PathBuf> {
    testkit::kube::Cluster::repo_crds()
        .into_iter()
        .filter(|p| is_contour(p))
        .collect()
}

/// Gateway API and portcullis's CRDs, not Contour's.
fn crds_without_contour() -> Vec<PathBuf> {
    testkit::kube::Cluster::repo_crds()
        .into_iter()
        .filter(|p| !is_contour(p))
        .collect()
}

/// The HTTPProxy's status, once its `Valid` condition is at `generation`.
async fn proxy_status(client: &kube::Client, name: &str, generation: i64) -> Value {
    let start = Instant::now();
    loop {
        let p = get(client, "projectcontour.io/v1", "HTTPProxy", Some("team"), name).await;
        let status = p.as_ref().map(|p| p["status"].clone()).unwrap_or_default();
        if status["conditions"][0]["observedGeneration"] == generation {
            return status;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for HTTPProxy team/{name}'s status at generation {generation}: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// HTTPProxies created through the API, served through the configured
/// `--httpproxy-gateway`: a root including a child, a TLS root whose
/// Secret is delegated from another namespace (HTTPS with its
/// certificate), an orphan; every proxy's status in Contour's shape read
/// back from the API, and an edit of the child writing the child's status
/// only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_serves_httpproxies_and_writes_their_status() {
    let test = "controller_serves_httpproxies_and_writes_their_status";
    let Some((cluster, client)) = common::kube::cluster(test).await else {
        return;
    };
    let backend = echo_pod("team", "team-pod");
    let dir = work_dir(test);
    let (http_port, https_port, xds, admin) = (free_port(), free_port(), free_port(), free_port());
    let (gw_cert, gw_key, _) = certificate("listener.example.net");
    let (cert, key, der) = certificate("secure.example.com");
    let (unused_cert, unused_key, _) = certificate("unused.example.com");
    let manifests = format!(
        r#"{namespaces}{gateway}{gw_secret}{secret}{unused}{tls_root}apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: root, namespace: team}}
spec:
  virtualhost: {{fqdn: app.example.com}}
  includes:
  - {{name: child, conditions: [{{prefix: /child}}]}}
  routes:
  - conditions: [{{prefix: /root}}]
    services: [{{name: s, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: child, namespace: team}}
spec:
  routes:
  - services: [{{name: s, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: lonely, namespace: team}}
spec:
  routes:
  - services: [{{name: s, port: 80}}]
---
{svc}"#,
        namespaces = namespaces(&["infra", "team", "certs"]),
        gateway = https_gateway(http_port, https_port),
        gw_secret = tls_secret("infra", "listener-cert", &gw_cert, &gw_key),
        secret = tls_secret("certs", "secure", &cert, &key),
        // A TLS Secret no spec names: its data must not be held.
        unused = tls_secret("certs", "unused", &unused_cert, &unused_key),
        tls_root = delegated_tls_root(""),
        svc = service_at("team", "s", forward(&backend)),
    );
    apply(&client, &manifests).await;
    let controller = start_controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        &["--httpproxy-gateway", "infra/gw"],
    );
    tokio::task::block_in_place(|| {
        wait_for("the child's route through the root", WAIT, || {
            http(http_port, "app.example.com", "/child/x")
                .is_some_and(|r| r.0 == 200 && r.2.contains("team-pod"))
        });
        let root = http(http_port, "app.example.com", "/root").expect("root");
        assert_eq!(root.0, 200, "{root:?}");
        // The orphan's routes are served by no root.
        let elsewhere = http(http_port, "app.example.com", "/lonely").expect("no route");
        assert_eq!(elsewhere.0, 404, "{elsewhere:?}");
        wait_for("the TLS root over HTTPS", WAIT, || {
            tls_get(https_port, "secure.example.com", "/x").is_some_and(|r| r.0 == 200)
        });
        let (status, body, presented) = tls_get(https_port, "secure.example.com", "/x").expect("https");
        assert_eq!(status, 200);
        assert!(body.contains("team-pod"), "{body}");
        assert_eq!(presented, der, "the delegated Secret's certificate");
    });

    // Status in Contour's shape, read back from the API.
    let root = proxy_status(&client, "root", 1).await;
    assert_eq!(root["currentStatus"], "valid", "{root}");
    assert_eq!(root["description"], "Valid HTTPProxy", "{root}");
    assert_eq!(root["conditions"][0]["type"], "Valid", "{root}");
    assert_eq!(root["conditions"][0]["status"], "True", "{root}");
    assert_eq!(root["loadBalancer"]["ingress"][0]["ip"], "127.0.0.1", "{root}");
    let child = proxy_status(&client, "child", 1).await;
    assert_eq!(child["currentStatus"], "valid", "{child}");
    assert!(child.get("loadBalancer").is_none(), "only roots: {child}");
    let lonely = proxy_status(&client, "lonely", 1).await;
    assert_eq!(lonely["currentStatus"], "orphaned", "{lonely}");
    assert_eq!(lonely["conditions"][0]["status"], "False", "{lonely}");
    assert_eq!(
        lonely["conditions"][0]["errors"][0]["type"], "Orphaned",
        "{lonely}"
    );
    let secure = proxy_status(&client, "secure", 1).await;
    assert_eq!(secure["currentStatus"], "valid", "{secure}");
    // The listener's and the delegated Secret; not the unused one.
    assert_eq!(metric(admin, "portcullis_kube_secrets_held"), 2.0);

    // An edit of the child: its status is written again (generation 2),
    // nothing else's.
    let writes = |admin| metric(admin, "portcullis_status_writes_total{kind=\"HTTPProxy\"}");
    let before = tokio::task::block_in_place(|| common::settled("HTTPProxy status writes", || writes(admin)));
    assert!(before >= 4.0, "every proxy's status written: {before}");
    apply(
        &client,
        "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: child, namespace: team}\n\
         spec:\n  routes:\n  - conditions: [{prefix: /v2}]\n    services: [{name: s, port: 80}]\n",
    )
    .await;
    let child = proxy_status(&client, "child", 2).await;
    assert_eq!(child["currentStatus"], "valid", "{child}");
    tokio::task::block_in_place(|| {
        wait_for("the edited child", WAIT, || {
            http(http_port, "app.example.com", "/child/v2").is_some_and(|r| r.0 == 200)
        });
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        writes(admin) - before,
        1.0,
        "one edit of the child, one status write"
    );
    drop(controller);
}

const EXT_GROUP: &str = "example.portcullis.dev";

/// A CRD for the extension's `RouteHeader` kind (what an extension's
/// installer would apply).
fn route_header_crd(dir: &Path) -> PathBuf {
    let path = dir.join("routeheaders.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata: {{name: routeheaders.{EXT_GROUP}}}\nspec:\n  group: {EXT_GROUP}\n  scope: Namespaced\n  \
             names: {{kind: RouteHeader, plural: routeheaders, singular: routeheader, listKind: RouteHeaderList}}\n  \
             versions:\n  - name: v1\n    served: true\n    storage: true\n    \
             schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
        ),
    )
    .expect("write CRD");
    path
}

/// An HTTPRoute `ExtensionRef` filter naming an object of a kind the
/// config's extension server registered: the object is watched through
/// the API (as unstructured) and loaded, the extension's Route hook runs
/// (its header reaches the client); deleting the object fences the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_watches_extension_kinds_from_the_config() {
    use extension::example::{Behaviour, ExampleExtension, ROUTE_HEADER, serve_tcp};
    let test = "controller_watches_extension_kinds_from_the_config";
    let Some(cluster) = testkit::kube::Cluster::start(test).await else {
        return;
    };
    let dir = work_dir(test);
    let mut files = testkit::kube::Cluster::repo_crds();
    files.push(route_header_crd(&dir));
    cluster.apply_crds(&files).await.expect("apply CRDs");
    let client = cluster.client().await.expect("client");
    let backend = echo_pod("app", "a-pod");
    let (gw_port, xds, admin, ext_port) = (free_port(), free_port(), free_port(), free_port());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", ext_port))
        .await
        .expect("bind the extension server");
    let server = tokio::spawn(serve_tcp(
        ExampleExtension::new(Behaviour::default()),
        listener,
        std::future::pending(),
    ));
    let config = dir.join("portcullis.yaml");
    std::fs::write(
        &config,
        format!(
            "extensionManager:\n  resources: [{{group: {EXT_GROUP}, version: v1, kind: RouteHeader}}]\n  \
             hooks: {{xdsTranslator: {{post: [Route]}}}}\n  \
             service: {{ip: {{address: 127.0.0.1, port: {ext_port}}}}}\n  timeout: 2s\n"
        ),
    )
    .expect("write config");
    let route = |name: &str, path: &str, filter: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
             spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n\
             {filter}    backendRefs: [{{name: a, port: 80}}]\n---\n"
        )
    };
    let filter = format!(
        "    filters:\n    - type: ExtensionRef\n      extensionRef: {{group: {EXT_GROUP}, kind: RouteHeader, name: hdr}}\n"
    );
    let manifests = format!(
        "{}{}apiVersion: {EXT_GROUP}/v1\nkind: RouteHeader\nmetadata: {{name: hdr, namespace: app}}\nspec: {{}}\n---\n{}\n---\n{}{}",
        namespaces(&["infra", "app"]),
        common::gateway(gw_port),
        service_at("app", "a", forward(&backend)),
        route("ext", "/ext", &filter),
        route("plain", "/plain", ""),
    );
    apply(&client, &manifests).await;
    let controller = start_controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        &["--config", config.to_str().expect("utf-8")],
    );
    let header = |head: &str| {
        head.to_ascii_lowercase().lines().find_map(|l| {
            l.strip_prefix(&format!("{ROUTE_HEADER}: "))
                .map(|v| v.trim().to_string())
        })
    };
    tokio::task::block_in_place(|| {
        wait_for("/ext with the extension's header", WAIT, || {
            request(gw_port, "x", "GET", "/ext", &[])
                .is_some_and(|(s, h, _)| s == 200 && header(&h).is_some())
        });
        let (status, head, body) = request(gw_port, "x", "GET", "/plain", &[]).expect("plain");
        assert_eq!(status, 200, "{head}");
        assert!(body.contains("a-pod"), "{body}");
        assert_eq!(
            header(&head),
            None,
            "the extension sees only routes with its ExtensionRef"
        );
    });
    // The extension resource is watched: deleting it leaves the
    // ExtensionRef unresolvable, and its rule answers the replacement 500.
    let api = api_for(
        &client,
        &json!({"apiVersion": format!("{EXT_GROUP}/v1"), "kind": "RouteHeader", "metadata": {"name": "hdr", "namespace": "app"}}),
    )
    .await;
    api.delete("hdr", &Default::default()).await.expect("delete hdr");
    tokio::task::block_in_place(|| {
        wait_for("/ext fenced once its RouteHeader is gone", WAIT, || {
            http(gw_port, "x", "/ext").is_some_and(|r| r.0 == 500)
        });
        assert_eq!(http(gw_port, "x", "/plain").map(|r| r.0), Some(200));
    });
    drop(controller);
    server.abort();
}

/// The controller started without Contour's CRDs; they are installed
/// afterwards with an HTTPProxy: it is served, and its status written,
/// without a restart (the CRD watch of `kube_provider::discovery`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_picks_up_a_crd_installed_after_it_started() {
    let test = "controller_picks_up_a_crd_installed_after_it_started";
    let Some(cluster) = testkit::kube::Cluster::start(test).await else {
        return;
    };
    cluster
        .apply_crds(&crds_without_contour())
        .await
        .expect("apply CRDs");
    let client = cluster.client().await.expect("client");
    let backend = echo_pod("team", "team-pod");
    let dir = work_dir(test);
    let (gw_port, xds, admin) = (free_port(), free_port(), free_port());
    let manifests = format!(
        "{}{}{}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: team}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    \
         backendRefs: [{{name: s, port: 80}}]\n",
        namespaces(&["infra", "team"]),
        common::gateway(gw_port),
        service_at("team", "s", forward(&backend)),
    );
    apply(&client, &manifests).await;
    let controller = start_controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        &["--httpproxy-gateway", "infra/gw"],
    );
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", WAIT, || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
        });
    });
    let installed = Instant::now();
    cluster
        .apply_crds(&contour_crds())
        .await
        .expect("apply Contour's CRDs");
    apply(
        &client,
        "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: late, namespace: team}\n\
         spec:\n  virtualhost: {fqdn: late.example.com}\n  routes:\n  - services: [{name: s, port: 80}]\n",
    )
    .await;
    tokio::task::block_in_place(|| {
        wait_for(
            "the HTTPProxy of a CRD installed late",
            Duration::from_secs(30),
            || {
                http(gw_port, "late.example.com", "/x")
                    .is_some_and(|r| r.0 == 200 && r.2.contains("team-pod"))
            },
        );
    });
    let took = installed.elapsed();
    let status = proxy_status(&client, "late", 1).await;
    assert_eq!(status["currentStatus"], "valid", "{status}");
    assert_eq!(
        metric(admin, "portcullis_kube_late_kinds_total{kind=\"HTTPProxy\"}"),
        1.0
    );
    eprintln!(
        "{test}: CRD applied (Established) -> HTTPProxy served in {} ms",
        took.as_millis()
    );
    drop(controller);
}
