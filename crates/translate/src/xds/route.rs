//! RouteConfigurations.

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use crate::hostname;
use crate::ir::{Chain, RouteStore};

pub fn build(chain: Chain, store: &mut RouteStore) -> RouteConfiguration {
    let virtual_hosts = chain
        .virtual_hosts
        .into_values()
        .map(|mut vh| {
            // Sort the small references, then move each ~2 KiB route once,
            // into a vector sized up front (no growth slack in the output).
            vh.routes.sort_by_key(|(order, _)| *order);
            let mut routes = Vec::with_capacity(vh.routes.len());
            routes.extend(vh.routes.iter().filter_map(|(_, r)| store.take(*r)));
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
