//! TrafficPolicies on a Gateway or on one of its listeners: which scope
//! they reach, how they merge there, and where they land in the IR.
//!
//! Data model (ARCHITECTURE.md §3, README "TrafficPolicy"):
//! - a `targetRefs` entry of kind `Gateway` (or a `targetSelectors` entry
//!   of kind `Gateway`) reaches the whole Gateway; with `sectionName` it
//!   reaches that listener. Targets are always in the policy's namespace.
//! - [`attach`] merges, per scope, the policies that reach it (as routes
//!   do: a targetRef before a selector, then oldest, then namespace/name;
//!   per feature the first wins and the others get a warning naming it).
//! - [`project`] puts each scope's [`Effective`] where Envoy holds it,
//!   once per scope: a Gateway policy on every route configuration of the
//!   Gateway; an HTTPS listener's on its own route configuration (merged
//!   over the Gateway's: same Envoy level, the listener wins); an HTTP
//!   listener's on its virtual hosts. Route and rule policies stay on
//!   routes; Envoy's most-specific-wins then gives rule > route > listener
//!   > Gateway per filter (and per header, see `xds::route`).
//! - Fail closed by scope: an invalid policy (or an extAuth that cannot
//!   be honoured) fences its scope — route configuration or virtual host —
//!   with the 500 (`replacement::scope`). Every fence is returned as a
//!   [`ScopeFence`] for status, diagnostics and metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Compiled, Effective, FEATURES, PolicyError, ext_auth};
use crate::error::RuleError;
use crate::gateway::GatewayState;
use crate::ir;
use crate::listener::Protocol;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Whether a target names a Gateway (the route targets are `attach`'s).
pub fn is_gateway(group: &str, kind: &str) -> bool {
    (group.is_empty() || group == GATEWAY_GROUP) && kind == "Gateway"
}

/// What reaches the scopes of one Gateway.
#[derive(Debug, Default)]
pub struct GatewayScopes {
    pub gateway: Option<Effective>,
    /// By listener index.
    pub listeners: BTreeMap<usize, Effective>,
}

/// Per Gateway (same order as the pipeline's Gateways), plus per policy
/// the Gateways (keys) it reaches, for its ancestor status.
#[derive(Debug, Default)]
pub struct Scopes {
    pub gateways: Vec<GatewayScopes>,
    pub reached: Vec<BTreeSet<String>>,
}

/// One fenced scope: what status, diagnostics and metrics report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeFence {
    /// The listener whose policy fenced it (None: the Gateway's).
    pub listener: Option<String>,
    /// `route_configuration` or `virtual_host`.
    pub scope: &'static str,
    /// The route configurations or virtual hosts fenced.
    pub names: Vec<String>,
    pub error: RuleError,
}

pub const ROUTE_CONFIGURATION: &str = "route_configuration";
pub const VIRTUAL_HOST: &str = "virtual_host";

