//! RouteConfigurations, assembled from routes already encoded (see
//! `encoded`).

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use super::encoded::{self, EncodedRouteConfiguration, HostParts};
use crate::hostname;
use crate::ir::{Chain, RouteStore};

pub fn build(chain: Chain, store: &mut RouteStore) -> EncodedRouteConfiguration {
    let hosts = chain
        .virtual_hosts
        .into_values()
        .map(|mut vh| {
            vh.routes.sort_by_key(|(order, _)| *order);
            HostParts {
                head: VirtualHost {
                    name: format!("{}/{}", chain.route_config, vh.hostname),
                    domains: hostname::envoy_domains(&vh.hostname),
                    ..Default::default()
                },
                routes: vh.routes.iter().filter_map(|(_, r)| store.take(*r)).collect(),
                tail: VirtualHost::default(),
            }
        })
        .collect();
    let head = RouteConfiguration {
        name: chain.route_config,
        ..Default::default()
    };
    let tail = RouteConfiguration {
        // Routes may name clusters that do not exist (invalid backends
        // answer 500 through cluster_not_found_response_code).
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    };
    encoded::assemble(&head, hosts, &tail)
}
