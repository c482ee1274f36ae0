//! The intermediate representation of one Gateway, between Gateway API
//! semantics and Envoy protos.
//!
//! Ports hold filter chains (one for an HTTP port; one per listener on an
//! HTTPS port, selected by SNI); chains hold virtual hosts by hostname;
//! virtual hosts hold references to Envoy routes with their Gateway API
//! precedence. Clusters and certificates are shared by the whole Gateway.
//!
//! The routes themselves stay where the rule builder put them, already
//! encoded (a [`RouteStore`]), until xDS assembly sorts each virtual
//! host's references and copies every route once into its route
//! configuration's bytes (see `xds::encoded`).

use std::collections::BTreeMap;

use crate::backend::ClusterSpec;
use crate::listener::Protocol;
use crate::route::matches::Rank;
use crate::tls::Certificate;

/// Orders routes inside a virtual host: Gateway API precedence first, then
/// the tie-breakers, folded into `route` (the route's position when all
/// routes are sorted oldest first, then by namespace/name), then rule and
/// match order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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
    pub routes: Vec<(RouteOrder, RouteRef)>,
    /// Listener-scope policy (HTTP listeners project onto their hosts).
    pub scope: Scope,
}

/// What a Gateway or listener policy puts on one scope (a route
/// configuration or a virtual host), once for all its routes.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub features: Option<std::sync::Arc<crate::policy::Features>>,
    /// Answers the replacement 500 instead (`replacement::scope`).
    pub fenced: bool,
}

/// Where one built Envoy route waits in the [`RouteStore`]: a batch (the
/// routes one HTTPRoute produced for one listener) and a slot in it. Each
/// reference is unique (a route shared by several virtual hosts is cloned
/// into its own slot), so assembly can move every route out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteRef {
    pub batch: u32,
    pub slot: u32,
}

/// One Envoy route, canonically encoded (`xds::canonical::route`), shared:
/// a route the incremental translator reuses is the same allocation in its
/// memo, in every virtual host that serves it and in the host memo's key
/// (`xds::route`), so that "same route" is a pointer comparison.
pub type RouteBytes = std::sync::Arc<[u8]>;

/// Built Envoy routes, each canonically encoded (`xds::canonical::route`),
/// by batch and slot (see [`RouteRef`]).
#[derive(Debug, Default)]
pub struct RouteStore {
    batches: Vec<Vec<Option<RouteBytes>>>,
    /// Routes not taken yet per batch: an emptied batch is freed at once,
    /// so that the store and the assembled output never both hold the
    /// whole configuration.
    left: Vec<u32>,
}

impl RouteStore {
    /// Stores one batch, once per virtual host (`copies` in all, at least
    /// one): returns each copy's references in order.
    pub fn add(&mut self, routes: Vec<Option<Vec<u8>>>, copies: usize) -> Vec<Vec<RouteRef>> {
        self.add_shared(
            routes.into_iter().map(|r| r.map(RouteBytes::from)).collect(),
            copies,
        )
        .map(Iterator::collect)
        .collect()
    }

    /// [`RouteStore::add`] of shared routes: the copies share the bytes.
    /// The references are computed as they are read (no vector of them
    /// allocated per batch: the merge reads each once).
    pub fn add_shared(
        &mut self,
        mut routes: Vec<Option<RouteBytes>>,
        copies: usize,
    ) -> impl Iterator<Item = impl Iterator<Item = RouteRef> + use<>> + use<> {
        let batch = self.batches.len() as u32;
        let n = routes.len();
        let copies = copies.max(1);
        routes.reserve(n * (copies - 1));
        for _ in 1..copies {
            for i in 0..n {
                let clone = routes[i].clone();
                routes.push(clone);
            }
        }
        self.left.push(routes.len() as u32);
        self.batches.push(routes);
        (0..copies).map(move |c| {
            (0..n).map(move |i| RouteRef {
                batch,
                slot: (c * n + i) as u32,
            })
        })
    }

    /// Moves a route out (each reference is taken once).
    pub fn take(&mut self, r: RouteRef) -> Option<RouteBytes> {
        let b = r.batch as usize;
        let route = self.batches.get_mut(b)?.get_mut(r.slot as usize)?.take()?;
        if let Some(left) = self.left.get_mut(b) {
            *left -= 1;
            if *left == 0 {
                self.batches[b] = Vec::new();
            }
        }
        Some(route)
    }
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
    /// Gateway-scope (and HTTPS-listener-scope) policy.
    pub scope: Scope,
    /// HTTPS only: TLS 1.3 at least (an HTTPProxy root's
    /// `tls.minimumProtocolVersion: "1.3"`); otherwise Envoy's default.
    pub tls13_only: bool,
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
        routes: impl IntoIterator<Item = (RouteOrder, RouteRef)>,
    ) {
        // Most adds go to an existing host: look up before allocating a
        // key, and a new host is inserted without a second lookup.
        let Some(vh) = self.virtual_hosts.get_mut(hostname) else {
            self.virtual_hosts.insert(
                hostname.to_string(),
                VirtualHost {
                    hostname: hostname.to_string(),
                    owner_specificity,
                    owner: owner.to_string(),
                    routes: routes.into_iter().collect(),
                    scope: Scope::default(),
                },
            );
            return;
        };
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
