//! Envoy bootstraps.
//!
//! [`static_bootstrap`]: one Gateway's xDS with every resource inline, for
//! `portcullis translate -o bootstrap`, for the validation oracle
//! (`envoy --mode validate`) and for running Envoy without a control plane.
//! The xDS the translator produces refers to other resources through ADS;
//! this rewrites those references:
//!
//! - every HTTP connection manager (in any filter chain, including the
//!   listener's `default_filter_chain`) with `rds { route_config_name }`
//!   gets the `RouteConfiguration` of that name inline as `route_config`
//!   (an empty one of that name if the Gateway has none: it answers 404);
//! - every EDS cluster becomes `STATIC` (or `STRICT_DNS` when an endpoint
//!   address is not an IP literal) with the `ClusterLoadAssignment` whose
//!   `cluster_name` is the cluster's `eds_cluster_config.service_name` (or
//!   the cluster's name when that is empty) inline as `load_assignment` (an
//!   empty one when there is none: Envoy accepts a static cluster without
//!   endpoints);
//! - every `SdsSecretConfig` in a TLS context (downstream in listeners,
//!   upstream in clusters) loses its `sds_config`, so that it names a
//!   static secret of `static_resources.secrets`.
//!
//! [`ads_bootstrap`]: a dynamic bootstrap for an Envoy fed by portcullis's
//! ADS server (`portcullis bootstrap`).

use std::collections::HashMap;
use std::net::IpAddr;

use envoy_types::pb::envoy::config::bootstrap::v3::{Admin, Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiConfigSource, ApiVersion, ConfigSource, GrpcService,
    Http2ProtocolOptions, Node, SocketAddress, TransportSocket, address, api_config_source, config_source,
    grpc_service, socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, UpstreamTlsContext, common_tls_context, downstream_tls_context,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use envoy_types::pb::google::protobuf::{Any, Duration};
use envoy_types::util::pack_any;
use prost::{Message, Name};
use serde_json::{Value, json};

use super::OutputError;
use super::json::message_to_json;
use crate::GatewayXds;

/// The name of the ADS cluster in [`ads_bootstrap`].
pub const XDS_CLUSTER: &str = "xds_cluster";

/// The node cluster when none is given.
pub const DEFAULT_NODE_CLUSTER: &str = "portcullis";

/// Where Envoy's admin interface listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminAddress {
    pub address: String,
    pub port: u16,
}

impl AdminAddress {
    pub fn new(address: impl Into<String>, port: u16) -> Self {
        Self {
            address: address.into(),
            port,
        }
    }
}

/// Options of [`static_bootstrap`]. The default has no admin interface and
/// node cluster [`DEFAULT_NODE_CLUSTER`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootstrapOptions {
    /// `None`: no `admin` section.
    pub admin: Option<AdminAddress>,
    /// `node.cluster`; `None`: [`DEFAULT_NODE_CLUSTER`].
    pub node_cluster: Option<String>,
}

