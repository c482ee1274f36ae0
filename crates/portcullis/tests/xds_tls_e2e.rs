//! End to end, mutually authenticated xDS with `portcullis serve
//! --xds-tls-*` (no Kubernetes): real Envoys started from
//! `ads_bootstrap_tls` with client certificates issued by the xDS CA's own
//! code (`kube_provider::xds_ca`), a real echo backend, real HTTP; the
//! Envoys' view is read from their admin `config_dump`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use common::{
    echo_pod, free_port, gateway_with, http, http_listener, https_listener, start_with, wait_for, work_dir,
};
use kube_provider::names::xds_identity;
use kube_provider::xds_ca::{Ca, Issued};
use serde_json::Value;

const SERVER_NAME: &str = "xds.portcullis.test";
const HOUR: Duration = Duration::from_secs(3600);

fn ca() -> Ca {
    Ca::generate(SystemTime::now(), 24 * HOUR).expect("CA")
}

fn client_cert(ca: &Ca, ns: &str, gw: &str) -> Issued {
    ca.issue_client(&xds_identity(ns, gw), SystemTime::now(), HOUR)
        .expect("client certificate")
}

/// Writes `content` to `path` by a rename (as a Secret volume or a
/// certificate manager replaces files), never half-written.
fn replace(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// The server's files: certificate and key for [`SERVER_NAME`], client CA.
fn server_files(dir: &Path, ca: &Ca) {
    let s = ca
        .issue_server(&[SERVER_NAME.to_string()], SystemTime::now(), HOUR)
        .expect("server certificate");
    replace(&dir.join("server.crt"), &s.cert_pem);
    replace(&dir.join("server.key"), &s.key_pem);
    replace(&dir.join("client-ca.crt"), &ca.cert_pem);
}

fn indent(pem: &str) -> String {
    pem.lines().map(|l| format!("    {l}\n")).collect()
}

/// Gateway `infra/gw`: HTTP on `http_port`, HTTPS on `https_port` (Secret
/// `infra/gw-tls`, delivered over SDS); Gateway `infra/other`: HTTP on
/// `other_port`. Routes to the echo backend `a`.
fn manifests(http_port: u16, https_port: u16, other_port: u16, backend: u16, extra_path: &str) -> String {
    let ca = ca();
    let listener_cert = ca
        .issue_server(&["gw.example".to_string()], SystemTime::now(), HOUR)
        .expect("listener certificate");
    format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: other, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: http, protocol: HTTP, port: {other_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: gw-tls, namespace: infra}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{crt}  tls.key: |
{key}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}, {{name: other, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: {extra_path}}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
{svc}
"#,
        gateway = gateway_with(&format!(
            "{}{}",
            http_listener("http", http_port),
            https_listener(https_port, "gw-tls")
        )),
        crt = indent(&listener_cert.cert_pem),
        key = indent(&listener_cert.key_pem),
        svc = common::service("a", backend),
    )
}

/// A real Envoy fed over mTLS xDS.
struct Envoy {
    child: Child,
    admin: u16,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Envoy with node id `node`, presenting `cert` and trusting
/// `trusted` (PEM) for the server, from a bootstrap of `ads_bootstrap_tls`.
fn envoy(dir: &Path, name: &str, node: &str, cert: &Issued, trusted: &str, xds: u16) -> Envoy {
    envoy_with(dir, name, node, cert, trusted, xds, Mode::Files)
}

/// How an Envoy of these tests gets its client certificate and speaks ADS.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `ads_bootstrap_tls`: plain file references, state-of-the-world.
    Files,
    /// File-based SDS (`ads_bootstrap_tls_sds_proto`), reloaded when its
    /// directory changes.
    Sds,
    /// Plain files, delta ADS.
    Delta,
}

