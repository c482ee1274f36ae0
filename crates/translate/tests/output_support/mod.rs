//! A small hand-built `GatewayXds`, shaped the way the translator shapes
//! its output (everything referenced through ADS), for the `output_*` tests.
#![allow(dead_code)]

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, DataSource, SocketAddress, TransportSocket,
    address, config_source, data_source, socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route,
    route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::Duration;
use envoy_types::util::pack_any;
use translate::GatewayXds;

pub const CERT_PEM: &str = include_str!("../data/output-tls.crt");
pub const KEY_PEM: &str = include_str!("../data/output-tls.key");

pub const REPLACED_BODY: &str = "invalid route configuration detected and replaced with a direct response.";

pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

pub fn socket(host: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

pub fn hcm(route_config_name: &str) -> Filter {
    let hcm = HttpConnectionManager {
        stat_prefix: "test".into(),
        // Virtual host domains are matched against the Host header
        // including its port unless the port is stripped.
        strip_port_mode: Some(http_connection_manager::StripPortMode::StripAnyHostPort(true)),
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: route_config_name.into(),
        })),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
    }
}

pub fn downstream_tls(secret_names: &[&str]) -> TransportSocket {
    let tls = DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_sds_secret_configs: secret_names
                .iter()
                .map(|n| SdsSecretConfig {
                    name: (*n).into(),
                    sds_config: Some(ads()),
                })
                .collect(),
            alpn_protocols: vec!["h2".into(), "http/1.1".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(tls))),
    }
}

pub fn http_listener(name: &str, port: u32, route_config: &str) -> Listener {
    Listener {
        name: name.into(),
        address: Some(socket("127.0.0.1", port)),
        filter_chains: vec![FilterChain {
            filters: vec![hcm(route_config)],
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn https_listener(name: &str, port: u32) -> Listener {
    let chain = |server: &str, route_config: &str, secret: &str| FilterChain {
        filter_chain_match: Some(FilterChainMatch {
            server_names: vec![server.into()],
            ..Default::default()
        }),
        filters: vec![hcm(route_config)],
        transport_socket: Some(downstream_tls(&[secret])),
        ..Default::default()
    };
    Listener {
        name: name.into(),
        address: Some(socket("127.0.0.1", port)),
        listener_filters: vec![ListenerFilter {
            name: "envoy.filters.listener.tls_inspector".into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(pack_any(
                TlsInspector::default(),
            ))),
            ..Default::default()
        }],
        filter_chains: vec![
            chain("www.example.com", "default/gw/443/www", "default/www-cert"),
            chain("api.example.com", "default/gw/443/api", "default/api-cert"),
        ],
        // No RouteConfiguration of this name exists: the static bootstrap
        // inlines an empty one.
        default_filter_chain: Some(FilterChain {
            filters: vec![hcm("default/gw/443/fallback")],
            transport_socket: Some(downstream_tls(&["default/www-cert"])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn prefix_route(name: &str, prefix: &str, cluster: &str) -> Route {
    Route {
        name: name.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.into())),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

pub fn direct_500(name: &str, prefix: &str) -> Route {
    Route {
        name: name.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 500,
            body: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(REPLACED_BODY.into())),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

pub fn regex_route(name: &str, regex: &str, cluster: &str) -> Route {
    Route {
        name: name.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: regex.into(),
                ..Default::default()
            })),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

pub fn route_config(name: &str, domains: &[&str], routes: Vec<Route>) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: format!("{name}/vh"),
            domains: domains.iter().map(|d| (*d).into()).collect(),
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: name.into(),
        }),
        ..Default::default()
    }
}

pub fn assignment(cluster: &str, endpoints: &[(&str, u32)]) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: endpoints
                .iter()
                .map(|(host, port)| LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket(host, *port)),
                        ..Default::default()
                    })),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn tls_secret(name: &str) -> Secret {
    let inline = |s: &str| DataSource {
        specifier: Some(data_source::Specifier::InlineString(s.into())),
        ..Default::default()
    };
    Secret {
        name: name.into(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(CERT_PEM)),
            private_key: Some(inline(KEY_PEM)),
            ..Default::default()
        })),
    }
}

pub const BACKEND: &str = "default/backend/8080";
pub const NO_ENDPOINTS: &str = "default/no-endpoints/80";
pub const BY_NAME: &str = "default/by-name/80";

/// An HTTP listener on `http_port`, an HTTPS listener on `https_port` with
/// two SNI filter chains and a default chain, three route configurations,
/// three EDS clusters (one on 127.0.0.1:`backend_port`, one without a
/// ClusterLoadAssignment, one addressed by host name), two TLS secrets.
pub fn sample_with_ports(http_port: u32, https_port: u32, backend_port: u32) -> GatewayXds {
    GatewayXds {
        listeners: vec![
            http_listener("default/gw/80", http_port, "default/gw/80"),
            https_listener("default/gw/443", https_port),
        ],
        routes: [
            route_config(
                "default/gw/80",
                &["*"],
                vec![
                    direct_500("replaced", "/replaced"),
                    prefix_route("api", "/api", BACKEND),
                    prefix_route("empty", "/empty", NO_ENDPOINTS),
                    prefix_route("named", "/named", BY_NAME),
                ],
            ),
            route_config(
                "default/gw/443/www",
                &["www.example.com"],
                vec![prefix_route("www", "/", BACKEND)],
            ),
            route_config(
                "default/gw/443/api",
                &["api.example.com"],
                vec![direct_500("api", "/")],
            ),
        ]
        .iter()
        .map(Into::into)
        .collect(),
        clusters: vec![
            eds_cluster(BACKEND).into(),
            eds_cluster(NO_ENDPOINTS).into(),
            eds_cluster(BY_NAME).into(),
        ],
        endpoints: vec![
            assignment(BACKEND, &[("127.0.0.1", backend_port)]).into(),
            assignment(BY_NAME, &[("localhost", backend_port)]).into(),
        ],
        secrets: vec![tls_secret("default/www-cert"), tls_secret("default/api-cert")],
    }
}

pub fn sample() -> GatewayXds {
    sample_with_ports(10080, 10443, 18080)
}