fn socket_address(host: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

fn admin(a: &AdminAddress) -> Admin {
    Admin {
        address: Some(socket_address(&a.address, a.port.into())),
        ..Default::default()
    }
}

/// Decodes `any` as `M` when it holds one (by type URL).
fn unpack<M: Message + Name + Default>(any: &Any) -> Option<M> {
    (any.type_url == M::type_url())
        .then(|| M::decode(any.value.as_slice()).ok())
        .flatten()
}

/// Decodes, rewrites and re-packs `any` when it holds an `M`; leaves it
/// untouched otherwise.
fn rewrite_any<M: Message + Name + Default>(any: &mut Any, f: impl FnOnce(&mut M)) {
    if let Some(mut m) = unpack::<M>(any) {
        f(&mut m);
        *any = pack_any(m);
    }
}

// ---- SDS → static secrets ----

fn strip_sds_common(ctx: &mut CommonTlsContext) {
    for s in &mut ctx.tls_certificate_sds_secret_configs {
        s.sds_config = None;
    }
    match &mut ctx.validation_context_type {
        Some(common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(s)) => {
            s.sds_config = None;
        }
        Some(common_tls_context::ValidationContextType::CombinedValidationContext(c)) => {
            if let Some(s) = &mut c.validation_context_sds_secret_config {
                s.sds_config = None;
            }
        }
        _ => {}
    }
}

fn strip_sds_transport_socket(ts: &mut TransportSocket) {
    let Some(transport_socket::ConfigType::TypedConfig(any)) = &mut ts.config_type else {
        return;
    };
    rewrite_any::<DownstreamTlsContext>(any, |d| {
        if let Some(c) = &mut d.common_tls_context {
            strip_sds_common(c);
        }
        if let Some(downstream_tls_context::SessionTicketKeysType::SessionTicketKeysSdsSecretConfig(s)) =
            &mut d.session_ticket_keys_type
        {
            s.sds_config = None;
        }
    });
    rewrite_any::<UpstreamTlsContext>(any, |u| {
        if let Some(c) = &mut u.common_tls_context {
            strip_sds_common(c);
        }
    });
}

// ---- RDS → inline route configurations ----

struct Inliner<'a> {
    routes: HashMap<&'a str, &'a crate::xds::encoded::EncodedRouteConfiguration>,
    assignments: HashMap<&'a str, &'a ClusterLoadAssignment>,
}

impl<'a> Inliner<'a> {
    fn new(gw: &'a GatewayXds) -> Self {
        // Names should be unique; should they not be, the first one wins.
        let mut routes = HashMap::new();
        for r in &gw.routes {
            routes.entry(r.name.as_str()).or_insert(r);
        }
        let mut assignments = HashMap::new();
        for a in &gw.endpoints {
            assignments.entry(a.cluster_name.as_str()).or_insert(&**a);
        }
        Self { routes, assignments }
    }

    fn hcm(&self, hcm: &mut HttpConnectionManager) {
        if let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = &hcm.route_specifier {
            let rc = self
                .routes
                .get(rds.route_config_name.as_str())
                .map(|r| r.decode())
                .unwrap_or_else(|| RouteConfiguration {
                    name: rds.route_config_name.clone(),
                    ..Default::default()
                });
            hcm.route_specifier = Some(http_connection_manager::RouteSpecifier::RouteConfig(rc));
        }
    }

    fn filter_chain(&self, fc: &mut FilterChain) {
        for f in &mut fc.filters {
            if let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type {
                rewrite_any::<HttpConnectionManager>(any, |h| self.hcm(h));
            }
        }
        if let Some(ts) = &mut fc.transport_socket {
            strip_sds_transport_socket(ts);
        }
    }

    fn listener(&self, l: &mut Listener) {
        for fc in l
            .filter_chains
            .iter_mut()
            .chain(l.default_filter_chain.iter_mut())
        {
            self.filter_chain(fc);
        }
    }

    fn cluster(&self, c: &mut Cluster) {
        let eds = matches!(
            c.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(t)) if t == cluster::DiscoveryType::Eds as i32
        );
        if eds {
            let service = c
                .eds_cluster_config
                .take()
                .map(|e| e.service_name)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| c.name.clone());
            let mut cla = self
                .assignments
                .get(service.as_str())
                .map(|a| (*a).clone())
                .unwrap_or_default();
            cla.cluster_name = c.name.clone();
            let t = if has_hostname(&cla) {
                cluster::DiscoveryType::StrictDns
            } else {
                cluster::DiscoveryType::Static
            };
            c.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(t as i32));
            c.load_assignment = Some(cla);
        }
        if let Some(ts) = &mut c.transport_socket {
            strip_sds_transport_socket(ts);
        }
        for m in &mut c.transport_socket_matches {
            if let Some(ts) = &mut m.transport_socket {
                strip_sds_transport_socket(ts);
            }
        }
    }
}

