//! End to end, Kubernetes mode's xDS CA against a real etcd +
//! kube-apiserver (testkit): `portcullis controller --xds-ca` creates the
//! CA Secret and the client-certificate Secret of each Gateway of its
//! class; a real Envoy started with that certificate, read back from the
//! API, gets its Gateway's configuration over mTLS and serves a real echo
//! backend; the Secret is issued again before it expires.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::kube::{apply, eventually, forward, namespaces};
use common::{echo_pod, free_port, http, service_at, wait_for, work_dir};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube_provider::xds_ca::{Ca, inspect};
use serde_json::Value;

const SERVER_NAME: &str = "xds.portcullis.test";

fn objects(gw_port: u16, backend: std::net::SocketAddr) -> String {
    format!(
        r#"{namespaces}{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: someone-else}}
spec: {{controllerName: example.com/another-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: theirs, namespace: infra}}
spec:
  gatewayClassName: someone-else
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
{route}{service}
"#,
        namespaces = namespaces(&["infra", "app"]),
        service = service_at("app", "a", backend),
        gateway = common::gateway(gw_port),
        route = common::prefix_route("r", &[("/a", "a")]),
    )
}

fn text(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

/// `portcullis controller --xds-ca --no-envoy` with `extra` flags.
fn controller(
    cluster: &testkit::kube::Cluster,
    dir: &Path,
    xds: u16,
    admin: u16,
    extra: &[&str],
) -> common::Serve {
    let mut args = vec![
        "--listener-address",
        "127.0.0.1",
        "--no-envoy",
        "--lease-duration-seconds",
        "3",
        "--leader-election-namespace",
        "default",
        "--xds-ca",
        "--xds-server-name",
        SERVER_NAME,
        "--xds-cert-check-seconds",
        "1",
    ];
    args.extend(extra);
    common::kube::controller(&cluster.kubeconfig, &dir.join("run"), xds, admin, &args, &[])
}

/// A cluster with the CRDs and [`objects`] applied, and its client; their
/// echo backend, the Gateway's port, a work directory and free xDS and
/// admin ports for the controller.
type World = (
    testkit::kube::Cluster,
    kube::Client,
    echo::Handle,
    u16,
    std::path::PathBuf,
    u16,
    u16,
);

async fn world(test: &str) -> Option<World> {
    let (cluster, client) = common::kube::cluster(test).await?;
    let echo = echo_pod("app", "a-pod-1");
    let gw_port = free_port();
    apply(&client, &objects(gw_port, forward(&echo))).await;
    let dir = work_dir(test);
    Some((cluster, client, echo, gw_port, dir, free_port(), free_port()))
}

/// The client side of mTLS with the certificate, key and CA files in `dir`.
fn client_tls(dir: &Path) -> translate::output::bootstrap::XdsClientTls {
    let path = |f: &str| dir.join(f).display().to_string();
    translate::output::bootstrap::XdsClientTls {
        cert_chain_file: path("tls.crt"),
        private_key_file: path("tls.key"),
        ca_file: path("ca.crt"),
        server_name: SERVER_NAME.into(),
    }
}

/// Envoy with the bootstrap `file`, stopped when dropped.
fn run_envoy(file: &Path) -> Envoy {
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    Envoy(
        Command::new(bin)
            .arg("-c")
            .arg(file)
            .args(["--disable-hot-restart", "--log-level", "warn"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Envoy"),
    )
}

struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Envoy from `ads_bootstrap_tls`, presenting the Secret's certificate.
fn envoy(dir: &Path, node: &str, secret: &Secret, xds: u16) -> Envoy {
    std::fs::create_dir_all(dir).expect("mkdir");
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(dir.join(key), text(secret, key).expect(key)).expect("write");
    }
    let tls = client_tls(dir);
    let bootstrap = translate::output::bootstrap::try_ads_bootstrap_tls(
        node,
        "portcullis",
        "127.0.0.1",
        xds,
        None,
        Some(&tls),
    )
    .expect("bootstrap");
    std::fs::write(dir.join("envoy.json"), bootstrap.to_string()).expect("write bootstrap");
    run_envoy(&dir.join("envoy.json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_ca_issues_gateway_certificates_that_envoy_uses() {
    let test = "the_controllers_ca_issues_gateway_certificates_that_envoy_uses";
    let Some((cluster, client, _echo, gw_port, dir, xds, admin)) = world(test).await else {
        return;
    };
    // Short-lived certificates: one is issued again within seconds.
    let timing = [
        "--xds-cert-validity-seconds",
        "20",
        "--xds-cert-renew-before-seconds",
        "12",
    ];
    let _controller = controller(&cluster, &dir, xds, admin, &timing);

    // The CA Secret, in the controller's namespace.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let ca_secret = eventually("the CA Secret", Duration::from_secs(60), || async {
        secrets.get_opt("portcullis-xds-ca").await.ok().flatten()
    })
    .await;
    assert_eq!(ca_secret.type_.as_deref(), Some("Opaque"));
    let ca = Ca::from_pem(
        &text(&ca_secret, "ca.crt").expect("ca.crt"),
        &text(&ca_secret, "ca.key").expect("ca.key"),
        "CA Secret",
    )
    .expect("a usable CA");

    // infra/gw's client Secret: owned by the Gateway, labelled, carrying
    // the Gateway's identity, signed by the CA.
    let infra: Api<Secret> = Api::namespaced(client.clone(), "infra");
    let name = kube_provider::names::xds_client_secret("gw");
    let secret = eventually("infra/gw's client Secret", Duration::from_secs(60), || async {
        infra.get_opt(&name).await.ok().flatten()
    })
    .await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let gateways: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "infra",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway"),
            "gateways",
        ),
    );
    let gw = gateways.get("gw").await.expect("Gateway");
    let owners = secret.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            Some(&owners[0].uid)
        ),
        ("Gateway", "gw", gw.metadata.uid.as_ref())
    );
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    for (k, v) in kube_provider::names::labels("infra", "gw") {
        assert_eq!(labels.get(k), Some(&v), "label {k}");
    }
    let cert = inspect(&text(&secret, "tls.crt").expect("tls.crt"), "tls.crt").expect("certificate");
    assert_eq!(cert.uris, vec![kube_provider::names::xds_identity("infra", "gw")]);
    assert!(ca.signed(&cert), "the client certificate is the CA's");
    assert_eq!(text(&secret, "ca.crt"), text(&ca_secret, "ca.crt"));
    // A Gateway of another controller's class gets nothing.
    assert!(
        infra
            .get_opt(&kube_provider::names::xds_client_secret("theirs"))
            .await
            .expect("get")
            .is_none()
    );

    // An Envoy with the certificate read back from the API is served
    // infra/gw's configuration over mTLS and routes to the backend.
    let _envoy = envoy(&dir.join("envoy"), "infra/gw", &secret, xds);
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", Duration::from_secs(60), || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200 && r.2.contains("a-pod-1"))
        });
    });

    // Issued again before it expires (20 s validity, renewed 12 s ahead).
    let first = text(&secret, "tls.crt");
    let renewed = eventually(
        "the client Secret to be issued again",
        Duration::from_secs(30),
        || async {
            let s = infra.get_opt(&name).await.ok().flatten()?;
            (text(&s, "tls.crt") != first).then_some(s)
        },
    )
    .await;
    let again = inspect(&text(&renewed, "tls.crt").expect("tls.crt"), "renewed").expect("certificate");
    assert!(again.not_after > cert.not_after);
    assert!(
        std::time::SystemTime::now() < cert.not_after,
        "the old certificate was replaced before it expired"
    );
    assert_eq!(again.uris, cert.uris);
    // Counted once the apply returned: a moment after the Secret is seen.
    tokio::task::block_in_place(|| {
        wait_for("the renewal in the metrics", Duration::from_secs(10), || {
            http(admin, "admin", "/metrics").is_some_and(|(_, _, metrics)| {
                metrics
                    .contains("portcullis_xds_certificates_issued_total{kind=\"client\",reason=\"expiring\"}")
            })
        });
    });
    // The renewed certificate works: a new Envoy started with it (in
    // place of the first) is served too.
    drop(_envoy);
    tokio::task::block_in_place(|| {
        wait_for("the first Envoy to be gone", Duration::from_secs(10), || {
            http(gw_port, "x", "/a").is_none()
        });
    });
    let _envoy = envoy(&dir.join("envoy-renewed"), "infra/gw", &renewed, xds);
    tokio::task::block_in_place(|| {
        wait_for(
            "the renewed certificate's Envoy to serve /a",
            Duration::from_secs(60),
            || http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200),
        );
    });

    // The Gateway moves to another controller's class: its Secret goes.
    apply(
        &client,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\nspec:\n  gatewayClassName: someone-else\n  listeners: [{{name: http, protocol: HTTP, port: {gw_port}}}]\n"
        ),
    )
    .await;
    eventually(
        "the client Secret of a Gateway no longer ours to go",
        Duration::from_secs(20),
        || async {
            infra
                .get_opt(&name)
                .await
                .ok()
                .map(|s| s.is_none())
                .filter(|gone| *gone)
        },
    )
    .await;
}