/// [`envoy`]; `sds`: the client certificate and CA through file-based
/// SDS (`ads_bootstrap_tls_sds_proto`), reloaded when its directory changes.
fn envoy_with(
    dir: &Path,
    name: &str,
    node: &str,
    cert: &Issued,
    trusted: &str,
    xds: u16,
    mode: Mode,
) -> Envoy {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("mkdir");
    replace(&d.join("tls.crt"), &cert.cert_pem);
    replace(&d.join("tls.key"), &cert.key_pem);
    replace(&d.join("ca.crt"), trusted);
    let admin = free_port();
    let path = |f: &str| d.join(f).display().to_string();
    let tls = translate::output::bootstrap::XdsClientTls {
        cert_chain_file: path("tls.crt"),
        private_key_file: path("tls.key"),
        ca_file: path("ca.crt"),
        server_name: SERVER_NAME.into(),
    };
    let admin_address = translate::output::bootstrap::AdminAddress::new("127.0.0.1", admin);
    let mut bootstrap = if mode == Mode::Sds {
        let watched = d.display().to_string();
        for (file, doc) in translate::output::bootstrap::xds_client_sds(&tls, &watched) {
            std::fs::write(d.join(file), doc.to_string()).expect("write SDS");
        }
        translate::output::json::message_to_json(&translate::output::bootstrap::ads_bootstrap_tls_sds_proto(
            node,
            "portcullis",
            "127.0.0.1",
            xds,
            Some(&admin_address),
            &tls,
            &watched,
        ))
        .expect("bootstrap")
    } else {
        translate::output::bootstrap::try_ads_bootstrap_tls(
            node,
            "portcullis",
            "127.0.0.1",
            xds,
            Some(&admin_address),
            Some(&tls),
        )
        .expect("bootstrap")
    };
    if mode == Mode::Delta {
        bootstrap["dynamic_resources"]["ads_config"]["api_type"] = "DELTA_GRPC".into();
    }
    std::fs::write(d.join("envoy.json"), bootstrap.to_string()).expect("write bootstrap");
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(bin)
        .arg("-c")
        .arg(d.join("envoy.json"))
        .args([
            "--disable-hot-restart",
            "--log-level",
            "warn",
            "--drain-time-s",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Envoy");
    let e = Envoy { child, admin };
    wait_for("Envoy's admin interface", Duration::from_secs(30), || {
        http(e.admin, "admin", "/ready").is_some()
    });
    e
}

/// Envoy's `/config_dump` (with EDS), parsed (the admin answers chunked).
fn config_dump(admin: u16) -> Value {
    let mut tcp = TcpStream::connect(("127.0.0.1", admin)).expect("connect to Envoy's admin");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    tcp.write_all(b"GET /config_dump?include_eds HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut buf = Vec::new();
    tcp.read_to_end(&mut buf).expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, mut rest) = text.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let body = if head.to_lowercase().contains("transfer-encoding: chunked") {
        let mut body = String::new();
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            if n == 0 {
                break;
            }
            body.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        body
    } else {
        rest.to_string()
    };
    serde_json::from_str(&body).expect("config_dump JSON")
}

/// The `configs` entry of `type` (a suffix of its `@type`).
fn dump_section<'a>(dump: &'a Value, type_suffix: &str) -> Option<&'a Value> {
    dump["configs"]
        .as_array()?
        .iter()
        .find(|c| c["@type"].as_str().is_some_and(|t| t.ends_with(type_suffix)))
}