/// Resolves Gateway and listener targets (recording target problems on
/// the policies) and merges per scope.
pub fn attach(policies: &mut [Compiled<'_>], gateways: &[GatewayState<'_>]) -> Scopes {
    // (gateway, listener) → [(precedence, policy)]
    type Reach = BTreeMap<(usize, Option<usize>), Vec<(u8, usize)>>;
    let mut reach = Reach::new();
    let mut reached = vec![BTreeSet::new(); policies.len()];
    for (pi, p) in policies.iter_mut().enumerate() {
        let spec = &p.policy.object.spec;
        let mut any = false;
        for (ti, t) in spec.target_refs.iter().enumerate() {
            if !is_gateway(&t.group, &t.kind) {
                continue;
            }
            let field = format!("spec.targetRefs[{ti}]");
            if let Some(ns) = t.namespace.as_deref().filter(|ns| *ns != p.namespace) {
                p.errors.push(PolicyError::semantic(
                    format!("{field}.namespace"),
                    format!(
                        "Gateway {ns}/{} is in another namespace; a policy targets only objects in its own namespace ({})",
                        t.name, p.namespace
                    ),
                ));
                continue;
            }
            let Some(gi) = gateways
                .iter()
                .position(|g| g.namespace == p.namespace && g.name == t.name)
            else {
                p.warnings.push(PolicyError::referential(
                    field,
                    format!("Gateway {}/{} not found", p.namespace, t.name),
                ));
                continue;
            };
            let listener = match &t.section_name {
                None => None,
                Some(section) => match gateways[gi].listeners.iter().position(|l| &l.name == section) {
                    Some(li) => Some(li),
                    None => {
                        p.warnings.push(PolicyError::referential(
                            format!("{field}.sectionName"),
                            format!(
                                "Gateway {}/{} has no listener named {section:?}",
                                p.namespace, t.name
                            ),
                        ));
                        continue;
                    }
                },
            };
            reach.entry((gi, listener)).or_default().push((0, pi));
            reached[pi].insert(gateways[gi].key());
            any = true;
        }
        for (si, s) in spec.target_selectors.iter().enumerate() {
            if !is_gateway(&s.group, &s.kind) {
                continue;
            }
            let mut found = false;
            for (gi, g) in gateways.iter().enumerate() {
                let labels = g.gateway.object.metadata.labels.as_ref();
                if g.namespace == p.namespace
                    && s.match_labels
                        .iter()
                        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
                {
                    reach.entry((gi, None)).or_default().push((1, pi));
                    reached[pi].insert(g.key());
                    found = true;
                }
            }
            any |= found;
            if !found {
                p.warnings.push(PolicyError::referential(
                    format!("spec.targetSelectors[{si}]"),
                    format!("selects no Gateway in namespace {}", p.namespace),
                ));
            }
        }
        if any && p.features.timeouts.is_some() {
            // Envoy has no timeout above the route; copying it into every
            // route is what scopes avoid (and a timeout is not a guard).
            p.warnings.push(PolicyError::semantic(
                "spec.timeouts",
                "timeouts apply to routes only; not applied on a Gateway or listener target",
            ));
        }
        p.errors.sort();
        p.errors.dedup();
    }

    let mut conflicts: Vec<BTreeSet<PolicyError>> = vec![BTreeSet::new(); policies.len()];
    let mut out: Vec<GatewayScopes> = gateways.iter().map(|_| GatewayScopes::default()).collect();
    for ((gi, listener), mut by) in reach {
        by.sort_by(|a, b| {
            let key = |(prec, pi): &(u8, usize)| {
                let m = &policies[*pi].policy.object.metadata;
                (
                    *prec,
                    m.creation_timestamp.is_none(),
                    m.creation_timestamp.as_ref().map(|t| t.0),
                    *pi,
                )
            };
            key(a).cmp(&key(b))
        });
        by.dedup_by_key(|(_, pi)| *pi);
        let g = &gateways[gi];
        let place = match listener {
            None => format!("Gateway {}", g.key()),
            Some(li) => format!("listener {} of Gateway {}", g.listeners[li].name, g.key()),
        };
        let order: Vec<usize> = by.iter().map(|(_, pi)| *pi).collect();
        let e = merge(policies, &order, &place, &mut conflicts);
        match listener {
            None => out[gi].gateway = Some(e),
            Some(li) => {
                out[gi].listeners.insert(li, e);
            }
        }
    }
    // An HTTPS listener's configuration holds its own policy over the
    // Gateway's (one Envoy level): merged here, once.
    for (gi, g) in gateways.iter().enumerate() {
        let Some(gateway) = out[gi].gateway.clone() else {
            continue;
        };
        for (li, own) in out[gi].listeners.iter_mut() {
            if g.listeners[*li].protocol == Some(Protocol::Https) {
                let place = format!("listener {} of Gateway {}", g.listeners[*li].name, g.key());
                *own = over(own, &gateway, &place, policies, &mut conflicts);
            }
        }
    }
    for (p, c) in policies.iter_mut().zip(conflicts) {
        p.warnings.extend(c);
        p.warnings.sort();
        p.warnings.dedup();
    }
    Scopes {
        gateways: out,
        reached,
    }
}