/// Whether an endpoint of `cla` is addressed by a name rather than an IP.
fn has_hostname(cla: &ClusterLoadAssignment) -> bool {
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(lb_endpoint::HostIdentifier::Endpoint(ep)) => ep.address.as_ref(),
            _ => None,
        })
        .filter_map(|a| match &a.address {
            Some(address::Address::SocketAddress(s)) => Some(s.address.as_str()),
            _ => None,
        })
        .any(|h| h.parse::<IpAddr>().is_err())
}

/// [`static_bootstrap`] as a proto (e.g. to build partial bootstraps).
pub fn static_bootstrap_proto(gw: &GatewayXds, node_id: &str, options: &BootstrapOptions) -> Bootstrap {
    let inliner = Inliner::new(gw);
    let mut listeners = gw.listeners.clone();
    for l in &mut listeners {
        inliner.listener(l);
    }
    let mut clusters: Vec<_> = gw.clusters.iter().map(|c| (**c).clone()).collect();
    for c in &mut clusters {
        inliner.cluster(c);
    }
    Bootstrap {
        node: Some(Node {
            id: node_id.into(),
            cluster: options
                .node_cluster
                .clone()
                .unwrap_or_else(|| DEFAULT_NODE_CLUSTER.into()),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources {
            listeners,
            clusters,
            secrets: gw.secrets.clone(),
        }),
        admin: options.admin.as_ref().map(admin),
        ..Default::default()
    }
}

/// A static Envoy bootstrap of one Gateway's xDS, every resource inline
/// (see the module documentation for the rewrite), as canonical proto-JSON.
pub fn try_static_bootstrap(
    gw: &GatewayXds,
    node_id: &str,
    options: &BootstrapOptions,
) -> Result<Value, OutputError> {
    message_to_json(&static_bootstrap_proto(gw, node_id, options))
}

/// [`try_static_bootstrap`] that never fails: when the bootstrap cannot be
/// rendered (an Any of a type unknown to the descriptor pool), the result is
/// `{"@error": "…"}`, which Envoy rejects.
pub fn static_bootstrap(gw: &GatewayXds, node_id: &str, options: &BootstrapOptions) -> Value {
    try_static_bootstrap(gw, node_id, options).unwrap_or_else(|e| json!({ "@error": e.to_string() }))
}

/// `{ ads: {}, resource_api_version: V3 }`.
fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

/// [`ads_bootstrap`] as a proto.
pub fn ads_bootstrap_proto(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
) -> Bootstrap {
    let http2 = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let discovery = if xds_host.parse::<IpAddr>().is_ok() {
        cluster::DiscoveryType::Static
    } else {
        cluster::DiscoveryType::StrictDns
    };
    let xds_cluster = Cluster {
        name: XDS_CLUSTER.into(),
        connect_timeout: Some(Duration { seconds: 5, nanos: 0 }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(discovery as i32)),
        typed_extension_protocol_options: [(HttpProtocolOptions::full_name(), pack_any(http2))]
            .into_iter()
            .collect(),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket_address(xds_host, xds_port.into())),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    Bootstrap {
        node: Some(Node {
            id: node_id.into(),
            cluster: node_cluster.into(),
            ..Default::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                set_node_on_first_message_only: true,
                ..Default::default()
            }),
            lds_config: Some(ads()),
            cds_config: Some(ads()),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources {
            clusters: vec![xds_cluster],
            ..Default::default()
        }),
        admin: admin_address.map(admin),
        ..Default::default()
    }
}

/// A dynamic bootstrap for an Envoy fed by portcullis over ADS (gRPC,
/// transport and resource API v3): a `STATIC` (`STRICT_DNS` for a host
/// name) HTTP/2 cluster [`XDS_CLUSTER`] to `xds_host:xds_port`, listeners
/// and clusters from ADS. `admin_address`: `None` for no admin interface.
pub fn try_ads_bootstrap(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
) -> Result<Value, OutputError> {
    message_to_json(&ads_bootstrap_proto(
        node_id,
        node_cluster,
        xds_host,
        xds_port,
        admin_address,
    ))
}

