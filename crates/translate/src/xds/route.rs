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
            // An Envoy Route is ~2 KiB: sort indices, then move each route
            // once (sorting the pairs themselves moved every route log n
            // times and dominated translation time).
            let mut order: Vec<usize> = (0..vh.routes.len()).collect();
            order.sort_by(|&a, &b| vh.routes[a].0.cmp(&vh.routes[b].0));
            let mut slots: Vec<Option<_>> = vh.routes.into_iter().map(|(_, r)| Some(r)).collect();
            let routes = order.into_iter().filter_map(|i| slots[i].take()).collect();
            VirtualHost {
                name: format!("{}/{}", chain.route_config, vh.hostname),
                domains: hostname::envoy_domains(&vh.hostname),
                routes,
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