/// Merges the policies on one scope, in precedence order.
fn merge(
    policies: &[Compiled<'_>],
    order: &[usize],
    place: &str,
    conflicts: &mut [BTreeSet<PolicyError>],
) -> Effective {
    let mut e = Effective::default();
    for &pi in order {
        let p = &policies[pi];
        if let Some(first) = p.errors.first() {
            e.errors.push(RuleError {
                field: first.field.clone(),
                message: format!("{} is invalid: {}", p.display(), first.message),
                class: first.class,
            });
            continue;
        }
        for (fi, set) in p.features.set().iter().enumerate() {
            if !set {
                continue;
            }
            match &e.sources[fi] {
                None => {
                    e.features.take_from(&p.features, fi);
                    e.sources[fi] = Some(p.display());
                }
                Some(winner) => {
                    conflicts[pi].insert(PolicyError::semantic(
                        format!("spec.{}", FEATURES[fi]),
                        format!("overridden on {place} by {winner}, which takes precedence"),
                    ));
                }
            }
        }
    }
    unavailable_auth(&mut e);
    e
}

/// An extAuth that cannot be honoured fences its scope: authentication
/// that cannot happen must not let requests through.
fn unavailable_auth(e: &mut Effective) {
    if let Some(ext_auth::Use::Unavailable { message, class }) = &e.features.ext_auth {
        e.errors.push(RuleError {
            field: "spec.extAuth".into(),
            message: format!(
                "extAuth from {}: {message}",
                e.sources[super::EXT_AUTH].as_deref().unwrap_or(super::KIND)
            ),
            class: *class,
        });
    }
}

/// An HTTPS listener's route configuration holds both its own and the
/// Gateway's policy: per feature the listener's wins (one Envoy level);
/// the Gateway's policy is told.
fn over(
    listener: &Effective,
    gateway: &Effective,
    place: &str,
    policies: &[Compiled<'_>],
    conflicts: &mut [BTreeSet<PolicyError>],
) -> Effective {
    let mut e = listener.clone();
    for (fi, source) in gateway.sources.iter().enumerate() {
        let Some(source) = source else { continue };
        match &e.sources[fi] {
            None => {
                e.features.take_from(&gateway.features, fi);
                e.sources[fi] = Some(source.clone());
            }
            Some(winner) => {
                if let Some(pi) = policies.iter().position(|p| &p.display() == source) {
                    conflicts[pi].insert(PolicyError::semantic(
                        format!("spec.{}", FEATURES[fi]),
                        format!("overridden on {place} by {winner}, which takes precedence"),
                    ));
                }
            }
        }
    }
    e
}

/// The first error of a scope, as its fence reason.
fn first_error(e: &Effective) -> Option<RuleError> {
    e.errors.first().cloned()
}

/// Per-scope configuration for one Gateway's IR (before xDS assembly and
/// before `ext_auth::install`, which reads the chains' filters).
pub fn project(ir: &mut ir::Gateway, gw: &GatewayState<'_>, scopes: &GatewayScopes) -> Vec<ScopeFence> {
    let mut fences = Vec::new();
    if scopes.gateway.is_none() && scopes.listeners.is_empty() {
        return fences;
    }
    let gateway = scopes.gateway.as_ref();
    let gateway_error = gateway.and_then(first_error);
    if let Some(error) = gateway_error {
        let mut names = Vec::new();
        for chain in ir.ports.values_mut().flat_map(|p| &mut p.chains) {
            chain.scope.fenced = true;
            names.push(chain.route_config.clone());
        }
        fences.push(ScopeFence {
            listener: None,
            scope: ROUTE_CONFIGURATION,
            names,
            error,
        });
        return fences;
    }
    for (li, l) in gw.listeners.iter().enumerate() {
        let Some(protocol) = l.protocol.filter(|_| l.programmed()) else {
            continue;
        };
        let Some(port) = ir.ports.get_mut(&l.port) else {
            continue;
        };
        let own = scopes.listeners.get(&li);
        match protocol {
            Protocol::Https => {
                let rc = crate::naming::route_config(&gw.namespace, &gw.name, l.port, Some(&l.name));
                let Some(chain) = port.chains.iter_mut().find(|c| c.route_config == rc) else {
                    continue;
                };
                if let Some(error) = own.and_then(first_error) {
                    chain.scope.fenced = true;
                    fences.push(ScopeFence {
                        listener: Some(l.name.clone()),
                        scope: ROUTE_CONFIGURATION,
                        names: vec![rc],
                        error,
                    });
                    continue;
                }
                // `attach` merged the Gateway's policy under the listener's.
                if let Some(m) = own.or(gateway) {
                    set_features(&mut chain.scope, &mut chain.http_filters, m);
                }
            }
            Protocol::Http => {
                let Some(chain) = port.chains.first_mut() else {
                    continue;
                };
                // The Gateway's policy on the port's configuration (once
                // per port: several HTTP listeners share it).
                if let Some(g) = gateway
                    && chain.scope.features.is_none()
                {
                    set_features(&mut chain.scope, &mut chain.http_filters, g);
                }
                let Some(own) = own else { continue };
                if let Some(error) = first_error(own) {
                    // A listener without routes still gets its host, so
                    // its traffic meets the 500 rather than a 404.
                    let hostname = l.hostname.clone().unwrap_or_else(|| "*".into());
                    chain.add(&hostname, &l.name, ir::specificity(l.hostname.as_deref()), []);
                    let mut names = Vec::new();
                    for vh in chain.virtual_hosts.values_mut().filter(|vh| vh.owner == l.name) {
                        vh.scope.fenced = true;
                        names.push(format!("{}/{}", chain.route_config, vh.hostname));
                    }
                    fences.push(ScopeFence {
                        listener: Some(l.name.clone()),
                        scope: VIRTUAL_HOST,
                        names,
                        error,
                    });
                    continue;
                }
                let features = Arc::new(own.features.clone());
                add_filters(&mut chain.http_filters, &own.features);
                for vh in chain.virtual_hosts.values_mut().filter(|vh| vh.owner == l.name) {
                    vh.scope.features = Some(features.clone());
                }
            }
        }
    }
    fences
}

fn set_features(scope: &mut ir::Scope, filters: &mut BTreeSet<String>, e: &Effective) {
    add_filters(filters, &e.features);
    scope.features = Some(Arc::new(e.features.clone()));
}

/// The chain's HCM must hold every filter a scope configures.
fn add_filters(filters: &mut BTreeSet<String>, f: &super::Features) {
    for (name, _) in super::apply::per_filter(f) {
        filters.insert(name);
    }
}

/// The Gateway- and listener-scope features in force, once per listener
/// scope, and which scopes each route is attached to (for `describe
/// route`, joined by [`crate::Output::policy_rows`]). Linear in routes ×
/// attachments; nothing per rule × feature is built here.
pub fn in_force(
    scopes: &Scopes,
    attachment: &super::attach::Attachment,
    routes: &[crate::route::model::Route<'_>],
    bindings: &[Vec<crate::binding::ParentBinding>],
    gateways: &[GatewayState<'_>],
) -> crate::ScopedPolicies {
    let mut out = crate::ScopedPolicies::default();
    // (gateway, listener) → its row in `out.listeners`, if anything is in force.
    let mut slots: std::collections::HashMap<(usize, usize), Option<usize>> = Default::default();
    for (ri, route) in routes.iter().enumerate() {
        let mut listeners = Vec::new();
        for b in &bindings[ri] {
            for a in &b.attachments {
                let slot = *slots.entry((b.gateway, a.listener)).or_insert_with(|| {
                    let features = listener_features(scopes, gateways, b.gateway, a.listener);
                    (!features.is_empty()).then(|| {
                        out.listeners.push(crate::ListenerPolicies { features });
                        out.listeners.len() - 1
                    })
                });
                listeners.extend(slot);
            }
        }
        if listeners.is_empty() {
            continue;
        }
        listeners.sort_unstable();
        listeners.dedup();
        let own = attachment
            .effective
            .get(ri)
            .filter(|rules| rules.iter().any(Option::is_some))
            .map(|rules| {
                rules
                    .iter()
                    .map(|e| match e {
                        None => 0,
                        Some(e) if !e.errors.is_empty() => u16::MAX,
                        Some(e) => e
                            .sources
                            .iter()
                            .enumerate()
                            .filter(|(_, s)| s.is_some())
                            .fold(0u16, |bits, (fi, _)| bits | (1 << fi)),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.routes.push(crate::RouteScopes {
            route_kind: route.kind.kind(),
            route_namespace: route.namespace.clone(),
            route_name: route.name.clone(),
            rules: route.rules.len(),
            listeners,
            own,
        });
    }
    out
}

/// The features in force on one listener: its own (for HTTPS already
/// merged over the Gateway's), then the Gateway's; nothing when either
/// scope is fenced (its routes answer 500).
fn listener_features(
    scopes: &Scopes,
    gateways: &[GatewayState<'_>],
    gateway: usize,
    listener: usize,
) -> Vec<(&'static str, String, String)> {
    let (Some(g), Some(s)) = (gateways.get(gateway), scopes.gateways.get(gateway)) else {
        return Vec::new();
    };
    let own = s.listeners.get(&listener);
    if s.gateway.as_ref().is_some_and(|e| !e.errors.is_empty()) || own.is_some_and(|e| !e.errors.is_empty()) {
        return Vec::new();
    }
    let at_gateway = format!("Gateway {}", g.key());
    let at_listener = format!("listener {} of Gateway {}", g.listeners[listener].name, g.key());
    let mut features = Vec::new();
    for (fi, feature) in FEATURES.iter().enumerate() {
        let from_gateway = s.gateway.as_ref().and_then(|e| e.sources[fi].as_ref());
        let row = match own.and_then(|e| e.sources[fi].as_ref()) {
            // An HTTPS listener's merged source may be the Gateway's.
            Some(p) if from_gateway == Some(p) => (p, &at_gateway),
            Some(p) => (p, &at_listener),
            None => match from_gateway {
                Some(p) => (p, &at_gateway),
                None => continue,
            },
        };
        features.push((*feature, row.0.clone(), row.1.clone()));
    }
    features
}
