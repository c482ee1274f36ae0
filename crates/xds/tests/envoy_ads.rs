//! The ADS server against the real Envoy, in both protocol variants:
//! initial configuration served, an update pushed, a NACK reported with
//! Envoy's message while the previous version keeps serving, and recovery.

mod support;

use support::{Envoy, Recorder, direct, free_port, get, poison, wait_for};
use translate::GatewayXds;

/// A Gateway's xDS: one listener, one route answering `body` directly, plus
/// optionally a route with a regex Envoy rejects (RE2 program too large).
fn config(port: u16, body: &str, poisoned: bool) -> GatewayXds {
    let mut gw = support::gateway(&[port]);
    let mut routes = vec![direct("/hello", body)];
    if poisoned {
        routes.push(poison());
    }
    gw.routes = vec![support::route_configuration(format!("t/gw/{port}"), routes)];
    gw
}

fn run(delta: bool) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cache = xds::SnapshotCache::new();
    let recorder = Recorder::default();
    let port = free_port();
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v1", false)));
    let xds_port = support::serve(&rt, &cache, recorder.clone());
    let _envoy = Envoy::start(xds_port, delta);

    wait_for("v1 served", || get(port, "/hello").is_some_and(|r| r.1 == "v1"));
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v2", false)));
    wait_for("v2 served", || get(port, "/hello").is_some_and(|r| r.1 == "v2"));

    // A configuration Envoy rejects: NACKed with Envoy's message; v2 stays.
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v3", true)));
    wait_for("a NACK", || !recorder.events().nacks.is_empty());
    let nack = recorder.events().nacks[0].clone();
    assert_eq!(nack.0, xds::types::ROUTE);
    assert!(
        nack.2.contains("program size"),
        "Envoy's message is carried: {}",
        nack.2
    );
    assert_eq!(
        get(port, "/hello").map(|r| r.1),
        Some("v2".into()),
        "the last good version keeps serving"
    );

    // Fixed: served and ACKed.
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v4", false)));
    wait_for("v4 served", || get(port, "/hello").is_some_and(|r| r.1 == "v4"));
    let acks = recorder.events().acks.clone();
    for t in [xds::types::CLUSTER, xds::types::LISTENER, xds::types::ROUTE] {
        assert!(acks.iter().any(|(ty, _)| ty == t), "no ACK for {t}: {acks:?}");
    }
}

#[test]
fn state_of_the_world_against_real_envoy() {
    run(false);
}

#[test]
fn delta_against_real_envoy() {
    run(true);
}
