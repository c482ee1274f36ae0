//! The example extension server, called through the client, and what it
//! produces judged by the real Envoy (`envoy --mode validate`): its
//! basic-auth listener is accepted, its "NACK" reply is refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{chain, manager, temp_dir};
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use envoy_types::pb::google::protobuf::Any;
use extension::example::{BASIC_AUTH_FILTER, Behaviour, ExampleExtension, ROUTE_HEADER};
use prost::{Message, Name};
use translate::extension::{ExtensionResource, HookFailure, Hooks, ListenerCall, RouteCall};

/// htpasswd for alice / "password" (`{SHA}` = base64 of SHA-1).
const ALICE: &str = "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=";

fn pack<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn route(name: &str) -> Route {
    Route {
        name: name.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 200,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A listener with one HTTP connection manager serving `routes` inline.
fn listener(routes: Vec<Route>) -> Listener {
    let hcm = HttpConnectionManager {
        stat_prefix: "http".into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(
            RouteConfiguration {
                name: "rc".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "vh".into(),
                    domains: vec!["*".into()],
                    routes,
                    ..Default::default()
                }],
                ..Default::default()
            },
        )),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack(&Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: "l".into(),
        address: Some(Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: "127.0.0.1".into(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(10080)),
                ..Default::default()
            })),
        }),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(pack(&hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn envoy_accepts(l: &Listener) -> Result<(), String> {
    let json = translate::output::message_to_json(l).map_err(|e| e.to_string())?;
    testkit::envoy::validate(&serde_json::json!({ "static_resources": { "listeners": [json] } }))
}

fn http_filters(l: &Listener) -> Vec<String> {
    let Some(filter::ConfigType::TypedConfig(any)) = &l.filter_chains[0].filters[0].config_type else {
        panic!("typed config")
    };
    HttpConnectionManager::decode(any.value.as_slice())
        .expect("hcm")
        .http_filters
        .into_iter()
        .map(|f| f.name)
        .collect()
}

fn basic_auth_resource() -> ExtensionResource {
    let json = serde_json::json!({
        "apiVersion": "example.portcullis.dev/v1",
        "kind": "BasicAuth",
        "metadata": {"name": "users", "namespace": "default"},
        "spec": {"users": [ALICE]},
    });
    ExtensionResource {
        unstructured_bytes: Arc::from(json.to_string().into_bytes()),
    }
}

fn served(behaviour: Behaviour) -> (common::Server, ExampleExtension) {
    let ext = ExampleExtension::new(behaviour);
    let dir = temp_dir(&format!("example-{}", common::free_port()));
    // Over a unix socket, as the example's `--listen unix:` serves.
    let server = common::serve_unix(ext.clone(), &dir.join("ext.sock"));
    (server, ext)
}

fn route_call(name: &str) -> RouteCall {
    RouteCall {
        route: route(name),
        hostnames: vec!["www.example.com".into()],
        extension_resources: vec![],
        extension_policies: vec![],
    }
}

#[test]
fn adds_the_route_header() {
    let (server, _) = served(Behaviour::default());
    let c = chain(vec![manager("example", &server.address)]);
    let r = c.post_route_modify(vec![route_call("httproute/default/app/rule/0")]);
    let r = r[0].as_ref().expect("ok").as_ref().expect("modified");
    let h = r.response_headers_to_add[0].header.as_ref().expect("header");
    assert_eq!(h.key, ROUTE_HEADER);
    assert_eq!(h.value, "httproute/default/app/rule/0");
    envoy_accepts(&listener(vec![r.clone()])).expect("Envoy accepts the modified route");
}

#[test]
fn adds_a_basic_auth_filter_envoy_accepts() {
    let (server, ext) = served(Behaviour::default());
    let c = chain(vec![manager("example", &server.address)]);
    let original = listener(vec![route("r")]);
    envoy_accepts(&original).expect("the test listener itself is valid");

    // Without a BasicAuth resource: unchanged.
    let r = c.post_http_listener_modify(vec![ListenerCall {
        listener: original.clone(),
        extension_resources: vec![],
    }]);
    assert!(matches!(r[0], Ok(None)), "{r:?}");

    let r = c.post_http_listener_modify(vec![ListenerCall {
        listener: original,
        extension_resources: vec![basic_auth_resource()],
    }]);
    let l = r[0].as_ref().expect("ok").as_ref().expect("modified");
    assert_eq!(http_filters(l), [BASIC_AUTH_FILTER, "envoy.filters.http.router"]);
    envoy_accepts(l).expect("the real Envoy accepts the basic_auth listener");
    assert_eq!(ext.received.listener.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn nack_option_replies_what_envoy_refuses() {
    let (server, _) = served(Behaviour {
        nack_route: Some("bad".into()),
        ..Default::default()
    });
    let c = chain(vec![manager("example", &server.address)]);
    let r = c.post_route_modify(vec![route_call("good"), route_call("bad")]);
    let good = r[0].as_ref().expect("ok").clone().expect("modified");
    let bad = r[1].as_ref().expect("ok").clone().expect("modified");
    envoy_accepts(&listener(vec![good])).expect("the other route is fine");
    let e = envoy_accepts(&listener(vec![bad])).expect_err("Envoy refuses the regex \"(\"");
    // RE2's complaint about the pattern.
    assert!(e.contains("missing )"), "{e}");
}

#[test]
fn sleep_option_runs_past_the_deadline_for_matching_routes_only() {
    let (server, _) = served(Behaviour {
        sleep_route: Some("slow".into()),
        sleep: Duration::from_secs(5),
        ..Default::default()
    });
    let mut m = manager("example", &server.address);
    // "fast" must beat the deadline even on a loaded machine; "slow" (5 s)
    // still misses it.
    m.timeout = Duration::from_secs(2);
    let c = chain(vec![m]);
    let r = c.post_route_modify(vec![route_call("fast"), route_call("slow")]);
    assert!(matches!(r[0], Ok(Some(_))), "{r:?}");
    assert!(
        matches!(
            r[1].as_ref().expect_err("deadline").failure,
            HookFailure::Deadline { .. }
        ),
        "{r:?}"
    );
}
