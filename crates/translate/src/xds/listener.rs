//! Listeners: one per port, an HTTP connection manager per filter chain.

use envoy_types::pb::envoy::config::core::v3::{
    Address, SocketAddress, TransportSocket, address, socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, TlsParameters, tls_parameters,
};
use envoy_types::util::pack_any;

use crate::ir::{Chain, Gateway, Port};
use crate::listener::Protocol;

/// The chain's HTTP filters in their fixed order (`policy` docs), then
/// the router. A filter only runs where a route configures it: CORS, RBAC
/// and local rate limit do nothing without per-route config, and ext_authz
/// filters are disabled until a route switches them on.
fn http_filters(gw: &Gateway, chain: &Chain) -> Vec<HttpFilter> {
    use crate::policy::{CORS_FILTER, EXT_AUTHZ_FILTER_PREFIX, LOCAL_RATE_LIMIT_FILTER, RBAC_FILTER};
    use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
    use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit;
    use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac;
    let typed = |name: &str, any| HttpFilter {
        name: name.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any)),
        ..Default::default()
    };
    let mut out = Vec::new();
    let used = &chain.http_filters;
    if used.contains(CORS_FILTER) {
        out.push(typed(CORS_FILTER, pack_any(Cors::default())));
    }
    for name in used.iter().filter(|n| n.starts_with(EXT_AUTHZ_FILTER_PREFIX)) {
        if let Some(config) = gw.ext_authz.get(name) {
            let mut f = typed(name, pack_any(config.clone()));
            f.disabled = true;
            out.push(f);
        }
    }
    if used.contains(RBAC_FILTER) {
        out.push(typed(RBAC_FILTER, pack_any(Rbac::default())));
    }
    if used.contains(LOCAL_RATE_LIMIT_FILTER) {
        out.push(typed(
            LOCAL_RATE_LIMIT_FILTER,
            pack_any(LocalRateLimit {
                stat_prefix: "http_local_rate_limiter".into(),
                ..Default::default()
            }),
        ));
    }
    out.push(typed("envoy.filters.http.router", pack_any(Router::default())));
    out
}

/// Every HCM portcullis generates (HTTP and HTTPS, xDS and static
/// bootstrap, which keeps the HCM and only inlines its routes) normalizes
/// the request path before any HTTP filter or routing sees it, as Envoy's
/// edge-proxy best practices recommend: RFC 3986 normalization (`.` and `..`
/// segments resolved, percent-encoded unreserved characters decoded), adjacent
/// slashes merged, and a path with an escaped slash (`%2F`, `%5C`) answered
/// with a redirect to its unescaped form, so that route matching, guards,
/// per-route policies and the upstream all see one spelling of the path: a
/// fenced `/admin` cannot be reached as `/./admin`, `//admin` or `/%61dmin`
/// (README, "Path normalization"). Case is not folded: Gateway API paths are
/// case-sensitive. A trailing dot in the Host is stripped for the same
/// reason.
fn hcm(gw: &Gateway, chain: &Chain, stat_prefix: &str) -> Filter {
    let hcm = HttpConnectionManager {
        stat_prefix: stat_prefix.into(),
        normalize_path: Some(envoy_types::pb::google::protobuf::BoolValue { value: true }),
        merge_slashes: true,
        path_with_escaped_slashes_action:
            http_connection_manager::PathWithEscapedSlashesAction::UnescapeAndRedirect as i32,
        // `Host: a.example.com.` is the same name as `a.example.com`: without
        // this it matches no host's domains and falls to a wildcard or `*`
        // host, past the fences of its own.
        strip_trailing_host_dot: true,
        codec_type: http_connection_manager::CodecType::Auto as i32,
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(super::ads()),
            route_config_name: chain.route_config.clone(),
        })),
        http_filters: http_filters(gw, chain),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
    }
}

pub fn build(gw: &Gateway, port: i32, p: &Port, listener_address: &str) -> Listener {
    let name = crate::naming::listener(&gw.namespace, &gw.name, port);
    let stat_prefix = format!("{}-{}-{}", gw.namespace, gw.name, port);
    let mut l = Listener {
        name,
        address: Some(Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: listener_address.into(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(port.unsigned_abs())),
                ..Default::default()
            })),
        }),
        ..Default::default()
    };
    match p.protocol {
        Protocol::Http => {
            l.filter_chains = p
                .chains
                .iter()
                .map(|c| FilterChain {
                    filters: vec![hcm(gw, c, &stat_prefix)],
                    ..Default::default()
                })
                .collect();
        }
        Protocol::Https => {
            l.listener_filters.push(ListenerFilter {
                name: "envoy.filters.listener.tls_inspector".into(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(pack_any(
                    TlsInspector::default(),
                ))),
                ..Default::default()
            });
            l.filter_chains = p
                .chains
                .iter()
                .map(|c| {
                    let tls = DownstreamTlsContext {
                        common_tls_context: Some(CommonTlsContext {
                            tls_certificate_sds_secret_configs: c
                                .certificates
                                .iter()
                                .map(|n| SdsSecretConfig {
                                    name: n.clone(),
                                    sds_config: Some(super::ads()),
                                })
                                .collect(),
                            alpn_protocols: vec!["h2".into(), "http/1.1".into()],
                            tls_params: c.tls13_only.then(|| TlsParameters {
                                tls_minimum_protocol_version: tls_parameters::TlsProtocol::TlSv13 as i32,
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    FilterChain {
                        filter_chain_match: (!c.server_names.is_empty()).then(|| FilterChainMatch {
                            server_names: c.server_names.clone(),
                            ..Default::default()
                        }),
                        filters: vec![hcm(gw, c, &stat_prefix)],
                        transport_socket: Some(TransportSocket {
                            name: "envoy.transport_sockets.tls".into(),
                            config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(tls))),
                        }),
                        ..Default::default()
                    }
                })
                .collect();
        }
    }
    l
}
