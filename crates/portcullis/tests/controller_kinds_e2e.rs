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

use common::{echo_pod, free_port, http, request, wait_for, work_dir};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// Applies every document of `yaml` with server-side apply (manager `test`).
async fn apply(client: &kube::Client, yaml: &str) {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("test YAML");
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let api = api_for(client, &doc).await;
        let name = doc["metadata"]["name"].as_str().expect("name").to_string();
        api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&doc))
            .await
            .unwrap_or_else(|e| panic!("apply {} {name}: {e}", doc["kind"]));
    }
}

async fn api_for(client: &kube::Client, doc: &Value) -> Api<DynamicObject> {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = doc["kind"].as_str().expect("kind");
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discover {kind}: {e}"));
    match doc["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// The object as JSON, if it exists.
async fn get(client: &kube::Client, api_version: &str, kind: &str, ns: &str, name: &str) -> Option<Value> {
    let doc = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": ns}});
    let api = api_for(client, &doc).await;
    let obj: Option<DynamicObject> = api.get_opt(name).await.expect("get");
    obj.map(|o| serde_json::to_value(o).expect("json"))
}

/// One sample of the controller's metrics (0 when absent).
fn metric(admin: u16, series: &str) -> f64 {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A Service and its EndpointSlice (the apiserver refuses loopback
/// endpoint addresses: the backend is reached through the host's address).
fn service(ns: &str, name: &str, backend: &echo::Handle) -> String {
    let forwarded =
        testkit::kube::forward_from_host(backend.addr()).expect("forward from the host's address");
    let (ip, port) = (forwarded.ip(), forwarded.port());
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}-1, namespace: {ns}, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: ["{ip}"]}}]
---
"#
    )
}

fn namespaces(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n---\n"))
        .collect()
}

fn start_controller(
    kubeconfig: &Path,
    run_dir: &Path,
    xds: u16,
    admin: u16,
    extra: &[&str],
) -> common::Serve {
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--xds-address", &format!("127.0.0.1:{xds}")])
        .args(["--admin-address", &format!("127.0.0.1:{admin}")])
        .args(["--listener-address", "127.0.0.1"])
        .arg("--run-dir")
        .arg(run_dir)
        .arg("--no-leader-election")
        .args(extra)
        .env("ENVOY_BIN", envoy)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start portcullis controller");
    common::Serve {
        child,
        run_dir: run_dir.to_path_buf(),
    }
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

#[derive(Debug)]
struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// (status, body, DER of the certificate presented) of a GET over TLS
/// with SNI `sni`, or None if the connection or handshake failed.
fn tls_get(port: u16, sni: &str, path: &str) -> Option<(u16, String, Vec<u8>)> {
    use std::io::{Read, Write};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).ok()?;
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    {
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").as_bytes())
            .ok()?;
        // Envoy may close without close_notify: keep what was read.
        let _ = tls.read_to_end(&mut buf);
    }
    let cert = conn.peer_certificates()?.first()?.as_ref().to_vec();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string(), cert))
}

/// A self-signed certificate for `name`: (PEM, key PEM, DER).
fn certificate(name: &str) -> (String, String, Vec<u8>) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec![name.to_string()]).expect("params");
    let cert = params.self_signed(&key).expect("self-signed");
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

fn tls_secret(ns: &str, name: &str, cert: &str, key: &str) -> String {
    let indent = |pem: &str| pem.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}

fn gateway_class() -> &'static str {
    "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\n\
     spec: {controllerName: portcullis.dev/gateway-controller}\n---\n"
}

/// The HTTPProxy's status, once its `Valid` condition is at `generation`.
async fn proxy_status(client: &kube::Client, name: &str, generation: i64) -> Value {
    let start = Instant::now();
    loop {
        let p = get(client, "projectcontour.io/v1", "HTTPProxy", "team", name).await;
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
    let Some(cluster) = testkit::kube::Cluster::start(test).await else {
        return;
    };
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .expect("apply CRDs");
    let client = cluster.client().await.expect("client");
    let backend = echo_pod("team", "team-pod");
    let dir = work_dir(test);
    let (http_port, https_port, xds, admin) = (free_port(), free_port(), free_port(), free_port());
    let (gw_cert, gw_key, _) = certificate("listener.example.net");
    let (cert, key, der) = certificate("secure.example.com");
    let (unused_cert, unused_key, _) = certificate("unused.example.com");
    let manifests = format!(
        r#"{namespaces}{class}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: http, protocol: HTTP, port: {http_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
  - name: https
    protocol: HTTPS
    port: {https_port}
    tls: {{certificateRefs: [{{name: listener-cert}}]}}
    allowedRoutes: {{namespaces: {{from: All}}}}
{gw_secret}{secret}{unused}---
apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata: {{name: wildcard, namespace: certs}}
spec:
  delegations:
  - {{secretName: secure, targetNamespaces: [team]}}
---
apiVersion: projectcontour.io/v1
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
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: secure, namespace: team}}
spec:
  virtualhost:
    fqdn: secure.example.com
    tls: {{secretName: certs/secure}}
  routes:
  - services: [{{name: s, port: 80}}]
---
{svc}"#,
        namespaces = namespaces(&["infra", "team", "certs"]),
        class = gateway_class(),
        gw_secret = tls_secret("infra", "listener-cert", &gw_cert, &gw_key),
        secret = tls_secret("certs", "secure", &cert, &key),
        // A TLS Secret no spec names: its data must not be held.
        unused = tls_secret("certs", "unused", &unused_cert, &unused_key),
        svc = service("team", "s", &backend),
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
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = writes(admin);
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
        "{}{}apiVersion: {EXT_GROUP}/v1\nkind: RouteHeader\nmetadata: {{name: hdr, namespace: app}}\nspec: {{}}\n---\n{}{}{}",
        namespaces(&["infra", "app"]),
        common::gateway(gw_port),
        service("app", "a", &backend),
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
        "{}{}{}apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: team}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    \
         backendRefs: [{{name: s, port: 80}}]\n",
        namespaces(&["infra", "team"]),
        common::gateway(gw_port),
        service("team", "s", &backend),
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
