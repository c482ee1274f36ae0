//! Helpers shared by the end-to-end tests: `portcullis serve` with the real
//! Envoy, manifests for one Gateway with echo backends, raw HTTP.
#![allow(dead_code)] // each test file uses its own subset

pub mod httpproxy;
pub mod kube;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    testkit::port::free()
}

/// (status, headers, body) of a plain HTTP/1.1 GET, or None if the
/// connection failed.
pub fn http(port: u16, host: &str, path: &str) -> Option<(u16, String, String)> {
    request(port, host, "GET", path, &[])
}

/// Like [`http`], with any method and extra request headers.
pub fn request(
    port: u16,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_string(), body.to_string()))
}

/// An echo backend ("pod" `pod` of namespace `ns`) on a free loopback port.
pub fn echo_pod(ns: &str, pod: &str) -> echo::Handle {
    echo::spawn(echo::Config {
        namespace: ns.into(),
        pod: pod.into(),
    })
    .unwrap_or_else(|e| panic!("echo {ns}/{pod}: {e}"))
}

/// A fresh working directory for one test (`manifests/` inside it is
/// what `serve` watches), unique per test name and process.
pub fn work_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portcullis-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("manifests")).expect("mkdir");
    dir
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

/// A counter's value once it has stopped moving: unchanged for a full
/// second (bounded at 20 s). Taken as a baseline before a step whose
/// exact effect on the counter is asserted, so that a late write of an
/// earlier step cannot land in the measured window.
pub fn settled<T: PartialEq + Copy>(what: &str, mut read: impl FnMut() -> T) -> T {
    let mut last = read();
    let mut since = Instant::now();
    wait_for(&format!("{what} to settle"), Duration::from_secs(20), || {
        let now = read();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        since.elapsed() >= Duration::from_secs(1)
    });
    last
}

pub struct Serve {
    pub child: Child,
    pub run_dir: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
    }
}

/// GatewayClass `portcullis` of our controller, followed by `---`.
pub const GATEWAY_CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
";

/// [`GATEWAY_CLASS`] and Gateway `infra/gw` with `listeners` (the items
/// of its `listeners:`, each line indented by two and ending in a
/// newline), followed by `---`.
pub fn gateway_with(listeners: &str) -> String {
    format!(
        r#"{GATEWAY_CLASS}apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
{listeners}---
"#
    )
}

/// A listener item for [`gateway_with`]: HTTP on `port`, routes from all
/// namespaces.
pub fn http_listener(name: &str, port: u16) -> String {
    format!(
        "  - {{name: {name}, protocol: HTTP, port: {port}, allowedRoutes: {{namespaces: {{from: All}}}}}}\n"
    )
}

/// A listener item for [`gateway_with`]: `https`, HTTPS on `port`
/// terminating with the TLS Secret `cert` of the Gateway's namespace,
/// routes from all namespaces.
pub fn https_listener(port: u16, cert: &str) -> String {
    format!(
        "  - name: https\n    protocol: HTTPS\n    port: {port}\n    \
         tls: {{certificateRefs: [{{name: {cert}}}]}}\n    allowedRoutes: {{namespaces: {{from: All}}}}\n"
    )
}

/// A listener item for [`gateway_with`]: HTTP on `port` for host
/// `<name>.example.com`, routes from all namespaces.
pub fn host_listener(name: &str, port: u16) -> String {
    format!(
        "  - {{name: {name}, protocol: HTTP, port: {port}, hostname: {name}.example.com, allowedRoutes: {{namespaces: {{from: All}}}}}}\n"
    )
}

/// The GatewayClass and Gateway `infra/gw` (one HTTP listener on
/// `gw_port`, routes from all namespaces) that the end-to-end tests share.
pub fn gateway(gw_port: u16) -> String {
    gateway_with(&http_listener("http", gw_port))
}

pub fn manifests(gw_port: u16, a: u16, b: u16) -> String {
    format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /b}}}}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {{set: [{{name: x-route, value: b}}]}}
    backendRefs: [{{name: b, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /missing}}}}]
    backendRefs: [{{name: nope, port: 80}}]
---
{svc_a}
---
{svc_b}
"#,
        gateway = gateway(gw_port),
        svc_a = service("a", a),
        svc_b = service("b", b),
    )
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// HTTPRoute `app/NAME` on Gateway `infra/gw`: a rule per `(path prefix,
/// Service)` of `rules` (the Service's port 80); followed by `---`.
pub fn prefix_route(name: &str, rules: &[(&str, &str)]) -> String {
    let rules: String = rules
        .iter()
        .map(|(path, svc)| {
            format!(
                "  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n    backendRefs: [{{name: {svc}, port: 80}}]\n"
            )
        })
        .collect();
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n{rules}---\n"
    )
}

/// Service `app/NAME` (port 80) and its EndpointSlice on loopback `port`.
pub fn service(name: &str, port: u16) -> String {
    service_at("app", name, loopback(port))
}

