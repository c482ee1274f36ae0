//! End to end with `portcullis serve` (and the real Envoy where traffic is
//! involved): hostile directory contents, key material in the admin API,
//! and endpoints pointing the data plane at the control plane.
//!
//! - A FIFO and a link to `/dev/zero` named `*.yaml` in the watched
//!   directory: serve starts, reports them, applies a later edit (seen
//!   through Envoy) and stops promptly on SIGTERM.
//! - An HTTPS Gateway: no admin response (nor `get`/`describe`) contains
//!   the private key, in PEM, its base64 lines or the Secret's base64.
//! - An EndpointSlice at serve's admin port (also as `::ffff:127.0.0.1`):
//!   a request through the Gateway never returns admin content.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use common::{
    echo_pod, free_port, gateway, gateway_with, http, service, start, start_with, wait_for, work_dir,
};

fn route(name: &str, prefix: &str, backend: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: {prefix}}}}}]
    backendRefs: [{{name: {backend}, port: 80}}]
"#
    )
}

/// Sends SIGTERM and waits for the process to exit; the time it took.
fn terminate(serve: &mut common::Serve) -> Duration {
    let started = Instant::now();
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(serve.child.id().to_string())
        .status()
        .expect("kill");
    assert!(status.success());
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(_)) = serve.child.try_wait() {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("portcullis serve did not stop within 20 s of SIGTERM");
}

