//! Lifecycle end to end, with the real Envoy:
//! - a NACK (injected through the test-only fault file) shows on the
//!   Gateway as `Programmed=False` with Envoy's message and in the NACK
//!   metric, and clears once Envoy ACKs a later version;
//! - portcullis restarted under continuous traffic: an Envoy run with
//!   `portcullis bootstrap` keeps serving the last configuration (no failed
//!   request) and resyncs to an edit made while portcullis was down.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{echo_pod, free_port, http, manifests, start_with, wait_for, work_dir};

fn gateway_programmed(admin: u16) -> Option<(String, String)> {
    let (_, _, body) = http(admin, "admin", "/api/status")?;
    let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
    let gw = doc["status"]
        .as_array()?
        .iter()
        .find(|s| s["kind"] == "Gateway" && s["metadata"]["name"] == "gw")?;
    let c = gw["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Programmed")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["message"].as_str()?.to_string(),
    ))
}

#[test]
fn a_nack_shows_on_the_gateway_and_in_metrics_until_a_later_version_is_acked() {
    let (a, b) = (echo_pod("app", "a-pod-1"), echo_pod("app", "b-pod-1"));
    let dir = work_dir("lifecycle-nack");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let text = manifests(gw_port, a.port(), b.port());
    std::fs::write(dir.join("manifests/all.yaml"), &text).expect("write");
    let fault = dir.join("fault.json");
    std::fs::write(&fault, r#"{"name": "test-fault", "connect_timeout": "-1s"}"#).expect("fault");
    let fault_env = fault.to_string_lossy().into_owned();
    let _serve = start_with(
        &dir,
        xds,
        admin,
        &[],
        &[("PORTCULLIS_TEST_FAULT_FILE", fault_env.as_str())],
    );

    wait_for("the NACK on the Gateway", Duration::from_secs(60), || {
        gateway_programmed(admin).is_some_and(|(s, m)| s == "False" && m.contains("Envoy rejected CDS"))
    });
    let (_, message) = gateway_programmed(admin).expect("status");
    assert!(
        message.contains("test-fault") || message.to_lowercase().contains("duration"),
        "{message}"
    );
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    let nacks = metrics
        .lines()
        .find(|l| {
            l.starts_with("portcullis_xds_nacks_total{gateway=\"infra/gw\"") && l.contains("type_url=\"CDS\"")
        })
        .unwrap_or_else(|| panic!("no NACK metric:\n{metrics}"));
    let n: f64 = nacks
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("value");
    assert!(n >= 1.0, "{nacks}");

    // The fault goes away and an input changes: a later version is ACKed.
    std::fs::remove_file(&fault).expect("rm fault");
    std::fs::write(
        dir.join("manifests/all.yaml"),
        text.replace("value: /b}", "value: /b2}"),
    )
    .expect("edit");
    wait_for("the NACK to clear", Duration::from_secs(30), || {
        gateway_programmed(admin).is_some_and(|(s, _)| s == "True")
    });
    wait_for("traffic on the new version", Duration::from_secs(30), || {
        http(gw_port, "x", "/b2").is_some_and(|r| r.0 == 200)
    });
    let _ = std::fs::remove_dir_all(&dir);
}

struct Envoy(std::process::Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn portcullis_restart_keeps_envoy_serving_and_resyncs() {
    let (a, b) = (echo_pod("app", "a-pod-1"), echo_pod("app", "b-pod-1"));
    let dir = work_dir("lifecycle-restart");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let text = manifests(gw_port, a.port(), b.port());
    std::fs::write(dir.join("manifests/all.yaml"), &text).expect("write");
    let serve = start_with(&dir, xds, admin, &["--no-envoy"], &[]);

    // An Envoy run by the user, from `portcullis bootstrap`.
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args([
            "bootstrap",
            "--gateway",
            "infra/gw",
            "--xds-port",
            &xds.to_string(),
        ])
        .output()
        .expect("bootstrap");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bootstrap = dir.join("envoy.json");
    std::fs::write(&bootstrap, &out.stdout).expect("write bootstrap");
    let envoy_bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let _envoy = Envoy(
        Command::new(envoy_bin)
            .arg("-c")
            .arg(&bootstrap)
            .args(["--use-dynamic-base-id", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("envoy"),
    );
    wait_for("Envoy to serve /a", Duration::from_secs(60), || {
        http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
    });

    // Continuous traffic on /a from here on.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match http(gw_port, "x", "/a") {
                    Some((200, _, _)) => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    // portcullis goes away; the configuration changes while it is down.
    drop(serve);
    std::thread::sleep(Duration::from_millis(1500));
    let during_outage = ok.load(Ordering::Relaxed);
    std::fs::write(
        dir.join("manifests/all.yaml"),
        text.replace("value: /b}", "value: /c}"),
    )
    .expect("edit");
    std::thread::sleep(Duration::from_millis(500));
    let serve = start_with(&dir, xds, admin, &["--no-envoy"], &[]);
    wait_for("Envoy to resync to the edit", Duration::from_secs(60), || {
        http(gw_port, "x", "/c").is_some_and(|r| r.0 == 200)
            && http(gw_port, "x", "/b").is_some_and(|r| r.0 == 404)
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    traffic.join().expect("traffic");
    drop(serve);
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert!(
        during_outage > 0 && ok > during_outage,
        "traffic kept flowing: {during_outage} then {ok}"
    );
    assert_eq!(failed, 0, "{failed} failed requests out of {}", ok + failed);
    let _ = std::fs::remove_dir_all(&dir);
}