/// Service `ns/name` (port 80) and its EndpointSlice on `backend` (in
/// Kubernetes mode an address from `kube::forward`: the apiserver refuses
/// loopback endpoints); no `---` after it.
pub fn service_at(ns: &str, name: &str, backend: SocketAddr) -> String {
    let (ip, port) = (backend.ip(), backend.port());
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
endpoints: [{{addresses: ["{ip}"]}}]"#
    )
}

pub fn start(dir: &Path, xds: u16, admin: u16) -> Serve {
    start_with(dir, xds, admin, &[], &[])
}

/// `start` with extra arguments and environment.
pub fn start_with(dir: &Path, xds: u16, admin: u16, args: &[&str], env: &[(&str, &str)]) -> Serve {
    let run_dir = dir.join("run");
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("serve")
        .arg(dir.join("manifests"))
        .args([
            "--xds-address",
            &format!("127.0.0.1:{xds}"),
            "--admin-address",
            &format!("127.0.0.1:{admin}"),
        ])
        .args(["--listener-address", "127.0.0.1"])
        .arg("--run-dir")
        .arg(&run_dir)
        .args(args)
        .envs(env.iter().copied())
        .env("ENVOY_BIN", envoy)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start portcullis serve");
    Serve { child, run_dir }
}

/// The input part of a translate fixture (`../translate/tests/fixtures/NAME.yaml`),
/// written to its own temp file for `-f`.
pub fn fixture_input(name: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../translate/tests/fixtures")
        .join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(fixture).expect("fixture");
    let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
    // One file per call: tests in one binary run in parallel, and a shared
    // path would be truncated by one test while another's portcullis reads it.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("portcullis-fixture-{name}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("in.yaml");
    std::fs::write(&path, input).expect("write");
    path
}

/// A process as it was listed: its pid and its start time, so that a pid
/// reused by an unrelated process (after this one was reaped) is not
/// mistaken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    /// Field 22 of `/proc/{pid}/stat` (clock ticks after boot).
    pub start: u64,
}

impl Proc {
    /// The process running as `pid` now, if any.
    pub fn of(pid: u32) -> Option<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Proc::parse(pid, &stat).map(|(p, _, _)| p)
    }

    /// Whether the same process (same pid, same start time) still exists
    /// (a zombie counts, as its `/proc` entry is still there).
    pub fn alive(&self) -> bool {
        Proc::of(self.pid).is_some_and(|now| now.start == self.start)
    }

    /// The process, "pid (comm", and the fields after `comm` (the third
    /// onwards) from `/proc/{pid}/stat` ("pid (comm) state ppid ...": comm
    /// may hold spaces and parentheses, so split after the last ')').
    fn parse(pid: u32, stat: &str) -> Option<(Proc, &str, Vec<&str>)> {
        let (head, tail) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = tail.split_whitespace().collect();
        let start = fields.get(22 - 3)?.parse().ok()?;
        Some((Proc { pid, start }, head, fields))
    }
}

/// Pids of `parent`'s Envoy children.
pub fn envoy_children(parent: u32) -> Vec<u32> {
    envoy_child_procs(parent).iter().map(|p| p.pid).collect()
}

/// `parent`'s Envoy children, with their start times.
pub fn envoy_child_procs(parent: u32) -> Vec<Proc> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((proc, head, fields)) = Proc::parse(pid, &stat) else {
            continue;
        };
        let ppid = fields.get(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && head.contains("(envoy") {
            out.push(proc);
        }
    }
    out
}

/// Runs a provisioned Gateway's Envoy as its pod would (Kubernetes mode
/// part 2, no kubelet here): `bootstrap` is the provisioned ConfigMap's
/// bootstrap and `secret` the keys of the issued client Secret, both read
/// back from the API by the caller. `dir` stands for the Secret's mount
/// path (every key a file, as the Deployment mounts it) and loopback port
/// `xds` for the xDS Service's DNS name; the admin port moves to a free
/// one. Everything else is the bootstrap as provisioned (client
/// certificate and server CA through file-based SDS, SNI, the server's
/// DNS name).
pub fn provisioned_envoy(dir: &Path, bootstrap: &str, secret: &[(String, String)], xds: u16) -> Child {
    let mount = kube_provider::names::XDS_CERT_DIR;
    std::fs::create_dir_all(dir).expect("mkdir");
    let at = dir.display().to_string();
    for (key, content) in secret {
        std::fs::write(dir.join(key), content.replace(mount, &at)).expect("write key");
    }
    let mut b: serde_json::Value =
        serde_json::from_str(&bootstrap.replace(mount, &at)).expect("bootstrap JSON");
    let cluster = &mut b["static_resources"]["clusters"][0];
    let address = &mut cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"];
    address["address"] = "127.0.0.1".into();
    address["port_value"] = xds.into();
    cluster["type"] = "STATIC".into();
    b["admin"]["address"]["socket_address"]["port_value"] = free_port().into();
    let file = dir.with_extension("json");
    std::fs::write(&file, b.to_string()).expect("write bootstrap");
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    Command::new(bin)
        .arg("-c")
        .arg(&file)
        .args(["--disable-hot-restart", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Envoy")
}