/// Files an Envoy presents and checks when it reaches the xDS server over
/// mutually authenticated TLS (Kubernetes mode's provisioned Envoys; see
/// ARCHITECTURE.md, "Kubernetes mode"). Paths are as the Envoy sees them
/// (the mounted Secret), read by Envoy at start and on file change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsClientTls {
    /// PEM client certificate chain (issued to this Envoy's Gateway).
    pub cert_chain_file: String,
    /// PEM private key of that certificate.
    pub private_key_file: String,
    /// PEM CA bundle the xDS server's certificate must chain to.
    pub ca_file: String,
    /// SNI sent and the DNS name the server's certificate must carry.
    pub server_name: String,
}

/// [`ads_bootstrap_proto`] whose ADS cluster speaks TLS with a client
/// certificate (`tls: None`: plaintext, as [`ads_bootstrap_proto`]).
pub fn ads_bootstrap_tls_proto(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
    tls: Option<&XdsClientTls>,
) -> Bootstrap {
    use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, TlsCertificate,
    };
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        SubjectAltNameMatcher, subject_alt_name_matcher,
    };
    use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
    let mut b = ads_bootstrap_proto(node_id, node_cluster, xds_host, xds_port, admin_address);
    let Some(tls) = tls else { return b };
    let file = |f: &str| DataSource {
        specifier: Some(data_source::Specifier::Filename(f.to_string())),
        ..Default::default()
    };
    let upstream = UpstreamTlsContext {
        sni: tls.server_name.clone(),
        common_tls_context: Some(CommonTlsContext {
            tls_certificates: vec![TlsCertificate {
                certificate_chain: Some(file(&tls.cert_chain_file)),
                private_key: Some(file(&tls.private_key_file)),
                ..Default::default()
            }],
            alpn_protocols: vec!["h2".into()],
            validation_context_type: Some(common_tls_context::ValidationContextType::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: Some(file(&tls.ca_file)),
                    match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                        san_type: subject_alt_name_matcher::SanType::Dns as i32,
                        matcher: Some(StringMatcher {
                            match_pattern: Some(string_matcher::MatchPattern::Exact(tls.server_name.clone())),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(cluster) = b
        .static_resources
        .as_mut()
        .and_then(|s| s.clusters.iter_mut().find(|c| c.name == XDS_CLUSTER))
    {
        cluster.transport_socket = Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(upstream))),
        });
    }
    b
}

/// [`ads_bootstrap_tls_proto`] rendered as JSON.
pub fn try_ads_bootstrap_tls(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
    tls: Option<&XdsClientTls>,
) -> Result<Value, OutputError> {
    message_to_json(&ads_bootstrap_tls_proto(
        node_id,
        node_cluster,
        xds_host,
        xds_port,
        admin_address,
        tls,
    ))
}

/// Names of the two secrets [`xds_client_sds`] defines.
pub const XDS_CLIENT_CERT_SECRET: &str = "xds_client_certificate";
pub const XDS_SERVER_CA_SECRET: &str = "xds_server_ca";
/// File names of [`xds_client_sds`]'s documents (Envoy takes one secret
/// per file).
pub const XDS_SDS_CERT_FILE: &str = "xds-sds-cert.json";
pub const XDS_SDS_CA_FILE: &str = "xds-sds-ca.json";

/// The file-based SDS documents (`DiscoveryResponse`s, JSON, one secret
/// each: [`XDS_SDS_CERT_FILE`], [`XDS_SDS_CA_FILE`]) that
/// [`ads_bootstrap_tls_sds_proto`] points at: the client certificate and
/// the server CA of `tls`, as files, with `watched_directory`, so Envoy
/// reads them again when that directory changes by a move (a Kubernetes
/// Secret volume swaps its `..data` link; a rename into it). Envoy never
/// reloads the plain file references of [`ads_bootstrap_tls_proto`]: a
/// rotated client certificate would then only be used after a restart.
pub fn xds_client_sds(tls: &XdsClientTls, watched_directory: &str) -> [(&'static str, Value); 2] {
    const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
    [
        (
            XDS_SDS_CERT_FILE,
            json!({ "resources": [{
                "@type": SECRET,
                "name": XDS_CLIENT_CERT_SECRET,
                "tls_certificate": {
                    "certificate_chain": { "filename": tls.cert_chain_file },
                    "private_key": { "filename": tls.private_key_file },
                    "watched_directory": { "path": watched_directory },
                },
            }]}),
        ),
        (
            XDS_SDS_CA_FILE,
            json!({ "resources": [{
                "@type": SECRET,
                "name": XDS_SERVER_CA_SECRET,
                "validation_context": {
                    "trusted_ca": { "filename": tls.ca_file },
                    "watched_directory": { "path": watched_directory },
                },
            }]}),
        ),
    ]
}

/// [`ads_bootstrap_tls_proto`] whose client certificate and server CA come
/// from file-based SDS (the documents of [`xds_client_sds`] in `sds_dir`,
/// read again when that directory changes — it is also the watched
/// directory, as when they come in the client Secret's volume): certificate
/// rotation without restarting Envoy. The server's DNS SAN check stays in
/// the bootstrap.
pub fn ads_bootstrap_tls_sds_proto(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
    tls: &XdsClientTls,
    sds_dir: &str,
) -> Bootstrap {
    use envoy_types::pb::envoy::config::core::v3::{PathConfigSource, WatchedDirectory};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, SdsSecretConfig, SubjectAltNameMatcher, subject_alt_name_matcher,
    };
    use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
    let mut b = ads_bootstrap_proto(node_id, node_cluster, xds_host, xds_port, admin_address);
    let source = |file: &str| ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::PathConfigSource(
            PathConfigSource {
                path: format!("{}/{file}", sds_dir.trim_end_matches('/')),
                watched_directory: Some(WatchedDirectory {
                    path: sds_dir.into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let sds = |name: &str, file: &str| SdsSecretConfig {
        name: name.into(),
        sds_config: Some(source(file)),
    };
    let upstream = UpstreamTlsContext {
        sni: tls.server_name.clone(),
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![sds(XDS_CLIENT_CERT_SECRET, XDS_SDS_CERT_FILE)],
            alpn_protocols: vec!["h2".into()],
            validation_context_type: Some(
                common_tls_context::ValidationContextType::CombinedValidationContext(
                    common_tls_context::CombinedCertificateValidationContext {
                        default_validation_context: Some(CertificateValidationContext {
                            match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                                san_type: subject_alt_name_matcher::SanType::Dns as i32,
                                matcher: Some(StringMatcher {
                                    match_pattern: Some(string_matcher::MatchPattern::Exact(
                                        tls.server_name.clone(),
                                    )),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }),
                        validation_context_sds_secret_config: Some(sds(
                            XDS_SERVER_CA_SECRET,
                            XDS_SDS_CA_FILE,
                        )),
                        ..Default::default()
                    },
                ),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(cluster) = b
        .static_resources
        .as_mut()
        .and_then(|s| s.clusters.iter_mut().find(|c| c.name == XDS_CLUSTER))
    {
        cluster.transport_socket = Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(upstream))),
        });
    }
    b
}

/// [`try_ads_bootstrap`]; only known types are involved, so rendering cannot
/// fail in practice (`{"@error": …}` if it ever did).
pub fn ads_bootstrap(
    node_id: &str,
    node_cluster: &str,
    xds_host: &str,
    xds_port: u16,
    admin_address: Option<&AdminAddress>,
) -> Value {
    try_ads_bootstrap(node_id, node_cluster, xds_host, xds_port, admin_address)
        .unwrap_or_else(|e| json!({ "@error": e.to_string() }))
}