#[test]
fn a_fifo_in_the_watched_directory_does_not_freeze_serve() {
    let echo = echo_pod("app", "a-pod-1");
    let dir = work_dir("hardening-io-fifo");
    let manifests = dir.join("manifests");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    std::fs::write(manifests.join("gateway.yaml"), gateway(gw_port)).expect("write");
    std::fs::write(manifests.join("svc.yaml"), service("a", echo.addr().port())).expect("write");
    std::fs::write(manifests.join("route.yaml"), route("r", "/a", "a")).expect("write");
    let fifo = manifests.join("fifo.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", manifests.join("zero.yaml")).expect("symlink");

    let mut serve = start(&dir, xds, admin);
    wait_for(
        "Envoy to serve /a beside the FIFO",
        Duration::from_secs(60),
        || http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200),
    );
    let (_, _, status) = http(admin, "admin", "/api/status").expect("status");
    assert!(
        status.contains("fifo.yaml") && status.contains("not a regular file (a FIFO)"),
        "{status}"
    );
    assert!(
        status.contains("zero.yaml") && status.contains("/dev/zero"),
        "{status}"
    );

    // A later edit of a valid file is applied: a new route reaches Envoy.
    assert_eq!(http(gw_port, "x", "/new").map(|r| r.0), Some(404));
    std::fs::write(
        manifests.join("route.yaml"),
        format!("{}---\n{}", route("r", "/a", "a"), route("n", "/new", "a")),
    )
    .expect("edit");
    wait_for("the edit to reach Envoy", Duration::from_secs(30), || {
        http(gw_port, "x", "/new").is_some_and(|r| r.0 == 200)
    });
    assert_eq!(http(admin, "admin", "/readyz").map(|r| r.0), Some(200));
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    assert!(metrics.contains("portcullis_provider_stuck 0"), "{metrics}");

    let took = terminate(&mut serve);
    assert!(took < Duration::from_secs(15), "SIGTERM took {took:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The HTTPS Secret of `translate/tests/fixtures/https-termination.yaml`.
const TLS_CRT: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJxakNDQVZDZ0F3SUJBZ0lVWHlMbXQ3ajdvaDVFZ2tKL2dXV2RicjJuZldJd0NnWUlLb1pJemowRUF3SXcKRmpFVU1CSUdBMVVFQXd3TFpYaGhiWEJzWlM1amIyMHdJQmNOTWpZeE1USXlNVEExT1RJNFdoZ1BNakV5TmpFdwpNamt4TURVNU1qaGFNQll4RkRBU0JnTlZCQU1NQzJWNFlXMXdiR1V1WTI5dE1Ga3dFd1lIS29aSXpqMENBUVlJCktvWkl6ajBEQVFjRFFnQUV1czVDYjczNXE4RzczVk14YnZZTE5SM0FuZ1JhRXh5YkczRG5TODBHTkhaMjlQb2kKcDRJc2E4SWFna1c2RURuUi83L05CdnpEUlllcFhLK3lrYW4rNDZONk1IZ3dIUVlEVlIwT0JCWUVGSG56OG13Nwo4VWFPWFpYbGhhTDgxc2dPQy9FdU1COEdBMVVkSXdRWU1CYUFGSG56OG13NzhVYU9YWlhsaGFMODFzZ09DL0V1Ck1BOEdBMVVkRXdFQi93UUZNQU1CQWY4d0pRWURWUjBSQkI0d0hJSUxaWGhoYlhCc1pTNWpiMjJDRFNvdVpYaGgKYlhCc1pTNWpiMjB3Q2dZSUtvWkl6ajBFQXdJRFNBQXdSUUloQUoxblc2dURHeHVNK2RPa2ZGdDhqSG1nSkE3ZQpsT2czZjZUYkhld0NPNlRFQWlBQzlDR1JsMkJaek4zR0xvOGxuMXlveUJzVHBtRGJReHpzS1EyTnAwVXF1Zz09Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";
const TLS_KEY: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JR0hBZ0VBTUJNR0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSEJHMHdhd0lCQVFRZ2tQaHBSQUFiVFU4WTVOQ24KNDFYOFpkK0MveTJnOW9yTUZDSDlRKzRYNFpHaFJBTkNBQVM2emtKdnZmbXJ3YnZkVXpGdTlnczFIY0NlQkZvVApISnNiY09kTHpRWTBkbmIwK2lLbmdpeHJ3aHFDUmJvUU9kSC92ODBHL01ORmg2bGNyN0tScWY3agotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==";

fn decode(b64: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    String::from_utf8(bytes).expect("PEM")
}

/// Every spelling of the key that must appear nowhere: the PEM, each of
/// its base64 lines, the Secret's base64, and the PEM's base64 as
/// proto-JSON would render it as bytes.
fn key_spellings() -> Vec<String> {
    let pem = decode(TLS_KEY);
    let mut out = vec![
        pem.clone(),
        TLS_KEY.to_string(),
        base64::engine::general_purpose::STANDARD.encode(pem.as_bytes()),
        // JSON escapes the newlines of an inline string.
        pem.replace('\n', "\\n"),
    ];
    out.extend(
        pem.lines()
            .filter(|l| !l.starts_with("-----"))
            .map(str::to_string),
    );
    out
}

fn https_manifests(port: u16) -> String {
    format!(
        r#"{gateway}apiVersion: v1
kind: Secret
metadata: {{name: tls, namespace: infra}}
type: kubernetes.io/tls
data:
  tls.crt: {TLS_CRT}
  tls.key: {TLS_KEY}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: ["foo.example.com"]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
"#,
        gateway = gateway_with(&format!(
            "  - name: https\n    protocol: HTTPS\n    port: {port}\n    hostname: \"*.example.com\"\n    \
             tls: {{mode: Terminate, certificateRefs: [{{name: tls}}]}}\n    allowedRoutes: {{namespaces: {{from: All}}}}\n"
        )),
    )
}

/// A Secret written wrongly (`data` a string instead of a map, `stringData`
/// values of the wrong type): the parse errors must not quote the key.
fn broken_secret() -> String {
    let pem = decode(TLS_KEY);
    let quoted = serde_json::to_string(&pem).expect("json");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: broken, namespace: infra}}\n\
         type: kubernetes.io/tls\ndata: {quoted}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: broken2, namespace: infra}}\n\
         type: kubernetes.io/tls\ndata: {{tls.key: {quoted}}}\n"
    )
}

