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
use crate::listener::{Origin, Protocol};
use crate::listener_set::ListenerSetState;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Whether a target names a Gateway.
pub fn is_gateway(group: &str, kind: &str) -> bool {
    (group.is_empty() || group == GATEWAY_GROUP) && kind == "Gateway"
}

/// Whether a target names a ListenerSet.
pub fn is_listener_set(group: &str, kind: &str) -> bool {
    (group.is_empty() || group == GATEWAY_GROUP) && kind == "ListenerSet"
}

/// Whether this module resolves the target (the route targets are
/// `attach`'s).
pub fn is_scope_kind(group: &str, kind: &str) -> bool {
    is_gateway(group, kind) || is_listener_set(group, kind)
}

/// An object a policy is attached to, as its `status.ancestors` names it:
/// a Gateway (its own target, or the Gateway of a targeted route) or a
/// ListenerSet (its own target).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ancestor {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Ancestor {
    pub fn gateway(g: &GatewayState<'_>) -> Self {
        Ancestor {
            kind: "Gateway",
            namespace: g.namespace.clone(),
            name: g.name.clone(),
        }
    }
}

/// What reaches the scopes of one Gateway.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayScopes {
    pub gateway: Option<Effective>,
    /// By listener index (into the Gateway's merged listeners: its own and
    /// its ListenerSets'; both are the listener level).
    pub listeners: BTreeMap<usize, Effective>,
}

/// Per Gateway (same order as the pipeline's Gateways), plus per policy
/// the objects it is attached to through its own targets, for its
/// ancestor status.
#[derive(Debug, Default)]
pub struct Scopes {
    pub gateways: Vec<GatewayScopes>,
    pub reached: Vec<BTreeSet<Ancestor>>,
}

/// One fenced scope: what status, diagnostics and metrics report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeFence {
    /// The listener (index into the Gateway's merged listeners) whose
    /// policy fenced it; None: the Gateway's.
    pub listener: Option<usize>,
    /// `route_configuration` or `virtual_host`.
    pub scope: &'static str,
    /// The route configurations or virtual hosts fenced.
    pub names: Vec<String>,
    pub error: RuleError,
}

pub const ROUTE_CONFIGURATION: &str = "route_configuration";
pub const VIRTUAL_HOST: &str = "virtual_host";

/// How a listener is named in messages: `listener a of Gateway ns/gw` or
/// `listener a of ListenerSet ns/set` (its key is `ns/set/a`).
pub fn listener_place(g: &GatewayState<'_>, li: usize) -> String {
    let l = &g.listeners[li];
    match l.origin {
        Origin::Gateway => format!("listener {} of Gateway {}", l.name, g.key()),
        Origin::ListenerSet(_) => {
            let set = l
                .key
                .strip_suffix(&l.name)
                .map_or(l.key.as_str(), |s| s.trim_end_matches('/'));
            format!("listener {} of ListenerSet {set}", l.name)
        }
    }
}

/// Precedence of the ways a policy reaches a scope (lower wins): on the
/// Gateway scope a targetRef, then a selector; on a listener a targetRef
/// naming it (`sectionName`), then a targetRef naming its whole
/// ListenerSet, then a ListenerSet selector.
const BY_REF: u8 = 0;
const BY_WHOLE_SET: u8 = 1;
const BY_SELECTOR: u8 = 2;

/// (Gateway, listener) → [(precedence, policy)]
type Reach = BTreeMap<(usize, Option<usize>), Vec<(u8, usize)>>;