/// A directory laid out as the kubelet lays out a Secret volume: the data
/// in `..<n>/`, the link `..data` to it, and each key a link through
/// `..data`; an update writes a new `..<n>/` and swaps `..data` by a
/// rename (one atomic move, which Envoy's `watched_directory` sees).
struct SecretVolume {
    dir: std::path::PathBuf,
    generation: u32,
}

impl SecretVolume {
    fn new(dir: &Path) -> SecretVolume {
        std::fs::create_dir_all(dir).expect("mkdir");
        SecretVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        }
    }

    /// Projects `files` (name → content); returns whether anything changed.
    fn project(&mut self, files: &[(&str, String)]) -> bool {
        let current: Vec<(String, String)> = files
            .iter()
            .map(|(k, _)| {
                let v = std::fs::read_to_string(self.dir.join(k)).unwrap_or_default();
                (k.to_string(), v)
            })
            .collect();
        if current
            .iter()
            .zip(files)
            .all(|((_, have), (_, want))| have == want)
        {
            return false;
        }
        self.generation += 1;
        let data = format!("..{}", self.generation);
        std::fs::create_dir_all(self.dir.join(&data)).expect("mkdir data");
        for (k, v) in files {
            std::fs::write(self.dir.join(&data).join(k), v).expect("write");
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&data, &tmp).expect("symlink");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        for (k, _) in files {
            let link = self.dir.join(k);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{k}"), &link).expect("key link");
            }
        }
        if self.generation > 1 {
            let _ = std::fs::remove_dir_all(self.dir.join(format!("..{}", self.generation - 1)));
        }
        true
    }
}

