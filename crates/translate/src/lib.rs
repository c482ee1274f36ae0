//! The translator: a pure, synchronous function from an input snapshot to
//! Envoy xDS, object status and diagnostics.
//!
//! Data model, in the order data flows:
//! 1. [`api::Inputs`]: typed Kubernetes objects, each with its source.
//! 2. Gateway API processing (`gatewayclass`, `listener`, `binding`,
//!    `backend`, `route`): decides which Gateways are ours, which listeners are
//!    valid, which routes attach where, and what each rule does. Every
//!    decision leaves a status condition on the object it concerns.
//! 3. IR (`ir`): per Gateway, ports → filter chains → virtual hosts → routes,
//!    already ordered by Gateway API precedence, with clusters resolved.
//! 4. xDS (`xds`): Envoy protos built from the IR, deterministic names/order.
//!
//! Nothing here does I/O: no sockets, no processes, no clocks (the status
//! timestamp is a [`Settings`] field).

// Module docs explain the data model to maintainers and link the private
// items that carry it (`cargo doc --document-private-items` resolves them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod backend;
pub mod binding;
pub mod default_gateway;
pub mod duration;
pub mod endpoint_guard;
pub mod endpoints;
pub mod envoy;
pub mod error;
pub mod extension;
pub mod gateway;
pub mod gatewayclass;
pub mod hostname;
pub mod httpproxy;
pub mod incremental;
pub mod index;
pub mod ir;
pub mod listener;
pub mod listener_set;
pub mod naming;
pub mod output;
mod parallel;
mod pipeline;
pub mod policy;
pub mod reference_grant;
pub mod replacement;
pub mod route;
pub mod route_status;
pub mod selector;
mod service_reads;
pub mod status;
pub mod strict;
pub mod tls;
pub mod xds;

pub use pipeline::{Seams, translate, translate_seams, translate_with};

mod settings;
pub use settings::Settings;

use std::collections::BTreeMap;
use std::sync::Arc;

use api::Diagnostic;
use serde::Serialize;

/// The xDS resources of one Gateway (one Envoy node).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayXds {
    pub listeners: Vec<envoy_types::pb::envoy::config::listener::v3::Listener>,
    /// Kept encoded (see [`xds::encoded`]); `decode()` each for the message.
    pub routes: Vec<xds::encoded::EncodedRouteConfiguration>,
    /// Shared: an edit that leaves a cluster as it was keeps last call's
    /// (a Cluster is large; copying every one was ~15% of a one-route edit).
    pub clusters: Vec<Arc<envoy_types::pb::envoy::config::cluster::v3::Cluster>>,
    pub endpoints: Vec<Arc<envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment>>,
    pub secrets: Vec<envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret>,
}

impl GatewayXds {
    /// Every route configuration decoded, in order.
    pub fn route_configurations(&self) -> Vec<envoy_types::pb::envoy::config::route::v3::RouteConfiguration> {
        self.routes
            .iter()
            .map(xds::encoded::EncodedRouteConfiguration::decode)
            .collect()
    }
}

/// The status one object would get, as design §5's `status` entries;
/// serialized with the call's transition time through [`status::Timed`]
/// ([`Output::timed_status`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectStatus {
    pub api_version: String,
    pub kind: String,
    pub metadata: StatusMetadata,
    pub status: status::StatusBody,
}

impl ObjectStatus {
    pub fn new(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        status: impl Into<status::StatusBody>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            metadata: StatusMetadata {
                namespace: namespace.map(Into::into),
                name: name.into(),
            },
            status: status.into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

/// Everything one translation produces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// Keyed by `namespace/name` of the Gateway. Shared: a Gateway whose
    /// assembly the incremental translator reuses is the same value as
    /// last call's (neither is copied).
    pub gateways: BTreeMap<String, Arc<GatewayXds>>,
    /// Shared: a status the incremental translator reuses is the same
    /// allocation from call to call (its conditions hold no time).
    pub status: Vec<Arc<ObjectStatus>>,
    /// `lastTransitionTime` of every condition in `status` (the call's
    /// `Settings::transition_time`).
    pub transition_time: String,
    pub diagnostics: Vec<Diagnostic>,
    /// Every replaced rule (or guarded matcher), once per Gateway it is
    /// programmed on: what metrics count and `describe route` lists.
    pub replacements: Vec<Replacement>,
    /// Every policy error or warning: `policy_validation_failures_total`.
    pub policy_failures: Vec<PolicyFailure>,
    /// Which route or rule policy supplies which feature to which rule
    /// (for `describe`; [`Output::policy_rows`] adds the scope levels).
    /// Shared: the incremental translator reuses last call's when the
    /// attachment is unchanged.
    pub policy_attachments: Arc<Vec<PolicyAttachment>>,
    /// Gateway- and listener-scope features in force, per scope, and the
    /// scopes each route is attached to.
    pub scoped_policies: ScopedPolicies,
    /// Every route configuration or virtual host fenced by a Gateway or
    /// listener policy: `scope_replacements_total`, `describe gateway`.
    pub scope_replacements: Vec<ScopeReplacement>,
    /// Every HTTPProxy: role, include paths, routes, duplicates (for
    /// `describe httpproxy` and the HTTPProxy metrics).
    pub http_proxies: Vec<httpproxy::ProxyReport>,
}

/// One scope (route configuration or virtual host) answering the 500
/// because of a Gateway or listener policy.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScopeReplacement {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    /// `route_configuration` or `virtual_host`; for extension hook
    /// failures also `cluster` (an extension backend's cluster left out)
    /// and `translation` (`PostTranslateModify` failed, nothing fenced).
    pub scope: String,
    /// The listener whose policy fenced it; empty for the Gateway's.
    pub listener: String,
    /// The Envoy route configurations or virtual hosts fenced.
    pub names: Vec<String>,
    pub class: error::ErrorClass,
    /// `field: reason`, naming the policy.
    pub message: String,
}