/// Resolves Gateway, ListenerSet and listener targets (recording target
/// problems on the policies) and merges per scope.
pub fn attach(
    policies: &mut [Compiled<'_>],
    gateways: &[GatewayState<'_>],
    sets: &[ListenerSetState<'_>],
) -> Scopes {
    let mut reach = Reach::new();
    let mut reached = vec![BTreeSet::new(); policies.len()];
    for (pi, p) in policies.iter_mut().enumerate() {
        let mut any = resolve_gateway_targets(p, pi, gateways, &mut reach, &mut reached[pi]);
        any |= resolve_set_targets(p, pi, gateways, sets, &mut reach, &mut reached[pi]);
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
            Some(li) => listener_place(g, li),
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
                let place = listener_place(g, *li);
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

/// A target in another namespace than the policy: refused, as for routes.
fn other_namespace(p: &mut Compiled<'_>, field: &str, kind: &str, ns: Option<&str>, name: &str) -> bool {
    let Some(ns) = ns.filter(|ns| *ns != p.namespace) else {
        return false;
    };
    let message = format!(
        "{kind} {ns}/{name} is in another namespace; a policy targets only objects in its own namespace ({})",
        p.namespace
    );
    p.errors
        .push(PolicyError::semantic(format!("{field}.namespace"), message));
    true
}

/// `targetRefs` and `targetSelectors` of kind Gateway. Whether any reached.
fn resolve_gateway_targets(
    p: &mut Compiled<'_>,
    pi: usize,
    gateways: &[GatewayState<'_>],
    reach: &mut Reach,
    reached: &mut BTreeSet<Ancestor>,
) -> bool {
    let spec = &p.policy.object.spec;
    let mut any = false;
    for (ti, t) in spec.target_refs.iter().enumerate() {
        if !is_gateway(&t.group, &t.kind) {
            continue;
        }
        let field = format!("spec.targetRefs[{ti}]");
        if other_namespace(p, &field, "Gateway", t.namespace.as_deref(), &t.name) {
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
            // A Gateway's sectionName names one of its own listeners (a
            // ListenerSet's are targeted through the ListenerSet).
            Some(section) => match gateways[gi]
                .listeners
                .iter()
                .position(|l| l.origin == Origin::Gateway && &l.name == section)
            {
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
        reach.entry((gi, listener)).or_default().push((BY_REF, pi));
        reached.insert(Ancestor::gateway(&gateways[gi]));
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
                // On the Gateway scope a selector comes after a targetRef.
                reach.entry((gi, None)).or_default().push((1, pi));
                reached.insert(Ancestor::gateway(g));
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
    any
}

/// `targetRefs` and `targetSelectors` of kind ListenerSet: each of the
/// set's listeners (merged into its Gateway's) is a listener scope; with
/// `sectionName`, only that one. Whether any reached.
fn resolve_set_targets(
    p: &mut Compiled<'_>,
    pi: usize,
    gateways: &[GatewayState<'_>],
    sets: &[ListenerSetState<'_>],
    reach: &mut Reach,
    reached: &mut BTreeSet<Ancestor>,
) -> bool {
    let spec = &p.policy.object.spec;
    let mut any = false;
    // The listeners of set `si` (index into the Gateway's merged list).
    let listeners_of = |si: usize| -> Vec<usize> {
        let set = &sets[si];
        gateways[set.gateway]
            .listeners
            .iter()
            .enumerate()
            .filter(|(_, l)| l.origin == Origin::ListenerSet(si))
            .map(|(li, _)| li)
            .collect()
    };
    let ancestor = |set: &ListenerSetState<'_>| Ancestor {
        kind: "ListenerSet",
        namespace: set.namespace.clone(),
        name: set.name.clone(),
    };
    for (ti, t) in spec.target_refs.iter().enumerate() {
        if !is_listener_set(&t.group, &t.kind) {
            continue;
        }
        let field = format!("spec.targetRefs[{ti}]");
        if other_namespace(p, &field, "ListenerSet", t.namespace.as_deref(), &t.name) {
            continue;
        }
        let Some(si) = sets
            .iter()
            .position(|s| s.namespace == p.namespace && s.name == t.name)
        else {
            p.warnings.push(PolicyError::referential(
                field,
                format!(
                    "ListenerSet {}/{} not found (or its parent is not a Gateway of this controller)",
                    p.namespace, t.name
                ),
            ));
            continue;
        };
        if let Some((_, why)) = &sets[si].refused {
            p.warnings.push(PolicyError::referential(
                field,
                format!(
                    "ListenerSet {}/{} is not accepted by its Gateway: {why}",
                    p.namespace, t.name
                ),
            ));
            continue;
        }
        let gi = sets[si].gateway;
        let mut targets = listeners_of(si);
        let precedence = match &t.section_name {
            None => BY_WHOLE_SET,
            Some(section) => {
                targets.retain(|&li| &gateways[gi].listeners[li].name == section);
                if targets.is_empty() {
                    p.warnings.push(PolicyError::referential(
                        format!("{field}.sectionName"),
                        format!(
                            "ListenerSet {}/{} has no listener named {section:?}",
                            p.namespace, t.name
                        ),
                    ));
                    continue;
                }
                BY_REF
            }
        };
        for li in targets {
            reach.entry((gi, Some(li))).or_default().push((precedence, pi));
        }
        reached.insert(ancestor(&sets[si]));
        any = true;
    }
    for (sel, s) in spec.target_selectors.iter().enumerate() {
        if !is_listener_set(&s.group, &s.kind) {
            continue;
        }
        let mut found = false;
        for (si, set) in sets.iter().enumerate() {
            let labels = set.set.object.metadata.labels.as_ref();
            if set.namespace != p.namespace
                || set.refused.is_some()
                || !s
                    .match_labels
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            {
                continue;
            }
            for li in listeners_of(si) {
                reach
                    .entry((set.gateway, Some(li)))
                    .or_default()
                    .push((BY_SELECTOR, pi));
            }
            reached.insert(ancestor(set));
            found = true;
        }
        any |= found;
        if !found {
            p.warnings.push(PolicyError::referential(
                format!("spec.targetSelectors[{sel}]"),
                format!("selects no accepted ListenerSet in namespace {}", p.namespace),
            ));
        }
    }
    any
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

/// Which policies put configuration on each route configuration and
/// virtual host (by Envoy name), so that a scope the real Envoy rejects
/// (STRICT) is reported as that policy's failure.
#[derive(Debug, Default)]
pub struct Placed {
    /// Route configuration → (listener whose policy it holds, None for
    /// the Gateway's; the policies).
    pub configs: BTreeMap<String, (Option<usize>, Vec<String>)>,
    /// Virtual host → (listener, the policies).
    pub hosts: BTreeMap<String, (usize, Vec<String>)>,
}

/// The policies behind an [`Effective`]'s features.
fn sources(e: &Effective) -> Vec<String> {
    let mut v: Vec<String> = e.sources.iter().flatten().cloned().collect();
    v.sort();
    v.dedup();
    v
}

/// Per-scope configuration for one Gateway's IR (before xDS assembly and
/// before `ext_auth::install`, which reads the chains' filters): the
/// fences it decided, and where each policy's configuration went.
pub fn project(
    ir: &mut ir::Gateway,
    gw: &GatewayState<'_>,
    scopes: &GatewayScopes,
) -> (Vec<ScopeFence>, Placed) {
    let mut fences = Vec::new();
    let mut placed = Placed::default();
    if scopes.gateway.is_none() && scopes.listeners.is_empty() {
        return (fences, placed);
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
        return (fences, placed);
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
                let rc = crate::naming::route_config(&gw.namespace, &gw.name, l.port, Some(&l.key));
                let Some(chain) = port.chains.iter_mut().find(|c| c.route_config == rc) else {
                    continue;
                };
                if let Some(error) = own.and_then(first_error) {
                    chain.scope.fenced = true;
                    fences.push(ScopeFence {
                        listener: Some(li),
                        scope: ROUTE_CONFIGURATION,
                        names: vec![rc],
                        error,
                    });
                    continue;
                }
                // `attach` merged the Gateway's policy under the listener's.
                if let Some(m) = own.or(gateway) {
                    set_features(&mut chain.scope, &mut chain.http_filters, m);
                    placed.configs.insert(rc, (own.map(|_| li), sources(m)));
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
                    placed
                        .configs
                        .insert(chain.route_config.clone(), (None, sources(g)));
                }
                let Some(own) = own else { continue };
                if let Some(error) = first_error(own) {
                    // A listener without routes still gets its host, so
                    // its traffic meets the 500 rather than a 404.
                    let hostname = l.hostname.clone().unwrap_or_else(|| "*".into());
                    chain.add(&hostname, &l.key, ir::specificity(l.hostname.as_deref()), []);
                    let mut names = Vec::new();
                    for vh in chain.virtual_hosts.values_mut().filter(|vh| vh.owner == l.key) {
                        vh.scope.fenced = true;
                        names.push(format!("{}/{}", chain.route_config, vh.hostname));
                    }
                    fences.push(ScopeFence {
                        listener: Some(li),
                        scope: VIRTUAL_HOST,
                        names,
                        error,
                    });
                    continue;
                }
                let features = Arc::new(own.features.clone());
                add_filters(&mut chain.http_filters, &own.features);
                // A Gateway retry is copied onto each host without one
                // (`xds::route`): it is host configuration too.
                let mut by = sources(own);
                if own.features.retry.is_none()
                    && let Some(source) = gateway.and_then(|g| g.sources[super::RETRY].clone())
                {
                    by.push(source);
                    by.sort();
                    by.dedup();
                }
                for vh in chain.virtual_hosts.values_mut().filter(|vh| vh.owner == l.key) {
                    vh.scope.features = Some(features.clone());
                    placed.hosts.insert(
                        format!("{}/{}", chain.route_config, vh.hostname),
                        (li, by.clone()),
                    );
                }
            }
        }
    }
    (fences, placed)
}

/// The HTTP filters the Gateway's and listener `li`'s policies configure
/// above a route: what a fenced route switches off
/// (`replacement::disable_filters`).
pub fn inherited_filters(scopes: &GatewayScopes, li: usize) -> Vec<String> {
    let mut names = BTreeSet::new();
    for e in scopes.gateway.iter().chain(scopes.listeners.get(&li)) {
        if e.errors.is_empty() {
            names.extend(super::apply::per_filter(&e.features).into_iter().map(|(n, _)| n));
        }
    }
    names.into_iter().collect()
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
    bindings: &[std::sync::Arc<Vec<crate::binding::ParentBinding>>],
    gateways: &[GatewayState<'_>],
) -> crate::ScopedPolicies {
    let mut out = crate::ScopedPolicies::default();
    // No Gateway or listener policy anywhere: nothing is in force on any
    // listener, so no route has a row (the loop below would find none).
    if scopes
        .gateways
        .iter()
        .all(|g| g.gateway.is_none() && g.listeners.is_empty())
    {
        return out;
    }
    // (gateway, listener) → its row in `out.listeners`, if anything is in force.
    let mut slots: std::collections::HashMap<(usize, usize), Option<usize>> = Default::default();
    for (ri, route) in routes.iter().enumerate() {
        let mut listeners = Vec::new();
        for b in bindings[ri].iter() {
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
            route_namespace: route.namespace.to_string(),
            route_name: route.name.to_string(),
            rules: route.rule_count(),
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
    let at_listener = listener_place(g, listener);
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

/// What STRICT found Envoy rejecting in scope configuration
/// (`strict::ScopeRejection`), as the failure of the policies that put it
/// there ([`Placed`]): fences (one per listener or Gateway, for status and
/// metrics), per policy the error its status reports, and the rejections
/// no policy explains (reported as STRICT diagnostics).
pub fn strict_fences(
    placed: &Placed,
    rejections: &[crate::strict::ScopeRejection],
) -> (
    Vec<ScopeFence>,
    Vec<(String, PolicyError)>,
    Vec<crate::strict::ScopeRejection>,
) {
    let mut fences: Vec<ScopeFence> = Vec::new();
    let mut blamed = Vec::new();
    let mut unexplained = Vec::new();
    for r in rejections {
        let (listener, policies, scope, name) = match &r.virtual_host {
            Some(vh) => {
                let found = placed
                    .hosts
                    .get(vh)
                    .map(|(li, p)| (Some(*li), p))
                    // A host without a listener policy holds only the
                    // Gateway's retry.
                    .or_else(|| placed.configs.get(&r.route_config).map(|(li, p)| (*li, p)));
                match found {
                    Some((li, p)) => (li, p, VIRTUAL_HOST, vh),
                    None => {
                        unexplained.push(r.clone());
                        continue;
                    }
                }
            }
            None => match placed.configs.get(&r.route_config) {
                Some((li, p)) => (*li, p, ROUTE_CONFIGURATION, &r.route_config),
                None => {
                    unexplained.push(r.clone());
                    continue;
                }
            },
        };
        if policies.is_empty() {
            unexplained.push(r.clone());
            continue;
        }
        let error = RuleError::structural(
            "spec",
            format!("{} rejected by Envoy: {}", policies.join(", "), r.message),
        );
        let what = if scope == VIRTUAL_HOST {
            "virtual host"
        } else {
            "route configuration"
        };
        for p in policies {
            blamed.push((
                p.clone(),
                PolicyError::structural(
                    "spec",
                    format!("rejected by Envoy on {what} {name}: {}", r.message),
                ),
            ));
        }
        match fences
            .iter_mut()
            .find(|f| f.listener == listener && f.scope == scope && f.error == error)
        {
            Some(f) => f.names.push(name.clone()),
            None => fences.push(ScopeFence {
                listener,
                scope,
                names: vec![name.clone()],
                error,
            }),
        }
    }
    (fences, blamed, unexplained)
}