/// An Envoy whose client certificate and CA come through file-based SDS
/// from a [`SecretVolume`] (as the provisioned Deployment mounts it).
fn envoy_sds(dir: &Path, node: &str, xds: u16, admin: u16) -> Envoy {
    let tls = client_tls(dir);
    let watched = dir.display().to_string();
    let bootstrap =
        translate::output::json::message_to_json(&translate::output::bootstrap::ads_bootstrap_tls_sds_proto(
            node,
            "portcullis",
            "127.0.0.1",
            xds,
            Some(&translate::output::bootstrap::AdminAddress::new(
                "127.0.0.1",
                admin,
            )),
            &tls,
            &watched,
        ))
        .expect("bootstrap");
    let file = dir.with_extension("json");
    std::fs::write(&file, bootstrap.to_string()).expect("write bootstrap");
    run_envoy(&file)
}

/// The files the kubelet would project from the client Secret, with the
/// SDS documents rewritten for `dir` (the Secret's name the mount path
/// the Deployment uses, `names::XDS_CERT_DIR`).
fn projected(secret: &Secret, dir: &Path) -> Vec<(&'static str, String)> {
    let tls = client_tls(dir);
    let mut files: Vec<(&'static str, String)> = ["tls.crt", "tls.key", "ca.crt"]
        .into_iter()
        .map(|k| (k, text(secret, k).unwrap_or_default()))
        .collect();
    for (file, doc) in translate::output::bootstrap::xds_client_sds(&tls, &dir.display().to_string()) {
        files.push((file, doc.to_string()));
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_keeps_envoy_served_through_a_reconnect() {
    let test = "a_ca_rotation_keeps_envoy_served_through_a_reconnect";
    let Some((cluster, client, _echo, gw_port, dir, xds, admin)) = world(test).await else {
        return;
    };
    // A CA of 60 s renewed 40 s ahead: a next CA after ~20 s, promoted
    // ~20 s later; certificates of 10 s renewed 5 s ahead.
    let timing = [
        "--xds-ca-validity-seconds",
        "60",
        "--xds-ca-renew-before-seconds",
        "40",
        "--xds-cert-validity-seconds",
        "10",
        "--xds-cert-renew-before-seconds",
        "5",
    ];
    let first_controller = controller(&cluster, &dir, xds, admin, &timing);

    let infra: Api<Secret> = Api::namespaced(client.clone(), "infra");
    let defaults: Api<Secret> = Api::namespaced(client.clone(), "default");
    let name = kube_provider::names::xds_client_secret("gw");
    let secret = eventually("infra/gw's client Secret", Duration::from_secs(60), || async {
        infra.get_opt(&name).await.ok().flatten()
    })
    .await;
    // The Secret's SDS documents name the files where the Deployment
    // mounts them.
    let mounted = Path::new(kube_provider::names::XDS_CERT_DIR);
    for (file, doc) in projected(&secret, mounted).into_iter().skip(3) {
        let stored: Value = serde_json::from_str(&text(&secret, file).unwrap_or_default()).expect(file);
        assert_eq!(
            stored,
            serde_json::from_str::<Value>(&doc).expect("doc"),
            "{file}"
        );
    }
    let ca_before = defaults.get("portcullis-xds-ca").await.expect("CA Secret");
    let first_ca = text(&ca_before, "ca.crt").expect("ca.crt");

    // The kubelet's part: project the Secret into the volume, again
    // whenever it changes.
    let volume_dir = dir.join("volume");
    let mut volume = SecretVolume::new(&volume_dir);
    volume.project(&projected(&secret, &volume_dir));
    let kubelet = {
        let (infra, name, volume_dir) = (infra.clone(), name.clone(), volume_dir.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if let Ok(Some(s)) = infra.get_opt(&name).await {
                    volume.project(&projected(&s, &volume_dir));
                }
            }
        })
    };
    let envoy_admin = free_port();
    let _envoy = envoy_sds(&volume_dir, "infra/gw", xds, envoy_admin);
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", Duration::from_secs(60), || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
        });
    });
    let load = tokio::task::spawn_blocking(move || {
        let (mut ok, mut failed) = (0u64, 0u64);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(75) {
            match http(gw_port, "x", "/a") {
                Some((200, _, _)) => ok += 1,
                other => {
                    eprintln!("failed request: {:?}", other.map(|r| r.0));
                    failed += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (ok, failed)
    });

    // The CA is rotated: a new one signs, the old one stays trusted.
    let rotated = eventually("the CA's promotion", Duration::from_secs(70), || async {
        let s = defaults.get_opt("portcullis-xds-ca").await.ok().flatten()?;
        (text(&s, "ca.crt").as_deref() != Some(first_ca.as_str())).then_some(s)
    })
    .await;
    assert_eq!(text(&rotated, "previous.crt").as_deref(), Some(first_ca.as_str()));
    let new_ca = Ca::from_pem(
        &text(&rotated, "ca.crt").expect("ca.crt"),
        &text(&rotated, "ca.key").expect("ca.key"),
        "rotated CA",
    )
    .expect("CA");
    // The client Secret follows: signed by the new CA, trusting both.
    let reissued = eventually(
        "the client Secret from the new CA",
        Duration::from_secs(20),
        || async {
            let s = infra.get_opt(&name).await.ok().flatten()?;
            let c = inspect(&text(&s, "tls.crt")?, "tls.crt").ok()?;
            new_ca.signed(&c).then_some(s)
        },
    )
    .await;
    let bundle = text(&reissued, "ca.crt").expect("ca.crt");
    assert!(bundle.contains(first_ca.trim()) && bundle.contains(new_ca.cert_pem.trim()));

    // Give the volume a moment to follow, then restart the control plane:
    // the Envoy reconnects (new server certificate from the new CA, its
    // own renewed one) and gets an update made meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(first_controller);
    apply(
        &client,
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: later, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /later}}]
    backendRefs: [{name: a, port: 80}]
"#,
    )
    .await;
    let _second = controller(&cluster, &dir, xds, admin, &timing);
    tokio::task::block_in_place(|| {
        wait_for("the update after the reconnect", Duration::from_secs(60), || {
            http(gw_port, "x", "/later").is_some_and(|r| r.0 == 200)
        });
    });
    let (ok, failed) = load.await.expect("load");
    kubelet.abort();
    assert!(ok > 100, "only {ok} requests");
    assert_eq!(failed, 0, "{failed} of {} requests failed", ok + failed);
}

