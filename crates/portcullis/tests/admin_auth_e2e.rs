//! Admin API exposure (README, "Admin API exposure"), through real HTTP
//! against `portcullis serve`: the loopback default stays open; an exposed
//! admin address needs a token (startup refuses otherwise); with a token
//! the views answer 401 without it and 200 with it, health stays open; the
//! metrics listener serves `/metrics` and health without a token and no
//! view; `portcullis get --admin-token-file` sends the token.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{echo_pod, free_port, request, work_dir};

const TOKEN: &str = "s3cr3t-admin-token-0123456789";

fn get(port: u16, path: &str, token: Option<&str>) -> Option<u16> {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    request(port, "admin", "GET", path, &headers).map(|r| r.0)
}

/// `portcullis serve --no-envoy` with exactly these admin flags. Its
/// stderr is drained as it is written, so a chatty process never blocks on
/// a full pipe and a failure can show why.
fn serve(dir: &Path, admin: &str, extra: &[&str]) -> Serve {
    let a = echo_pod("app", "a-pod-1");
    std::fs::write(
        dir.join("manifests/all.yaml"),
        common::manifests(free_port(), a.addr().port(), a.addr().port()),
    )
    .expect("write manifests");
    std::mem::forget(a);
    let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("serve")
        .arg(dir.join("manifests"))
        .arg("--no-envoy")
        .args(["--xds-address", &format!("127.0.0.1:{}", free_port())])
        .args(["--admin-address", admin])
        .arg("--run-dir")
        .arg(dir.join("run"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start portcullis serve");
    let mut pipe = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        use std::io::Read as _;
        let _ = pipe.read_to_string(&mut err);
        err
    });
    Serve {
        child,
        reader: Some(reader),
    }
}

struct Serve {
    child: std::process::Child,
    reader: Option<std::thread::JoinHandle<String>>,
}

impl Serve {
    /// Stops the process (if it still runs) and returns all it wrote to
    /// stderr.
    fn stderr(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reader
            .take()
            .map(|r| r.join().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Waits (30 s at most) for `/readyz` on `admin` to answer 200; the
    /// process's stderr if it exited or never became ready.
    fn ready(&mut self, admin: u16) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if get(admin, "/readyz", None) == Some(200) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("portcullis serve exited ({status}): {}", self.stderr()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("not ready after 30 s: {}", self.stderr()))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for the process to exit (it must, within 20 s) and returns its
/// stderr.
fn exits(mut serve: Serve) -> String {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = serve.child.try_wait() {
            assert!(!status.success(), "portcullis serve must refuse to start");
            return serve.stderr();
        }
        if start.elapsed() > Duration::from_secs(20) {
            panic!("portcullis serve kept running: {}", serve.stderr());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn loopback_default_stays_open() {
    let dir = work_dir("admin_auth_loopback");
    let admin = free_port();
    let mut running = serve(&dir, &format!("127.0.0.1:{admin}"), &[]);
    running.ready(admin).unwrap_or_else(|e| panic!("{e}"));
    for path in [
        "/metrics",
        "/api/status",
        "/api/config_dump",
        "/api/views",
        "/healthz",
    ] {
        assert_eq!(
            get(admin, path, None),
            Some(200),
            "{path} without a token on loopback"
        );
    }
}

#[test]
fn exposed_admin_without_a_token_or_with_a_short_one_is_refused() {
    let dir = work_dir("admin_auth_refused");
    let err = exits(serve(&dir, &format!("0.0.0.0:{}", free_port()), &[]));
    assert!(
        err.contains("is not a loopback address") && err.contains("--admin-token-file"),
        "{err}"
    );
    let short = dir.join("short");
    std::fs::write(&short, "abc\n").expect("write");
    let err = exits(serve(
        &dir,
        &format!("0.0.0.0:{}", free_port()),
        &["--admin-token-file", short.to_str().expect("utf-8")],
    ));
    assert!(err.contains("at least 16"), "{err}");
    // Through the config file as well.
    let config = dir.join("portcullis.yaml");
    std::fs::write(&config, "metricsAddress: 127.0.0.1:not-a-port\n").expect("write");
    let err = exits(serve(
        &dir,
        &format!("127.0.0.1:{}", free_port()),
        &["--config", config.to_str().expect("utf-8")],
    ));
    assert!(err.contains("metricsAddress"), "{err}");
}

#[test]
fn exposed_admin_needs_the_token_and_metrics_port_does_not() {
    let dir = work_dir("admin_auth_exposed");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write");
    // The token and the metrics address from the config file; the admin
    // address on every interface (the test reaches it on loopback).
    let config = dir.join("portcullis.yaml");
    let (admin, metrics) = (free_port(), free_port());
    std::fs::write(
        &config,
        format!(
            "adminTokenFile: {}\nmetricsAddress: 127.0.0.1:{metrics}\n",
            token_file.display()
        ),
    )
    .expect("write");
    let mut running = serve(
        &dir,
        &format!("0.0.0.0:{admin}"),
        &["--config", config.to_str().expect("utf-8")],
    );
    running.ready(admin).unwrap_or_else(|e| panic!("{e}"));
    for path in ["/api/status", "/api/config_dump", "/api/views", "/metrics"] {
        assert_eq!(get(admin, path, None), Some(401), "{path} without a token");
        assert_eq!(
            get(admin, path, Some("wrong-token-0123456789")),
            Some(401),
            "{path}"
        );
        assert_eq!(
            get(admin, path, Some(&TOKEN[..TOKEN.len() - 1])),
            Some(401),
            "{path}"
        );
        assert_eq!(get(admin, path, Some(TOKEN)), Some(200), "{path} with the token");
    }
    let (_, head, _) = request(admin, "admin", "GET", "/api/status", &[]).expect("401");
    assert!(
        head.to_ascii_lowercase().contains("www-authenticate: bearer"),
        "{head}"
    );
    // Health stays open on the admin address (probes carry no token).
    assert_eq!(get(admin, "/healthz", None), Some(200));
    assert_eq!(get(admin, "/readyz", None), Some(200));

    // The metrics listener: /metrics and health without a token, no view.
    let (status, _, body) = request(metrics, "m", "GET", "/metrics", &[]).expect("metrics");
    assert_eq!(status, 200);
    assert!(body.contains("portcullis_translations_total"), "{body}");
    assert_eq!(get(metrics, "/healthz", None), Some(200));
    assert_eq!(get(metrics, "/readyz", None), Some(200));
    for path in ["/api/status", "/api/config_dump", "/api/views"] {
        assert_eq!(
            get(metrics, path, Some(TOKEN)),
            Some(404),
            "{path} on the metrics port"
        );
    }

    // `portcullis get` sends the token from --admin-token-file or the
    // environment; without it, it says why.
    let cli = |env_token: Option<&Path>, flag: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        c.args(["get", "gateways", "--admin", &format!("127.0.0.1:{admin}")]);
        c.env_remove("PORTCULLIS_ADMIN_TOKEN_FILE");
        if flag {
            c.arg("--admin-token-file").arg(&token_file);
        }
        if let Some(p) = env_token {
            c.env("PORTCULLIS_ADMIN_TOKEN_FILE", p);
        }
        c.output().expect("portcullis get")
    };
    let out = cli(None, false);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401") && err.contains("--admin-token-file"), "{err}");
    for out in [cli(None, true), cli(Some(&token_file), false)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("infra") && text.contains("gw"), "{text}");
    }
}
