//! RouteConfigurations.

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use crate::hostname;
use crate::ir::Chain;

pub fn build(chain: Chain) -> RouteConfiguration {
    let virtual_hosts = chain
        .virtual_hosts
        .into_values()
        .map(|vh| {
            let mut routes = vh.routes;
            routes.sort_by(|a, b| a.0.cmp(&b.0));
            VirtualHost {
                name: format!("{}/{}", chain.route_config, vh.hostname),
                domains: hostname::envoy_domains(&vh.hostname),
                routes: routes.into_iter().map(|(_, r)| r).collect(),
                ..Default::default()
            }
        })
        .collect();
    RouteConfiguration {
        name: chain.route_config.clone(),
        virtual_hosts,
        // Routes may name clusters that do not exist (invalid backends
        // answer 500 through cluster_not_found_response_code).
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}
