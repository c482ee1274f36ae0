//! Clusters (EDS over ADS) and their ClusterLoadAssignments.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, Http2ProtocolOptions, SocketAddress, address, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use envoy_types::pb::google::protobuf::Duration;
use envoy_types::util::pack_any;

use crate::backend::ClusterSpec;

/// The cluster and its ClusterLoadAssignment (of `endpoints`, resolved for
/// it: `crate::endpoints`).
pub fn build(spec: &ClusterSpec, endpoints: &[(String, u32)]) -> (Cluster, ClusterLoadAssignment) {
    (envoy_cluster(spec), assignment(spec, endpoints))
}

fn envoy_cluster(spec: &ClusterSpec) -> Cluster {
    let mut c = Cluster {
        name: spec.name.clone(),
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(super::ads()),
            service_name: spec.name.clone(),
        }),
        ..Default::default()
    };
    if spec.http2 {
        let opts = HttpProtocolOptions {
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
        c.typed_extension_protocol_options.insert(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".into(),
            pack_any(opts),
        );
    }
    c
}

/// The ClusterLoadAssignment of `spec` with `endpoints`: all an
/// EndpointSlice edit changes (`incremental/endpoints.rs`).
pub fn assignment(spec: &ClusterSpec, endpoints: &[(String, u32)]) -> ClusterLoadAssignment {
    let lb_endpoints = endpoints
        .iter()
        .map(|(ip, port)| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: ip.clone(),
                        port_specifier: Some(socket_address::PortSpecifier::PortValue(*port)),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: spec.name.clone(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    }
}
