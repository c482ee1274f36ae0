//! State-of-the-world RDS sends only the route configurations that changed
//! (ARCHITECTURE.md, "xds"): checked on the wire with a raw ADS client,
//! and through the real Envoy, where the difference is observable — a
//! route configuration Envoy rejected is not sent again with every later
//! change of its neighbours, so those changes are ACKed instead of NACKed
//! again.

mod support;

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use prost::Message;
use support::{Envoy, Recorder, body, direct, free_port, poison, wait_for};
use translate::GatewayXds;

/// A Gateway with two HTTP listeners, so two route configurations; each
/// answers `/hello` with its body, and `poisoned` adds a route Envoy
/// refuses to the second.
fn config(ports: [u16; 2], bodies: [&str; 2], poisoned: bool) -> GatewayXds {
    let mut gw = support::gateway(&ports);
    // The translator names a route configuration by its port.
    let names = ports.map(|port| {
        gw.routes
            .iter()
            .map(|r| r.name.clone())
            .find(|n| n.ends_with(&format!("/{port}")))
            .expect("a route configuration per port")
    });
    gw.routes = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let mut routes = vec![direct("/hello", bodies[i])];
            if poisoned && i == 1 {
                routes.push(poison());
            }
            support::route_configuration(name, routes)
        })
        .collect();
    gw
}

fn route_names(gw: &GatewayXds) -> Vec<String> {
    gw.routes.iter().map(|r| r.name.clone()).collect()
}

fn request(type_url: &str, names: &[String], ack: Option<&DiscoveryResponse>) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: "t/gw".into(),
            ..Default::default()
        }),
        type_url: type_url.into(),
        resource_names: names.to_vec(),
        version_info: ack.map(|r| r.version_info.clone()).unwrap_or_default(),
        response_nonce: ack.map(|r| r.nonce.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

fn names_in(response: &DiscoveryResponse) -> Vec<String> {
    let mut names: Vec<String> = response
        .resources
        .iter()
        .map(|any| {
            RouteConfiguration::decode(any.value.as_slice())
                .expect("a RouteConfiguration")
                .name
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_pushed_change_carries_only_the_changed_route_configuration() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cache = xds::SnapshotCache::new();
    let ports = [free_port(), free_port()];
    let first = config(ports, ["a1", "b1"], false);
    let mut names = route_names(&first);
    names.sort();
    cache.set("t/gw", xds::Snapshot::from_gateway(&first));
    let xds_port = support::serve(&rt, &cache, Recorder::default());

    rt.block_on(async {
        let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://127.0.0.1:{xds_port}"))
            .await
            .expect("connect");
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let mut responses = client
            .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("stream")
            .into_inner();
        let next = async |responses: &mut tonic::Streaming<DiscoveryResponse>| {
            tokio::time::timeout(Duration::from_secs(10), responses.message())
                .await
                .expect("a response in time")
                .expect("no stream error")
                .expect("the stream is open")
        };

        tx.send(request(xds::types::ROUTE, &names, None))
            .await
            .expect("send");
        let all = next(&mut responses).await;
        assert_eq!(
            names_in(&all),
            names,
            "a first request gets every requested configuration"
        );
        tx.send(request(xds::types::ROUTE, &names, Some(&all)))
            .await
            .expect("ack");

        // The second listener's routes change: only its configuration is sent.
        cache.set(
            "t/gw",
            xds::Snapshot::from_gateway(&config(ports, ["a1", "b2"], false)),
        );
        let changed = next(&mut responses).await;
        let second = route_names(&config(ports, ["a1", "b2"], false))
            .into_iter()
            .find(|n| n.ends_with(&ports[1].to_string()))
            .expect("the second listener's route configuration");
        assert_eq!(names_in(&changed), vec![second.clone()]);
        assert_ne!(
            changed.version_info, all.version_info,
            "the type's version moves on"
        );
        tx.send(request(xds::types::ROUTE, &names, Some(&changed)))
            .await
            .expect("ack");

        // A changed subscription is answered in full again.
        tx.send(request(
            xds::types::ROUTE,
            std::slice::from_ref(&second),
            Some(&changed),
        ))
        .await
        .expect("resubscribe");
        let narrowed = next(&mut responses).await;
        assert_eq!(names_in(&narrowed), vec![second]);
        tx.send(request(xds::types::ROUTE, &names, Some(&narrowed)))
            .await
            .expect("resubscribe");
        let widened = next(&mut responses).await;
        assert_eq!(names_in(&widened), names, "both again: the subscription changed");
    });
}

#[test]
fn a_rejected_configuration_is_not_resent_with_its_neighbours_changes() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cache = xds::SnapshotCache::new();
    let recorder = Recorder::default();
    let ports = [free_port(), free_port()];
    cache.set(
        "t/gw",
        xds::Snapshot::from_gateway(&config(ports, ["a1", "b1"], false)),
    );
    let xds_port = support::serve(&rt, &cache, recorder.clone());

    let _envoy = Envoy::start(xds_port, false);
    wait_for("both served", || {
        body(ports[0], "/hello").as_deref() == Some("a1") && body(ports[1], "/hello").as_deref() == Some("b1")
    });

    // The second configuration is rejected: one NACK; it keeps serving b1.
    cache.set(
        "t/gw",
        xds::Snapshot::from_gateway(&config(ports, ["a1", "b2"], true)),
    );
    wait_for("a NACK", || !recorder.events().nacks.is_empty());
    assert_eq!(body(ports[1], "/hello").as_deref(), Some("b1"));

    // Its neighbour changes twice: each change is served and ACKed; the
    // rejected configuration is not sent again with it, so no more NACKs.
    for text in ["a2", "a3"] {
        let acks_before = recorder.events().acks.len();
        cache.set(
            "t/gw",
            xds::Snapshot::from_gateway(&config(ports, [text, "b2"], true)),
        );
        wait_for("the neighbour's change served", || {
            body(ports[0], "/hello").as_deref() == Some(text)
        });
        wait_for("its ACK", || {
            let events = recorder.events();
            events.acks[acks_before..]
                .iter()
                .any(|(t, _)| t == xds::types::ROUTE)
        });
    }
    let nacks: Vec<String> = recorder.events().nacks.iter().map(|n| n.0.clone()).collect();
    assert_eq!(
        nacks,
        vec![xds::types::ROUTE.to_string()],
        "one NACK, not one per later change"
    );
    assert_eq!(
        body(ports[1], "/hello").as_deref(),
        Some("b1"),
        "the last good version keeps serving"
    );

    // Fixed: served.
    cache.set(
        "t/gw",
        xds::Snapshot::from_gateway(&config(ports, ["a3", "b3"], false)),
    );
    wait_for("the fix served", || {
        body(ports[1], "/hello").as_deref() == Some("b3")
    });
}