/// The provisioned Envoy as its pod would run it: the bootstrap ConfigMap
/// the provisioner wrote and the client Secret the issuer wrote, both read
/// back from the API. Without a kubelet, a directory stands for the
/// Secret's mount path and loopback for the xDS Service's DNS name; the
/// rest is the provisioned bootstrap as written (client certificate and
/// server CA through file-based SDS, SNI and the server's DNS name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioned_bootstrap_and_the_issued_secret_serve_over_mtls() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_provider::names;
    let test = "the_provisioned_bootstrap_and_the_issued_secret_serve_over_mtls";
    let Some((cluster, client, _echo, gw_port, dir, xds, admin)) = world(test).await else {
        return;
    };
    let _controller = controller(&cluster, &dir, xds, admin, &["--service-type", "ClusterIP"]);

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "infra");
    let config_map = eventually("the provisioned bootstrap", Duration::from_secs(60), || async {
        config_maps
            .get_opt(&names::provisioned("gw"))
            .await
            .ok()
            .flatten()
    })
    .await;
    let bootstrap = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(names::BOOTSTRAP_KEY))
        .cloned()
        .expect("the bootstrap key");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "infra");
    let secret = eventually("infra/gw's client Secret", Duration::from_secs(60), || async {
        secrets
            .get_opt(&names::xds_client_secret("gw"))
            .await
            .ok()
            .flatten()
    })
    .await;

    let keys: Vec<String> = secret
        .data
        .as_ref()
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    assert!(keys.iter().any(|k| k == "xds-sds-cert.json"), "{keys:?}");
    let b: Value = serde_json::from_str(&bootstrap).expect("bootstrap JSON");
    assert_eq!(b["node"]["id"], "infra/gw");
    let xds_cluster = &b["static_resources"]["clusters"][0];
    assert_eq!(
        xds_cluster["transport_socket"]["typed_config"]["sni"],
        SERVER_NAME
    );
    assert_eq!(
        xds_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
            ["address"],
        "portcullis-xds.default.svc"
    );
    let files: Vec<(String, String)> = keys
        .iter()
        .map(|k| (k.clone(), text(&secret, k).expect("utf-8 key")))
        .collect();
    let _envoy = Envoy(common::provisioned_envoy(
        &dir.join("xds-cert"),
        &bootstrap,
        &files,
        xds,
    ));
    tokio::task::block_in_place(|| {
        wait_for(
            "the provisioned Envoy to serve /a",
            Duration::from_secs(60),
            || http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200 && r.2.contains("a-pod-1")),
        );
    });
}