#[test]
fn the_admin_api_never_returns_a_private_key() {
    let dir = work_dir("hardening-io-keys");
    std::fs::write(dir.join("manifests/all.yaml"), https_manifests(free_port())).expect("write");
    std::fs::write(dir.join("manifests/broken.yaml"), broken_secret()).expect("write");
    let (xds, admin) = (free_port(), free_port());
    let _serve = start_with(&dir, xds, admin, &["--no-envoy"], &[]);
    wait_for("serve to be ready", Duration::from_secs(60), || {
        http(admin, "admin", "/readyz").is_some_and(|r| r.0 == 200)
    });

    let mut responses = Vec::new();
    for path in [
        "/api/config_dump",
        "/api/views",
        "/api/status",
        "/metrics",
        "/readyz",
        "/healthz",
        "/api/nope",
    ] {
        let (status, head, body) = http(admin, "admin", path).expect(path);
        responses.push((format!("GET {path} ({status})"), format!("{head}\r\n\r\n{body}")));
    }
    let admin_address = format!("127.0.0.1:{admin}");
    for args in [
        vec!["get", "gateways"],
        vec!["get", "routes"],
        vec!["describe", "gateway", "infra/gw"],
        vec!["describe", "route", "app/r"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(&args)
            .args(["--admin", &admin_address])
            .output()
            .expect("run portcullis");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        responses.push((
            format!("portcullis {}", args.join(" ")),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }

    for (what, text) in &responses {
        for spelling in key_spellings() {
            assert!(
                !text.contains(&spelling),
                "{what} contains the private key ({spelling:?}):\n{text}"
            );
        }
    }
    // Not vacuous: the dump has the Secret, with its certificate chain and
    // the key redacted as Envoy's own dump does.
    let dump = &responses[0].1;
    assert!(dump.contains("\"secrets\""), "{dump}");
    assert!(dump.contains("[redacted]"), "{dump}");
    let cert_line = decode(TLS_CRT)
        .lines()
        .nth(1)
        .expect("a certificate line")
        .to_string();
    assert!(dump.contains(&cert_line), "the certificate chain is kept: {dump}");
    // The broken Secrets are reported, without their values.
    let status = &responses[2].1;
    assert!(status.contains("Secret infra/broken"), "{status}");
    assert!(status.contains("Secret data is never quoted"), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_endpoint_at_the_admin_port_never_reaches_the_admin_api() {
    let echo = echo_pod("app", "ok-pod");
    let dir = work_dir("hardening-io-ssrf");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    // Service `admin` points at serve's admin API, as IPv4 and as an
    // IPv4-mapped IPv6 address; `meta` at the cloud metadata address.
    let hostile = format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: admin, namespace: app}}
spec:
  ports: [{{name: http, port: 80, targetPort: {admin}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: admin-v4, namespace: app, labels: {{kubernetes.io/service-name: admin}}}}
addressType: IPv4
ports: [{{name: http, port: {admin}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: admin-v6, namespace: app, labels: {{kubernetes.io/service-name: admin}}}}
addressType: IPv6
ports: [{{name: http, port: {admin}}}]
endpoints: [{{addresses: ["::ffff:127.0.0.1"]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: meta, namespace: app}}
spec:
  ports: [{{name: http, port: 80, targetPort: 80}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: meta-1, namespace: app, labels: {{kubernetes.io/service-name: meta}}}}
addressType: IPv4
ports: [{{name: http, port: 80}}]
endpoints: [{{addresses: ["169.254.169.254"]}}]
"#
    );
    let manifests = format!(
        "{}{}\n---\n{}---\n{}---\n{}",
        gateway(gw_port),
        service("ok", echo.addr().port()),
        route("ok", "/ok", "ok"),
        route("steal", "/api", "admin"),
        route("meta", "/latest", "meta"),
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    std::fs::write(dir.join("manifests/hostile.yaml"), hostile).expect("write");
    let _serve = start(&dir, xds, admin);
    wait_for("Envoy to serve /ok", Duration::from_secs(60), || {
        http(gw_port, "x", "/ok").is_some_and(|r| r.0 == 200)
    });
    // The admin API itself is up, and would answer this path.
    let (direct, _, dump) = http(admin, "admin", "/api/config_dump").expect("direct");
    assert_eq!(direct, 200);
    assert!(dump.contains("\"generation\""), "{dump}");

    for _ in 0..5 {
        let (status, head, body) = http(gw_port, "x", "/api/config_dump").expect("through Envoy");
        assert_ne!(status, 200, "the Gateway reached the admin API:\n{head}\n{body}");
        assert!(
            !body.contains("\"generation\"") && !body.contains("\"gateways\""),
            "admin content through the Gateway:\n{body}"
        );
        assert_eq!(
            status, 503,
            "no endpoint left: Envoy's answer for a backend without endpoints"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(http(gw_port, "x", "/api/status").map(|r| r.0), Some(503));

    let (_, _, status) = http(admin, "admin", "/api/status").expect("status");
    for needle in [
        "EndpointSlice app/admin-v4",
        "EndpointSlice app/admin-v6",
        "portcullis's admin API",
        "EndpointSlice app/meta-1",
        "link-local",
    ] {
        assert!(status.contains(needle), "{needle} not in {status}");
    }
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