fn dynamic_listeners(dump: &Value) -> Vec<String> {
    dump_section(dump, "ListenersConfigDump")
        .and_then(|s| s["dynamic_listeners"].as_array())
        .map(|l| {
            l.iter()
                .filter_map(|x| x["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn dynamic_secrets(dump: &Value) -> Vec<String> {
    let Some(s) = dump_section(dump, "SecretsConfigDump") else {
        return Vec::new();
    };
    ["dynamic_active_secrets", "dynamic_warming_secrets"]
        .iter()
        .filter_map(|k| s[*k].as_array())
        .flatten()
        .filter_map(|x| x["name"].as_str().map(str::to_string))
        .collect()
}

fn dynamic_clusters(dump: &Value) -> Vec<String> {
    dump_section(dump, "ClustersConfigDump")
        .and_then(|s| s["dynamic_active_clusters"].as_array())
        .map(|l| {
            l.iter()
                .filter_map(|x| x["cluster"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A metric's value from the admin API (0 when absent).
fn metric(admin: u16, line_prefix: &str) -> u64 {
    let (_, _, body) = http(admin, "admin", "/metrics").expect("metrics");
    body.lines()
        .filter(|l| l.starts_with(line_prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A TLS client to the xDS port: `Ok(server certificate DER)` when the
/// server accepts the connection (it answers the HTTP/2 preface), `Err`
/// with the failure otherwise.
fn probe(xds: u16, trusted: &str, client: Option<&Issued>) -> Result<Vec<u8>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(trusted.as_bytes()) {
        roots.add(c.expect("trusted PEM")).expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client chain"),
                PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).expect("client key"),
            )
            .expect("client auth"),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = ServerName::try_from(SERVER_NAME).expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(("127.0.0.1", xds)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // The HTTP/2 preface and an empty SETTINGS frame; the server answers
    // with its SETTINGS once it accepted the client.
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 9];
    tls.read_exact(&mut buf).map_err(|e| e.to_string())?;
    let cert = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or("no server certificate")?;
    Ok(cert)
}

fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("certificate PEM")
        .to_vec()
}

struct Setup {
    dir: PathBuf,
    ca: Ca,
    xds: u16,
    admin: u16,
    http_port: u16,
    https_port: u16,
    other_port: u16,
    _echo: echo::Handle,
    backend: u16,
}

fn setup(name: &str) -> (Setup, common::Serve) {
    let dir = work_dir(name);
    let ca = ca();
    server_files(&dir, &ca);
    let echo = echo_pod("app", "a");
    let backend = echo.addr().port();
    let (http_port, https_port, other_port) = (free_port(), free_port(), free_port());
    let s = Setup {
        dir,
        ca,
        xds: free_port(),
        admin: free_port(),
        http_port,
        https_port,
        other_port,
        _echo: echo,
        backend,
    };
    s.write("/first");
    let serve = s.start();
    (s, serve)
}

impl Setup {
    /// The manifests, with `extra_path` as the extra route's path.
    fn write(&self, extra_path: &str) {
        std::fs::write(
            self.dir.join("manifests/all.yaml"),
            manifests(
                self.http_port,
                self.https_port,
                self.other_port,
                self.backend,
                extra_path,
            ),
        )
        .expect("write manifests");
    }

    /// `serve` with the server files [`server_files`] wrote (as they are now).
    fn start(&self) -> common::Serve {
        start(
            &self.dir,
            self.xds,
            self.admin,
            &self.dir.join("server.crt"),
            &self.dir.join("server.key"),
            &self.dir.join("client-ca.crt"),
        )
    }

    /// The Envoy of infra/gw with a fresh certificate of infra/gw from the
    /// CA, trusting the CA.
    fn gw_envoy(&self, mode: Mode) -> Envoy {
        envoy_with(
            &self.dir,
            "gw",
            "infra/gw",
            &client_cert(&self.ca, "infra", "gw"),
            &self.ca.cert_pem,
            self.xds,
            mode,
        )
    }

    /// Whether infra/gw's HTTP listener answers `path` with 200.
    fn serves(&self, path: &str) -> bool {
        http(self.http_port, "x", path).is_some_and(|r| r.0 == 200)
    }
}

fn start(dir: &Path, xds: u16, admin: u16, cert: &Path, key: &Path, client_ca: &Path) -> common::Serve {
    let s = |p: &Path| p.display().to_string();
    let serve = start_with(
        dir,
        xds,
        admin,
        &[
            "--no-envoy",
            "--xds-tls-cert",
            &s(cert),
            "--xds-tls-key",
            &s(key),
            "--xds-tls-client-ca",
            &s(client_ca),
        ],
        &[],
    );
    wait_for("serve to be ready", Duration::from_secs(60), || {
        http(admin, "admin", "/readyz").is_some_and(|r| r.0 == 200)
    });
    serve
}

#[test]
fn an_envoy_gets_only_the_gateway_its_certificate_names() {
    let (s, _serve) = setup("xds-tls-binding");

    // The Envoy of infra/gw, with infra/gw's certificate: configured,
    // serving, and holding its listener certificate (over SDS).
    let gw = s.gw_envoy(Mode::Files);
    wait_for("infra/gw's Envoy to serve /a", Duration::from_secs(60), || {
        s.serves("/a")
    });
    let dump = config_dump(gw.admin);
    assert_eq!(
        dynamic_listeners(&dump).len(),
        2,
        "{:?}",
        dynamic_listeners(&dump)
    );
    assert!(
        !dynamic_secrets(&dump).is_empty(),
        "the HTTPS listener's secret over SDS"
    );
    let gw_secrets = dynamic_secrets(&dump);
    let gw_listeners = dynamic_listeners(&dump);

    // infra/other's certificate asking for infra/other: its own Gateway
    // only — none of infra/gw's listeners or secrets.
    let other_cert = client_cert(&s.ca, "infra", "other");
    let other = envoy(&s.dir, "other", "infra/other", &other_cert, &s.ca.cert_pem, s.xds);
    wait_for("infra/other's Envoy to serve /a", Duration::from_secs(60), || {
        http(s.other_port, "x", "/a").is_some_and(|r| r.0 == 200)
    });
    let dump = config_dump(other.admin);
    assert_eq!(dynamic_listeners(&dump).len(), 1);
    assert!(
        dynamic_listeners(&dump).iter().all(|l| !gw_listeners.contains(l)),
        "{:?} vs {gw_listeners:?}",
        dynamic_listeners(&dump)
    );
    assert!(dynamic_secrets(&dump).is_empty(), "{:?}", dynamic_secrets(&dump));
    let text = dump.to_string();
    for port in [s.http_port, s.https_port] {
        assert!(
            !text.contains(&format!("\"port_value\":{port}")),
            "infra/gw's port {port} reached infra/other's Envoy"
        );
    }

    // infra/other's certificate asking for infra/gw: refused, nothing.
    let before = metric(s.admin, "portcullis_xds_refused_streams_total");
    let thief = envoy(&s.dir, "thief", "infra/gw", &other_cert, &s.ca.cert_pem, s.xds);
    wait_for("the refusal to be counted", Duration::from_secs(30), || {
        metric(
            s.admin,
            "portcullis_xds_refused_streams_total{identity=\"spiffe://portcullis/gateway/infra/other\"}",
        ) > before
    });
    // Envoy retries with backoff; give it time to get anything it could.
    std::thread::sleep(Duration::from_secs(3));
    let dump = config_dump(thief.admin);
    assert!(
        dynamic_listeners(&dump).is_empty(),
        "{:?}",
        dynamic_listeners(&dump)
    );
    assert!(dynamic_secrets(&dump).is_empty(), "{:?}", dynamic_secrets(&dump));
    assert!(
        dynamic_clusters(&dump).is_empty(),
        "{:?}",
        dynamic_clusters(&dump)
    );
    assert!(gw_secrets.iter().all(|n| !dump.to_string().contains(n.as_str())));

    // infra/gw's Envoy was never disturbed.
    assert_eq!(http(s.http_port, "x", "/a").map(|r| r.0), Some(200));
}

#[test]
fn a_client_without_a_trusted_certificate_is_refused_in_the_handshake() {
    let (s, _serve) = setup("xds-tls-refused");
    let failures = || metric(s.admin, "portcullis_xds_tls_handshake_failures_total");
    let before = failures();
    let e = probe(s.xds, &s.ca.cert_pem, None).expect_err("no client certificate");
    assert!(
        e.to_lowercase().contains("certificaterequired") || e.contains("alert"),
        "{e}"
    );
    let foreign = ca();
    let e = probe(s.xds, &s.ca.cert_pem, Some(&client_cert(&foreign, "infra", "gw")))
        .expect_err("a certificate of another CA");
    assert!(e.contains("alert"), "{e}");
    wait_for("both failures to be counted", Duration::from_secs(10), || {
        failures() >= before + 2
    });
    // A plaintext client gets no xDS either (the connection is TLS).
    let mut tcp = TcpStream::connect(("127.0.0.1", s.xds)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0");
    let mut buf = [0u8; 9];
    let answer = tcp.read(&mut buf).unwrap_or(0);
    assert!(
        answer == 0 || buf[3] != 0x04,
        "a plaintext HTTP/2 client got SETTINGS"
    );
    // The control case: the right certificate is accepted.
    probe(s.xds, &s.ca.cert_pem, Some(&client_cert(&s.ca, "infra", "gw"))).expect("a client of our CA");
}

/// Requests `/a` on `port` until stopped; counts answers other than 200.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16) -> Load {
        let (stop, ok, failed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let (st, o, f) = (stop.clone(), ok.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match http(port, "x", "/a") {
                    Some((200, _, _)) => o.fetch_add(1, Ordering::Relaxed),
                    other => {
                        eprintln!("failed request: {:?}", other.map(|r| r.0));
                        f.fetch_add(1, Ordering::Relaxed)
                    }
                };
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Load {
            stop,
            ok,
            failed,
            thread: Some(thread),
        }
    }

    /// (ok, failed), once at least `at_least` requests were answered (or
    /// after 30 s): a rotation that completes quickly on an idle machine,
    /// or requests slowed by a loaded one, must not leave too few requests
    /// to show that traffic kept flowing.
    fn finish(mut self, at_least: u64) -> (u64, u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.ok.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed) < at_least
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

#[test]
fn server_certificate_rotation_keeps_envoy_serving() {
    let (s, serve) = setup("xds-tls-server-rotation");
    let gw = s.gw_envoy(Mode::Files);
    wait_for("Envoy to serve /a", Duration::from_secs(60), || s.serves("/a"));
    let load = Load::start(s.http_port);
    let client = client_cert(&s.ca, "infra", "gw");
    let old = probe(s.xds, &s.ca.cert_pem, Some(&client)).expect("probe");

    // New server certificate and key on disk: picked up for new
    // connections without a restart.
    let rotated =
        s.ca.issue_server(&[SERVER_NAME.to_string()], SystemTime::now(), HOUR)
            .expect("new server certificate");
    replace(&s.dir.join("server.crt"), &rotated.cert_pem);
    replace(&s.dir.join("server.key"), &rotated.key_pem);
    wait_for(
        "the new server certificate to be presented",
        Duration::from_secs(20),
        || probe(s.xds, &s.ca.cert_pem, Some(&client)).is_ok_and(|c| c == der(&rotated.cert_pem)),
    );
    assert_ne!(old, der(&rotated.cert_pem));

    // The established xDS connection still carries updates.
    s.write("/second");
    wait_for(
        "an update over the established connection",
        Duration::from_secs(30),
        || s.serves("/second"),
    );

    // The control plane restarts: Envoy reconnects, now verifying the new
    // certificate (the only one served), and gets what changed meanwhile.
    drop(serve);
    s.write("/third");
    let _serve = s.start();
    wait_for("the update after the reconnect", Duration::from_secs(60), || {
        s.serves("/third")
    });
    let (ok, failed) = load.finish(51);
    assert!(ok > 50, "only {ok} requests");
    assert_eq!(failed, 0, "{failed} of {} requests failed", ok + failed);
    drop(gw);
}

#[test]
fn client_certificate_rotation_is_picked_up_by_a_running_envoy() {
    let (s, serve) = setup("xds-tls-client-rotation");
    let gw = s.gw_envoy(Mode::Sds);
    wait_for("Envoy to serve /a", Duration::from_secs(60), || s.serves("/a"));
    let load = Load::start(s.http_port);

    // A new client certificate from a new CA, moved into the Envoy's
    // directory (as a Secret volume update does); the server trusts both
    // CAs meanwhile.
    let next_ca = ca();
    let rotated = client_cert(&next_ca, "infra", "gw");
    let both = format!("{}{}", s.ca.cert_pem, next_ca.cert_pem);
    replace(&s.dir.join("client-ca.crt"), &both);
    replace(&s.dir.join("gw/tls.crt"), &rotated.cert_pem);
    replace(&s.dir.join("gw/tls.key"), &rotated.key_pem);
    wait_for(
        "Envoy to load the new client certificate",
        Duration::from_secs(20),
        || {
            let (_, _, certs) = http(gw.admin, "admin", "/certs").unwrap_or_default();
            certs.to_lowercase().contains(&serial(&rotated.cert_pem))
        },
    );

    // The control plane restarts trusting only the new CA: only the
    // rotated certificate is accepted, and the update made meanwhile
    // reaches the running Envoy.
    drop(serve);
    replace(&s.dir.join("client-ca.crt"), &next_ca.cert_pem);
    s.write("/after");
    let _serve = s.start();
    wait_for(
        "the update over the rotated certificate",
        Duration::from_secs(60),
        || s.serves("/after"),
    );
    assert_eq!(metric(s.admin, "portcullis_xds_tls_handshake_failures_total"), 0);
    let (ok, failed) = load.finish(21);
    assert!(ok > 20, "only {ok} requests");
    assert_eq!(failed, 0, "{failed} of {} requests failed", ok + failed);
}

/// The serial number of a PEM certificate as Envoy's `/certs` shows it
/// (lower-case hex, no leading zero bytes).
fn serial(pem: &str) -> String {
    // DER: SEQUENCE { SEQUENCE (tbs) { [0] version, INTEGER serial, ... } }
    let d = der(pem);
    let mut i = 0;
    let header = |d: &[u8], i: &mut usize| {
        let tag = d[*i];
        *i += 1;
        let mut len = usize::from(d[*i]);
        *i += 1;
        if len & 0x80 != 0 {
            let n = len & 0x7f;
            len = d[*i..*i + n].iter().fold(0, |a, b| a << 8 | usize::from(*b));
            *i += n;
        }
        (tag, len)
    };
    header(&d, &mut i); // certificate
    header(&d, &mut i); // tbsCertificate
    let (tag, len) = header(&d, &mut i);
    // An explicit version ([0]) comes first when present.
    let len = if tag == 0xa0 {
        i += len;
        header(&d, &mut i).1
    } else {
        len
    };
    let bytes = &d[i..i + len];
    let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    trimmed.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn delta_ads_is_bound_to_the_certificate_too() {
    let (s, _serve) = setup("xds-tls-delta");
    let gw = s.gw_envoy(Mode::Delta);
    wait_for(
        "infra/gw's Envoy (delta) to serve /a",
        Duration::from_secs(60),
        || s.serves("/a"),
    );
    assert!(!dynamic_secrets(&config_dump(gw.admin)).is_empty());
    let before = metric(s.admin, "portcullis_xds_refused_streams_total");
    let thief = envoy_with(
        &s.dir,
        "thief",
        "infra/gw",
        &client_cert(&s.ca, "infra", "other"),
        &s.ca.cert_pem,
        s.xds,
        Mode::Delta,
    );
    wait_for("the refusal to be counted", Duration::from_secs(30), || {
        metric(s.admin, "portcullis_xds_refused_streams_total") > before
    });
    std::thread::sleep(Duration::from_secs(3));
    let dump = config_dump(thief.admin);
    assert!(
        dynamic_listeners(&dump).is_empty(),
        "{:?}",
        dynamic_listeners(&dump)
    );
    assert!(dynamic_secrets(&dump).is_empty(), "{:?}", dynamic_secrets(&dump));
    assert!(
        dynamic_clusters(&dump).is_empty(),
        "{:?}",
        dynamic_clusters(&dump)
    );
}
