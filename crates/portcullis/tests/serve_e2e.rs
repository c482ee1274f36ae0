//! End to end: `portcullis serve` with the real Envoy and real echo
//! backends on loopback. Routing, a missing backend (500), a live file edit,
//! an Envoy crash and restart, the admin API, and a clean shutdown.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// (status, headers, body) of a plain HTTP/1.1 request, or None if the
/// connection failed.
fn http(port: u16, host: &str, path: &str) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_string(), body.to_string()))
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

struct Serve {
    child: Child,
    run_dir: PathBuf,
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

fn manifests(gw_port: u16, a: u16, b: u16) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: portcullis}}
spec: {{controllerName: portcullis.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: http, protocol: HTTP, port: {gw_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
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
        svc_a = service("a", a),
        svc_b = service("b", b),
    )
}

fn service(name: &str, port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: app}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}-1, namespace: app, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]"#
    )
}

fn start(dir: &Path, xds: u16, admin: u16) -> Serve {
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
        .env("ENVOY_BIN", envoy)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start portcullis serve");
    Serve { child, run_dir }
}

fn pid_alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn serve_routes_real_traffic_through_real_envoy() {
    let a = echo::spawn(echo::Config {
        namespace: "app".into(),
        pod: "a-pod-1".into(),
    })
    .expect("echo a");
    let b = echo::spawn(echo::Config {
        namespace: "app".into(),
        pod: "b-pod-1".into(),
    })
    .expect("echo b");
    let dir = std::env::temp_dir().join(format!("portcullis-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("manifests")).expect("mkdir");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    std::fs::write(
        dir.join("manifests/all.yaml"),
        manifests(gw_port, a.addr().port(), b.addr().port()),
    )
    .expect("write");
    let serve = start(&dir, xds, admin);

    // Routing through Envoy to the right backend.
    wait_for("Envoy to serve /a", Duration::from_secs(60), || {
        http(gw_port, "x", "/a/1").is_some_and(|r| r.0 == 200)
    });
    let (_, _, body) = http(gw_port, "x", "/a/1").expect("a");
    assert!(body.contains("a-pod-1"), "{body}");
    let (status, head, body) = http(gw_port, "x", "/b").expect("b");
    assert_eq!(status, 200);
    assert!(body.contains("b-pod-1"), "{body}");
    assert!(head.to_ascii_lowercase().contains("x-route: b"), "{head}");
    // Missing backend: the route is kept and answers 500.
    assert_eq!(http(gw_port, "x", "/missing").map(|r| r.0), Some(500));
    // No route: 404.
    assert_eq!(http(gw_port, "x", "/elsewhere").map(|r| r.0), Some(404));

    // Admin API: status and metrics.
    let (_, _, status_doc) = http(admin, "admin", "/api/status").expect("status");
    assert!(status_doc.contains("\"kind\":\"HTTPRoute\""), "{status_doc}");
    assert!(status_doc.contains("BackendNotFound"), "{status_doc}");
    wait_for("an ACK in metrics", Duration::from_secs(10), || {
        http(admin, "admin", "/metrics")
            .is_some_and(|r| r.2.contains("portcullis_xds_acks_total{gateway=\"infra/gw\""))
    });
    assert_eq!(http(admin, "admin", "/readyz").map(|r| r.0), Some(200));

    // A file edit changes what Envoy serves.
    let edited =
        manifests(gw_port, a.addr().port(), b.addr().port()).replace("value: /a}", "value: /renamed}");
    std::fs::write(dir.join("manifests/all.yaml"), edited).expect("edit");
    wait_for("the edit to reach Envoy", Duration::from_secs(20), || {
        http(gw_port, "x", "/renamed").is_some_and(|r| r.0 == 200)
            && http(gw_port, "x", "/a").is_some_and(|r| r.0 == 404)
    });

    // Envoy killed → restarted → serving again.
    let pid_file = serve.run_dir.join("infra_gw.pid");
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("kill");
    wait_for("Envoy to be restarted and serve", Duration::from_secs(30), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p != pid)
            && http(gw_port, "x", "/renamed").is_some_and(|r| r.0 == 200)
    });

    // Shutdown stops Envoy: no orphans.
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    drop(serve);
    wait_for("Envoy to stop with portcullis", Duration::from_secs(10), || {
        !pid_alive(pid.trim())
    });
    let _ = std::fs::remove_dir_all(&dir);
}
