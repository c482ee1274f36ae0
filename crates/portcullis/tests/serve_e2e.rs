//! End to end: `portcullis serve` with the real Envoy and real echo
//! backends on loopback. Routing, a missing backend (500), a live file edit,
//! an Envoy crash and restart, the admin API, and a clean shutdown.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Proc, echo_pod, free_port, http, manifests, start, wait_for, work_dir};

#[test]
fn serve_routes_real_traffic_through_real_envoy() {
    let a = echo_pod("app", "a-pod-1");
    let b = echo_pod("app", "b-pod-1");
    let dir = work_dir("e2e");
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
    // With its start time: a pid reused after Envoy was reaped is not it.
    let envoy = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .and_then(Proc::of)
        .expect("the restarted Envoy runs");
    drop(serve);
    wait_for("Envoy to stop with portcullis", Duration::from_secs(10), || {
        !envoy.alive()
    });
    let _ = std::fs::remove_dir_all(&dir);
}
