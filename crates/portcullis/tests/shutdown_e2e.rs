//! No Envoy outlives `portcullis serve`: neither the data-plane Envoy nor
//! the resident STRICT validator Envoys, whether portcullis is stopped
//! (SIGTERM) or killed outright (SIGKILL, where only the kernel can clean
//! up: see `orphan_guard`).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Proc, echo_pod, envoy_child_procs, free_port, manifests, start_with, wait_for};

/// Starts `serve` in STRICT mode and waits until it runs the data-plane
/// Envoy and at least one resident validator Envoy; returns the serve
/// handle and those Envoys (pid and start time, so that a pid reused
/// after an Envoy was reaped does not pass for that Envoy).
fn serve_with_envoys(name: &str) -> (common::Serve, Vec<Proc>, echo::Handle) {
    let a = echo_pod("app", "a-pod-1");
    let dir = std::env::temp_dir().join(format!("portcullis-shutdown-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("manifests")).expect("mkdir");
    let (gw, xds, admin) = (free_port(), free_port(), free_port());
    std::fs::write(
        dir.join("manifests/all.yaml"),
        manifests(gw, a.addr().port(), a.addr().port()),
    )
    .expect("write");
    let serve = start_with(
        &dir,
        xds,
        admin,
        &[],
        &[("PORTCULLIS_ROUTE_REPLACEMENT_MODE", "STRICT")],
    );
    let parent = serve.child.id();
    let data_plane = serve.run_dir.join("infra_gw.pid");
    // Read the pid file before listing the children: the data-plane
    // Envoy can start (and write it) between a listing and the read, and
    // the resident validators alone already make two.
    let mut envoys = Vec::new();
    wait_for(
        "the data-plane Envoy and a resident validator Envoy",
        Duration::from_secs(60),
        || {
            let Some(data_plane_pid) = std::fs::read_to_string(&data_plane)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            else {
                return false;
            };
            envoys = envoy_child_procs(parent);
            envoys.len() >= 2 && envoys.iter().any(|p| p.pid == data_plane_pid)
        },
    );
    (serve, envoys, a)
}

fn assert_all_gone(envoys: &[Proc], how: &str) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if envoys.iter().all(|p| !p.alive()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<&Proc> = envoys.iter().filter(|p| p.alive()).collect();
    // Orphans hold the test's output pipe open: kill them, or the whole
    // run would hang instead of failing.
    for p in &left {
        let _ = Command::new("kill").args(["-KILL", &p.pid.to_string()]).status();
    }
    panic!("Envoys {left:?} outlived portcullis after {how}");
}

/// Signals `serve` (running its Envoys) and expects every Envoy gone.
fn signal_and_expect_no_envoy(name: &str, signal: &str) {
    let (mut serve, envoys, _a) = serve_with_envoys(name);
    Command::new("kill")
        .args([&format!("-{signal}"), &serve.child.id().to_string()])
        .status()
        .expect("kill");
    let _ = serve.child.wait();
    assert_all_gone(&envoys, &format!("SIG{signal}"));
}

#[test]
fn sigterm_stops_every_envoy() {
    signal_and_expect_no_envoy("term", "TERM");
}

#[test]
fn sigkill_takes_every_envoy_with_it() {
    // No cleanup code runs: only the kernel's parent-death signal can act.
    signal_and_expect_no_envoy("kill", "KILL");
}
