//! RouteConfigurations, assembled from routes already encoded (see
//! `encoded`), with the Gateway- and listener-scope policies placed once
//! per scope (`ir::Scope`, decided by `policy::scope`): on the route
//! configuration or on a virtual host, never copied into routes.
//!
//! With a [`ConfigMemo`] (the incremental translator's, ARCHITECTURE.md §7),
//! a virtual host assembled from the very same routes (the same shared
//! bytes, `ir::RouteBytes`, compared by pointer), the same listener policy
//! and the same configuration retry policy as last time is not encoded
//! again: its payload is copied out of the previous configuration's bytes.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use super::canonical;
use super::encoded::{self, EncodedRouteConfiguration, Host, HostParts};
use crate::hostname;
use crate::ir::{Chain, RouteBytes, RouteStore};
use crate::policy::{Features, apply};
use crate::replacement::scope as fence;

/// One route configuration as last assembled, for the next assembly to
/// splice from: the configuration (its bytes shared with the output) and,
/// per virtual host assembled from routes (fenced hosts are always built),
/// what it was assembled from and where its payload lies in those bytes.
#[derive(Default)]
pub struct ConfigMemo {
    config: Option<EncodedRouteConfiguration>,
    hosts: HashMap<String, (HostKey, Range<usize>)>,
    /// In the assembly that made this memo: hosts spliced, hosts encoded.
    pub spliced: usize,
    pub encoded: usize,
}

/// Everything a non-fenced virtual host's bytes are made of besides its
/// name (the memo's key, which also gives its domains): its routes in
/// order (shared bytes: equal when the same allocation — the memo holds
/// them, so an address cannot be reused by another route meanwhile), its
/// listener's policy and the configuration's retry policy (its tail).
struct HostKey {
    routes: Vec<RouteBytes>,
    features: Option<Arc<Features>>,
    retry: Option<RetryPolicy>,
}

impl HostKey {
    fn same(
        &self,
        routes: &[RouteBytes],
        features: Option<&Arc<Features>>,
        retry: Option<&RetryPolicy>,
    ) -> bool {
        self.routes.len() == routes.len()
            && self.routes.iter().zip(routes).all(|(a, b)| Arc::ptr_eq(a, b))
            && match (self.features.as_ref(), features) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || **a == **b,
                _ => false,
            }
            && self.retry.as_ref() == retry
    }
}

pub fn build(chain: Chain, store: &mut RouteStore) -> EncodedRouteConfiguration {
    build_memo(chain, store, None, false).0
}

/// [`build`], splicing the virtual hosts `prior` holds unchanged; with
/// `keep`, also returns the memo of this assembly.
pub fn build_memo(
    chain: Chain,
    store: &mut RouteStore,
    prior: Option<&ConfigMemo>,
    keep: bool,
) -> (EncodedRouteConfiguration, Option<ConfigMemo>) {
    let prior_bytes: Option<&[u8]> = prior.and_then(|p| p.config.as_ref()).map(|c| c.bytes());
    // Per host (in order): the memo entry to keep, if any.
    let mut kept: Vec<Option<(String, HostKey)>> = Vec::new();
    let mut spliced = 0;
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
    let hosts: Vec<Host<'_, RouteBytes>> = chain
        .virtual_hosts
        .into_values()
        .map(|mut vh| {
            let name = format!("{}/{}", chain.route_config, vh.hostname);
            if config_scope.fenced || vh.scope.fenced {
                kept.push(None);
                // Taken to free the store; a fenced scope serves none.
                for (_, r) in &vh.routes {
                    store.take(*r);
                }
                let fenced = fence::fenced_host(&name, hostname::envoy_domains(&vh.hostname));
                let mut tail = VirtualHost::default();
                if !config_scope.fenced {
                    crate::replacement::disable_filters(
                        &mut tail.typed_per_filter_config,
                        config_filters.iter().cloned(),
                    );
                }
                return Host::Parts(Box::new(HostParts {
                    head: VirtualHost {
                        name: fenced.name,
                        domains: fenced.domains,
                        ..Default::default()
                    },
                    routes: fenced
                        .routes
                        .iter()
                        .map(|r| RouteBytes::from(canonical::route(r)))
                        .collect(),
                    tail,
                }));
            }
            if let Some(f) = &vh.scope.features {
                header_edits |= apply::edits_headers(f);
            }
            vh.routes.sort_by_key(|(order, _)| *order);
            let routes: Vec<RouteBytes> = vh.routes.iter().filter_map(|(_, r)| store.take(*r)).collect();
            let hit = prior.zip(prior_bytes).and_then(|(p, bytes)| {
                let (k, range) = p.hosts.get(&name)?;
                k.same(&routes, vh.scope.features.as_ref(), config_retry.as_ref())
                    .then(|| bytes.get(range.clone()))
                    .flatten()
            });
            let key = keep.then(|| HostKey {
                routes: routes.clone(),
                features: vh.scope.features.clone(),
                retry: config_retry.clone(),
            });
            let host = match hit {
                Some(b) => {
                    spliced += 1;
                    Host::Encoded(b)
                }
                None => Host::Parts(Box::new(host_parts(
                    &name,
                    &vh.hostname,
                    routes,
                    vh.scope.features.as_ref(),
                    config_retry.as_ref(),
                    &mut host_tails,
                ))),
            };
            kept.push(key.map(|k| (name, k)));
            host
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
        let config = encoded::assemble(&head, hosts, &tail);
        let memo = keep.then(|| ConfigMemo {
            config: Some(config.clone()),
            ..Default::default()
        });
        return (config, memo);
    }
    if let Some(f) = &config_scope.features {
        apply::apply_config(f, &mut tail);
    }
    // Envoy applies header edits route, then host, then configuration, so
    // by default the least specific level wins a header; policies follow
    // rule > route > listener > Gateway.
    tail.most_specific_header_mutations_wins = header_edits;
    let (config, ranges) = encoded::assemble_hosts(&head, hosts, &tail);
    let encoded = kept.iter().flatten().count() - spliced;
    let memo = keep.then(|| ConfigMemo {
        spliced,
        encoded,
        hosts: kept
            .into_iter()
            .zip(ranges)
            .filter_map(|(k, range)| k.map(|(name, key)| (name, (key, range))))
            .collect(),
        config: Some(config.clone()),
    });
    (config, memo)
}

/// A non-fenced virtual host's parts: its routes (in order), its
/// listener's policy and the configuration's retry policy (the tail, built
/// once per policy: `host_tails`).
fn host_parts(
    name: &str,
    hostname: &str,
    routes: Vec<RouteBytes>,
    features: Option<&Arc<Features>>,
    config_retry: Option<&RetryPolicy>,
    host_tails: &mut Vec<(*const Features, VirtualHost)>,
) -> HostParts<RouteBytes> {
    let mut tail = VirtualHost::default();
    if let Some(f) = features {
        let key = Arc::as_ptr(f);
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
        tail.retry_policy = config_retry.cloned();
    }
    HostParts {
        head: VirtualHost {
            name: name.to_string(),
            domains: hostname::envoy_domains(hostname),
            ..Default::default()
        },
        routes,
        tail,
    }
}