/// One TrafficPolicy feature in force on one rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyAttachment {
    pub route_kind: String,
    pub route_namespace: String,
    pub route_name: String,
    pub rule: usize,
    /// As spelled in the spec (`rbac`, `extAuth`, …).
    pub feature: String,
    /// `TrafficPolicy namespace/name`.
    pub policy: String,
    /// Where the policy is attached: `rule`, `route`, `listener NAME of
    /// Gateway NS/NAME` or `Gateway NS/NAME` (the most specific wins).
    pub level: String,
}

/// Gateway- and listener-scope policy features, kept once per scope and
/// joined with a route's rules only when `describe` asks
/// ([`Output::policy_rows`]). Copying them into every rule of every route
/// made one translation of 10,000 routes cost 60% more than without them
/// (ARCHITECTURE.md §3, `policy/scope.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScopedPolicies {
    /// Per listener scope with something in force (fenced scopes have
    /// nothing in force: their routes answer 500).
    pub listeners: Vec<ListenerPolicies>,
    /// Per route attached to at least one of those scopes.
    pub routes: Vec<RouteScopes>,
}

/// The features in force on one listener of one Gateway (its own policies
/// over its Gateway's).
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerPolicies {
    /// (feature, `TrafficPolicy ns/name`, level) as [`PolicyAttachment`] spells them.
    pub features: Vec<(&'static str, String, String)>,
}

/// One route's listener scopes (indices into [`ScopedPolicies::listeners`])
/// and, per rule, the features its own route and rule policies decide.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteScopes {
    pub route_kind: &'static str,
    pub route_namespace: String,
    pub route_name: String,
    pub rules: usize,
    pub listeners: Vec<usize>,
    /// Per rule: bit `i` set when its own policies set `FEATURES[i]`; all
    /// bits when they are invalid (the rule is replaced). Empty: none.
    pub own: Vec<u16>,
}

/// Every object's status of one translation with its transition time
/// ([`Output::timed_status`]).
pub type Statuses<'a> = status::Timed<'a, [Arc<ObjectStatus>]>;

impl Output {
    /// Every object's status with the call's transition time: what output
    /// writers serialize.
    pub fn timed_status(&self) -> Statuses<'_> {
        status::Timed::new(&self.status, &self.transition_time)
    }

    /// Adds one object's status.
    pub fn push_status(&mut self, s: ObjectStatus) {
        self.status.push(Arc::new(s));
    }

    /// Every feature in force on each rule of one route, with the policy
    /// and level it comes from (rule > route > listener > Gateway).
    pub fn policy_rows(&self, kind: &str, namespace: &str, name: &str) -> Vec<PolicyAttachment> {
        let mut rows: Vec<PolicyAttachment> = self
            .policy_attachments
            .iter()
            .filter(|a| a.route_kind == kind && a.route_namespace == namespace && a.route_name == name)
            .cloned()
            .collect();
        let routes = self
            .scoped_policies
            .routes
            .iter()
            .filter(|r| r.route_kind == kind && r.route_namespace == namespace && r.route_name == name);
        for r in routes {
            for &li in &r.listeners {
                let Some(l) = self.scoped_policies.listeners.get(li) else {
                    continue;
                };
                for (feature, policy, level) in &l.features {
                    let bit = policy::FEATURES.iter().position(|f| f == feature).unwrap_or(0);
                    for rule in 0..r.rules {
                        if r.own.get(rule).is_some_and(|own| own & (1 << bit) != 0) {
                            continue;
                        }
                        rows.push(PolicyAttachment {
                            route_kind: r.route_kind.into(),
                            route_namespace: r.route_namespace.clone(),
                            route_name: r.route_name.clone(),
                            rule,
                            feature: (*feature).into(),
                            policy: policy.clone(),
                            level: level.clone(),
                        });
                    }
                }
            }
        }
        // Several listeners may supply the same row; keep the first (rows
        // stay in feature order).
        let mut seen = std::collections::HashSet::new();
        rows.retain(|r| seen.insert(r.clone()));
        rows
    }
}

/// One rule that answers the replacement 500 (or a guard) instead of what it
/// says, on one Gateway.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Replacement {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    /// `HTTPRoute` or `GRPCRoute`.
    pub route_kind: String,
    pub route_namespace: String,
    pub route_name: String,
    pub rule: usize,
    pub class: error::ErrorClass,
    /// `field: reason`, as in the route's `PartiallyInvalid` message.
    pub message: String,
}

/// One problem with a policy object (TrafficPolicy, GatewayExtension …).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyFailure {
    pub policy_kind: String,
    pub namespace: String,
    pub name: String,
    /// The status reason it led to (`Invalid`, `PartiallyValid`, …).
    pub reason: String,
    pub class: error::ErrorClass,
    pub message: String,
}
