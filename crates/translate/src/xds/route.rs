//! RouteConfigurations, assembled from routes already encoded (see
//! `encoded`), with the Gateway- and listener-scope policies placed once
//! per scope (`ir::Scope`, decided by `policy::scope`): on the route
//! configuration or on a virtual host, never copied into routes.

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use super::canonical;
use super::encoded::{self, EncodedRouteConfiguration, HostParts};
use crate::hostname;
use crate::ir::{Chain, RouteStore};
use crate::policy::apply;
use crate::replacement::scope as fence;

pub fn build(chain: Chain, store: &mut RouteStore) -> EncodedRouteConfiguration {
    let config_scope = chain.scope;
    let config_retry = config_scope.features.as_ref().and_then(|f| f.retry.clone());
    let mut header_edits = config_scope.features.as_deref().is_some_and(apply::edits_headers);
    // A listener's policy is the same on each of its hosts: its fields are
    // built once per listener and cloned (`Arc` identity).
    let mut host_tails: Vec<(*const crate::policy::Features, VirtualHost)> = Vec::new();
    // A fenced host switches off what the configuration's policy enables
    // (it must answer the 500, not that policy's 403 or 429).
    let config_filters: Vec<String> = config_scope
        .features
        .as_deref()
        .map(|f| apply::per_filter(f).into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let hosts: Vec<HostParts> = chain
        .virtual_hosts
        .into_values()
        .map(|mut vh| {
            let name = format!("{}/{}", chain.route_config, vh.hostname);
            let domains = hostname::envoy_domains(&vh.hostname);
            if config_scope.fenced || vh.scope.fenced {
                // Taken to free the store; a fenced scope serves none.
                for (_, r) in &vh.routes {
                    store.take(*r);
                }
                let fenced = fence::fenced_host(&name, domains);
                let mut tail = VirtualHost::default();
                if !config_scope.fenced {
                    crate::replacement::disable_filters(
                        &mut tail.typed_per_filter_config,
                        config_filters.iter().cloned(),
                    );
                }
                return HostParts {
                    head: VirtualHost {
                        name: fenced.name,
                        domains: fenced.domains,
                        ..Default::default()
                    },
                    routes: fenced.routes.iter().map(canonical::route).collect(),
                    tail,
                };
            }
            vh.routes.sort_by_key(|(order, _)| *order);
            let mut tail = VirtualHost::default();
            if let Some(f) = &vh.scope.features {
                header_edits |= apply::edits_headers(f);
                let key = std::sync::Arc::as_ptr(f);
                tail = match host_tails.iter().find(|(k, _)| *k == key) {
                    Some((_, t)) => t.clone(),
                    None => {
                        apply::apply_host(f, &mut tail);
                        host_tails.push((key, tail.clone()));
                        tail
                    }
                };
            }
            if tail.retry_policy.is_none() {
                tail.retry_policy.clone_from(&config_retry);
            }
            HostParts {
                head: VirtualHost {
                    name,
                    domains,
                    ..Default::default()
                },
                routes: vh.routes.iter().filter_map(|(_, r)| store.take(*r)).collect(),
                tail,
            }
        })
        .collect();
    let head = RouteConfiguration {
        name: chain.route_config.clone(),
        ..Default::default()
    };
    let mut tail = RouteConfiguration {
        // Routes may name clusters that do not exist (invalid backends
        // answer 500 through cluster_not_found_response_code).
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    };
    if config_scope.fenced {
        let host = fence::fenced_config_host(&chain.route_config);
        let hosts = vec![HostParts {
            head: VirtualHost {
                name: host.name,
                domains: host.domains,
                ..Default::default()
            },
            routes: host.routes.iter().map(canonical::route).collect(),
            tail: VirtualHost::default(),
        }];
        return encoded::assemble(&head, hosts, &tail);
    }
    if let Some(f) = &config_scope.features {
        apply::apply_config(f, &mut tail);
    }
    // Envoy applies header edits route, then host, then configuration, so
    // by default the least specific level wins a header; policies follow
    // rule > route > listener > Gateway.
    tail.most_specific_header_mutations_wins = header_edits;
    encoded::assemble(&head, hosts, &tail)
}
