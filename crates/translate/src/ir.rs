//! The intermediate representation of one Gateway, between Gateway API
//! semantics and Envoy protos.
//!
//! Ports hold filter chains (one for an HTTP port; one per listener on an
//! HTTPS port, selected by SNI); chains hold virtual hosts by hostname;
//! virtual hosts hold Envoy routes already sorted by Gateway API
//! precedence. Clusters and certificates are shared by the whole Gateway.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::route::v3::Route as EnvoyRoute;

use crate::backend::ClusterSpec;
use crate::listener::Protocol;
use crate::route::matches::Rank;
use crate::tls::Certificate;

/// Orders routes inside a virtual host: Gateway API precedence first, then
/// the tie-breakers, folded into `route` (the route's position when all
/// routes are sorted oldest first, then by namespace/name), then rule and
/// match order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteOrder {
    pub rank: Rank,
    pub route: usize,
    pub rule: usize,
    pub match_index: usize,
}

#[derive(Clone, Debug, Default)]
pub struct VirtualHost {
    pub hostname: String,
    /// Hostname specificity of the listener that owns this host (exact 2,
    /// wildcard 1, none 0): with listeners sharing a port, requests belong
    /// to the most specific listener only.
    pub owner_specificity: u8,
    pub owner: String,
    pub routes: Vec<(RouteOrder, EnvoyRoute)>,
}

#[derive(Clone, Debug)]
pub struct Chain {
    /// Name of the RouteConfiguration this chain's HCM fetches.
    pub route_config: String,
    /// SNI names (HTTPS only; empty = any).
    pub server_names: Vec<String>,
    /// SDS names of the certificates (HTTPS only).
    pub certificates: Vec<String>,
    pub virtual_hosts: BTreeMap<String, VirtualHost>,
    /// Names of the HTTP filters its routes configure (see `policy`).
    pub http_filters: std::collections::BTreeSet<String>,
}

#[derive(Clone, Debug)]
pub struct Port {
    pub protocol: Protocol,
    pub chains: Vec<Chain>,
}

#[derive(Clone, Debug, Default)]
pub struct Gateway {
    pub namespace: String,
    pub name: String,
    pub ports: BTreeMap<i32, Port>,
    pub clusters: BTreeMap<String, ClusterSpec>,
    pub certificates: BTreeMap<String, Certificate>,
    /// ext_authz filter configs by filter name (used by some chain).
    pub ext_authz:
        BTreeMap<String, envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::ExtAuthz>,
}

pub fn specificity(hostname: Option<&str>) -> u8 {
    match hostname {
        None => 0,
        Some(h) if h.starts_with("*.") => 1,
        Some(_) => 2,
    }
}

impl Chain {
    /// Adds routes for `hostname` from listener `owner`, honouring the
    /// most-specific-listener rule.
    pub fn add(
        &mut self,
        hostname: &str,
        owner: &str,
        owner_specificity: u8,
        routes: impl IntoIterator<Item = (RouteOrder, EnvoyRoute)>,
    ) {
        let vh = self
            .virtual_hosts
            .entry(hostname.to_string())
            .or_insert_with(|| VirtualHost {
                hostname: hostname.to_string(),
                owner_specificity,
                owner: owner.to_string(),
                routes: Vec::new(),
            });
        if vh.owner != owner {
            if owner_specificity > vh.owner_specificity {
                vh.owner = owner.to_string();
                vh.owner_specificity = owner_specificity;
                vh.routes.clear();
            } else {
                return;
            }
        }
        vh.routes.extend(routes);
    }
}
