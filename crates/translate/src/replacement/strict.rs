//! STRICT's fail-closed decisions: what the real Envoy rejects in a route
//! configuration, narrowed to the smallest scope that fixes it, and
//! replaced there (README, "Modes"). `strict` runs the pass (candidates,
//! content keys, the validator) and calls [`scope_first`] then [`isolate`]
//! on each rejected route configuration; what the replaced parts become is
//! [`super::replace`] and [`super::scope`].
//!
//! In order: the scope configuration a Gateway or listener policy put
//! there ([`scope_first`]: replaced at its scope, never bisected); domains
//! Envoy refuses on their own ([`drop_rejected_domains`]); routes, by
//! bisection, each rejected one answering 500 with its match
//! ([`isolate`]), its match widened in place if that is still rejected
//! (`guard_match.rs`); virtual hosts rejected on their own
//! ([`fence_virtual_hosts`]); and, when hosts only fail together, the whole
//! route configuration.

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};

use crate::GatewayXds;
use crate::replacement::guard_match::{Widening, guard_prefix, widen};
use crate::strict::{
    Candidate, DroppedDomain, GatewayFindings, RejectedRoute, ScopeRejection, Validator, Verdict,
    WidenedMatch, candidate, encoded_candidate,
};
use crate::xds::encoded::EncodedRouteConfiguration;

/// The route at flat position `pos`, with (a copy of) its host's own
/// fields but its routes.
fn route_at(
    rc: &mut RouteConfiguration,
    mut pos: usize,
) -> Option<(VirtualHost, &mut envoy_types::pb::envoy::config::route::v3::Route)> {
    for vh in &mut rc.virtual_hosts {
        if pos < vh.routes.len() {
            let host = host_scope(vh);
            return vh.routes.get_mut(pos).map(|r| (host, r));
        }
        pos -= vh.routes.len();
    }
    None
}

/// What [`scope_first`] did to a rejected route configuration.
pub(crate) enum Scoped {
    /// No scope configuration Envoy rejects: bisect as usual.
    Unchanged,
    /// Some virtual hosts were fenced but the rest is still rejected.
    Changed,
    /// Replaced or fenced, and the result is accepted (or replaced whole).
    Done,
    /// The validator could not answer (reported).
    Unavailable,
}

/// Whether a route configuration carries configuration of its own (what a
/// Gateway or HTTPS-listener policy puts there, `policy::apply`).
fn has_config_scope(rc: &RouteConfiguration) -> bool {
    !rc.typed_per_filter_config.is_empty()
        || !rc.request_headers_to_add.is_empty()
        || !rc.request_headers_to_remove.is_empty()
        || !rc.response_headers_to_add.is_empty()
        || !rc.response_headers_to_remove.is_empty()
}

/// A virtual host's own configuration (what an HTTP-listener policy, or a
/// Gateway policy's retry, puts there): the host without its name, domains
/// and routes. Routes never set these fields otherwise (`xds::route`).
fn host_scope(vh: &VirtualHost) -> VirtualHost {
    VirtualHost {
        typed_per_filter_config: vh.typed_per_filter_config.clone(),
        request_headers_to_add: vh.request_headers_to_add.clone(),
        request_headers_to_remove: vh.request_headers_to_remove.clone(),
        response_headers_to_add: vh.response_headers_to_add.clone(),
        response_headers_to_remove: vh.response_headers_to_remove.clone(),
        retry_policy: vh.retry_policy.clone(),
        ..Default::default()
    }
}

/// Checks the scope configuration of a rejected route configuration on
/// its own, around one catch-all route (no route, no domain of the
/// tenant's can be at fault there): the route configuration's (then it is
/// replaced whole by one catch-all 500 host) and each distinct virtual-host
/// configuration (then every host holding it becomes a catch-all 500
/// keeping its name and domains). Rejections go to
/// [`GatewayFindings::scope_rejections`].
pub(crate) fn scope_first(
    gw: &GatewayXds,
    rc: &mut RouteConfiguration,
    validator: &dyn Validator,
    findings: &mut GatewayFindings,
) -> Scoped {
    let config_scope = has_config_scope(rc);
    // Hosts grouped by identical configuration: a listener's policy is
    // the same on each of its hosts, one check serves them all.
    let mut groups: Vec<(VirtualHost, Vec<usize>)> = Vec::new();
    for (i, vh) in rc.virtual_hosts.iter().enumerate() {
        let scope = host_scope(vh);
        if scope == VirtualHost::default() {
            continue;
        }
        match groups.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, members)) => members.push(i),
            None => groups.push((scope, vec![i])),
        }
    }
    if !config_scope && groups.is_empty() {
        return Scoped::Unchanged;
    }
    let mut batch = Vec::new();
    if config_scope {
        let mut probe = rc.clone();
        probe.virtual_hosts = vec![crate::replacement::scope::fenced_config_host(&rc.name)];
        batch.push(candidate(gw, vec![probe], format!("{} configuration", rc.name)));
    }
    // Virtual-host probes without the configuration's own fields: only the
    // host's are under test there.
    let mut bare = rc.clone();
    bare.typed_per_filter_config.clear();
    bare.request_headers_to_add.clear();
    bare.request_headers_to_remove.clear();
    bare.response_headers_to_add.clear();
    bare.response_headers_to_remove.clear();
    for (scope, members) in &groups {
        let first = &rc.virtual_hosts[members[0]];
        let mut host = scope.clone();
        host.name.clone_from(&first.name);
        host.domains = vec!["*".into()];
        host.routes = vec![crate::replacement::scope::catch_all_route(&first.name)];
        let mut probe = bare.clone();
        probe.virtual_hosts = vec![host];
        batch.push(candidate(
            gw,
            vec![probe],
            format!("{} virtual host {} configuration", rc.name, first.name),
        ));
    }
    let verdicts = validator.validate(&batch);
    if let Some(m) = verdicts.iter().find_map(|v| match v {
        Verdict::Unavailable(m) => Some(m.clone()),
        _ => None,
    }) {
        findings
            .problems
            .push((format!("STRICT validation of {} unavailable: {m}", rc.name), true));
        return Scoped::Unavailable;
    }
    if verdicts.len() != batch.len() {
        findings.problems.push((
            format!(
                "STRICT validation of {} unavailable: the validator gave no verdict",
                rc.name
            ),
            true,
        ));
        return Scoped::Unavailable;
    }
    let mut verdicts = verdicts.into_iter();
    if config_scope && let Some(Verdict::Rejected(m)) = verdicts.next() {
        crate::replacement::scope::replace_config(rc);
        findings.scope_rejections.push(ScopeRejection {
            route_config: rc.name.clone(),
            virtual_host: None,
            message: m,
        });
        return Scoped::Done;
    }
    let mut fenced = false;
    for ((_, members), verdict) in groups.iter().zip(verdicts) {
        let Verdict::Rejected(m) = verdict else {
            continue;
        };
        let above: Vec<String> = rc.typed_per_filter_config.keys().cloned().collect();
        for &i in members {
            let vh = &mut rc.virtual_hosts[i];
            *vh = crate::replacement::scope::fenced_host(&vh.name, vh.domains.clone());
            crate::replacement::disable_filters(&mut vh.typed_per_filter_config, above.iter().cloned());
            findings.scope_rejections.push(ScopeRejection {
                route_config: rc.name.clone(),
                virtual_host: Some(vh.name.clone()),
                message: m.clone(),
            });
        }
        fenced = true;
    }
    if !fenced {
        return Scoped::Unchanged;
    }
    match validator
        .validate(&[candidate(
            gw,
            vec![rc.clone()],
            format!("{} scopes fenced", rc.name),
        )])
        .first()
    {
        Some(Verdict::Accepted) => Scoped::Done,
        Some(Verdict::Rejected(_)) => Scoped::Changed,
        Some(Verdict::Unavailable(m)) => {
            findings.problems.push((
                format!(
                    "STRICT validation of {} unavailable while re-checking: {m}",
                    rc.name
                ),
                true,
            ));
            Scoped::Changed
        }
        None => Scoped::Changed,
    }
}

/// Bisects a rejected route configuration (`encoded`, decoded as `target`)
/// down to the routes Envoy rejects, replacing what it finds in `target`.
/// The halves are picked from the bytes (`Layout`), as the warm check does.
pub(crate) fn isolate(
    gw: &GatewayXds,
    encoded: &EncodedRouteConfiguration,
    target: &mut RouteConfiguration,
    suspects: Vec<usize>,
    whole: String,
    validator: &dyn Validator,
    findings: &mut GatewayFindings,
) {
    // A domain Envoy refuses fails every subset that carries the virtual
    // hosts, so bisecting over routes would blame them all: the envelope
    // (the hosts without routes) is checked first and its rejected domains
    // dropped; the routes are then bisected on what is left.
    let rebuilt;
    let (encoded, suspects) = match drop_rejected_domains(gw, target, validator, findings) {
        Envelope::Accepted => (encoded, suspects),
        Envelope::Rebuilt => {
            rebuilt = EncodedRouteConfiguration::new(target);
            let all = target.virtual_hosts.iter().map(|vh| vh.routes.len()).sum();
            (&rebuilt, (0..all).collect())
        }
        // Rejected without any route (e.g. one domain in two hosts): no
        // route is to blame, so none is bisected; the host fencing below
        // decides.
        Envelope::Rejected => (encoded, Vec::new()),
        Envelope::Unavailable => return,
    };
    let rc = target.clone();
    // Not our bytes (cannot happen): nothing to bisect, the re-check of
    // the whole configuration below decides.
    let layout = encoded.layout();
    let mut pending: Vec<Vec<usize>> = if layout.is_some() {
        vec![suspects]
    } else {
        Vec::new()
    };
    let mut offenders: Vec<(usize, String)> = Vec::new();
    let mut unavailable = false;
    while let Some(layout) = layout.as_ref().filter(|_| !pending.is_empty()) {
        let mut halves: Vec<Vec<usize>> = Vec::new();
        for set in pending.drain(..) {
            if set.len() <= 1 {
                halves.push(set);
                continue;
            }
            let (a, b) = set.split_at(set.len() / 2);
            halves.push(a.to_vec());
            halves.push(b.to_vec());
        }
        let batch: Vec<Candidate> = halves
            .iter()
            .map(|set| {
                let label = format!("{} routes {:?}", rc.name, set.first().zip(set.last()));
                encoded_candidate(gw, vec![layout.subset(set)], label)
            })
            .collect();
        let verdicts = validator.validate(&batch);
        for (set, verdict) in halves.into_iter().zip(verdicts) {
            match verdict {
                Verdict::Accepted => {}
                Verdict::Unavailable(m) => {
                    unavailable = true;
                    findings
                        .problems
                        .push((format!("STRICT validation of {} unavailable: {m}", rc.name), true));
                }
                Verdict::Rejected(m) if set.len() == 1 => offenders.push((set[0], m)),
                Verdict::Rejected(_) if set.len() > 1 => pending.push(set),
                // No route in the set: the hosts themselves are rejected,
                // which bisecting cannot narrow (pushing it back would loop
                // for ever); the re-check below decides.
                Verdict::Rejected(_) => {}
            }
        }
        if unavailable {
            return;
        }
    }
    let mut fixed = rc.clone();
    for (pos, message) in &offenders {
        let mut above: Vec<String> = fixed.typed_per_filter_config.keys().cloned().collect();
        if let Some((vh, route)) = route_at(&mut fixed, *pos) {
            above.extend(vh.typed_per_filter_config.keys().cloned());
            findings.rejected_routes.push(RejectedRoute {
                route_name: route.name.clone(),
                message: message.clone(),
            });
            crate::replacement::replace(route);
            crate::replacement::disable_filters(&mut route.typed_per_filter_config, above);
        }
    }
    let recheck = validator.validate(&[candidate(
        gw,
        vec![fixed.clone()],
        format!("{} replaced", rc.name),
    )]);
    match recheck.first() {
        Some(Verdict::Accepted) => *target = fixed,
        Some(Verdict::Rejected(m)) => {
            // A rejected route's match may be what Envoy refuses: widened
            // in place, it stays fenced without its host
            // (`guard_match.rs`).
            if let Some(guarded) = guard_matches(gw, &fixed, &offenders, validator, findings) {
                *target = guarded;
                return;
            }
            // Not (only) routes: fence the virtual hosts Envoy rejects on
            // their own, then, if that is not enough, the whole
            // configuration.
            if let Some(fenced) = fence_virtual_hosts(gw, &fixed, validator, findings) {
                *target = fenced;
                return;
            }
            let mut whole_rc = rc;
            crate::replacement::scope::replace_config(&mut whole_rc);
            findings.replaced_configs.push((
                whole_rc.name.clone(),
                if offenders.is_empty() { whole } else { m.clone() },
            ));
            *target = whole_rc;
        }
        Some(Verdict::Unavailable(m)) => {
            // The offenders were rejected on their own: replacing them is
            // still right even if the re-check could not run.
            findings.problems.push((
                format!(
                    "STRICT validation of {} unavailable while re-checking: {m}",
                    rc.name
                ),
                true,
            ));
            *target = fixed;
        }
        None => *target = fixed,
    }
}

/// `fixed` (its offenders replaced, still rejected) with the offenders'
/// matches widened step by step ([`Widening`]), the first the validator
/// accepts; `None` if none is (or it could not answer: the host fencing
/// after it reports that).
fn guard_matches(
    gw: &GatewayXds,
    fixed: &RouteConfiguration,
    offenders: &[(usize, String)],
    validator: &dyn Validator,
    findings: &mut GatewayFindings,
) -> Option<RouteConfiguration> {
    if offenders.is_empty() {
        return None;
    }
    let mut guarded = fixed.clone();
    for how in [Widening::Regexes, Widening::Everything] {
        let mut changed = false;
        for (pos, _) in offenders {
            if let Some((_, route)) = route_at(&mut guarded, *pos) {
                changed |= widen(route.r#match.get_or_insert_with(Default::default), how);
            }
        }
        if !changed {
            continue;
        }
        let label = format!("{} offenders' matches widened ({how:?})", fixed.name);
        if let Some(Verdict::Accepted) = validator
            .validate(&[candidate(gw, vec![guarded.clone()], label)])
            .first()
        {
            for (pos, _) in offenders {
                if let Some((_, route)) = route_at(&mut guarded, *pos) {
                    findings.widened_matches.push(WidenedMatch {
                        route_name: route.name.clone(),
                        prefix: guard_prefix(route.r#match.as_ref()),
                        everything: how == Widening::Everything,
                    });
                }
            }
            return Some(guarded);
        }
    }
    None
}

/// What checking a route configuration's virtual hosts without routes
/// found.
enum Envelope {
    /// Envoy takes them as they are.
    Accepted,
    /// Domains Envoy rejects were dropped (hosts left without one
    /// removed) and the rest is accepted.
    Rebuilt,
    /// Rejected for something dropping domains does not fix.
    Rejected,
    /// The validator could not answer (reported).
    Unavailable,
}

/// Drops from `rc` the domains Envoy rejects on their own (a virtual host
/// left without a domain is removed): no valid `Host` header can match a
/// domain Envoy refuses to load, so no request changes route.
fn drop_rejected_domains(
    gw: &GatewayXds,
    rc: &mut RouteConfiguration,
    validator: &dyn Validator,
    findings: &mut GatewayFindings,
) -> Envelope {
    let bare = |vh: &VirtualHost, domains: Vec<String>| VirtualHost {
        name: vh.name.clone(),
        domains,
        ..Default::default()
    };
    let mut envelope = rc.clone();
    for vh in &mut envelope.virtual_hosts {
        vh.routes.clear();
    }
    let unavailable = |findings: &mut GatewayFindings, m: &str| {
        findings
            .problems
            .push((format!("STRICT validation of {} unavailable: {m}", rc.name), true));
        Envelope::Unavailable
    };
    match validator
        .validate(&[candidate(
            gw,
            vec![envelope.clone()],
            format!("{} hosts", rc.name),
        )])
        .first()
    {
        Some(Verdict::Accepted) => return Envelope::Accepted,
        Some(Verdict::Rejected(_)) => {}
        Some(Verdict::Unavailable(m)) => return unavailable(findings, m),
        None => return unavailable(findings, "the validator gave no verdict"),
    }
    // Each domain alone, on a bare host of its own.
    let checks: Vec<(usize, String)> = envelope
        .virtual_hosts
        .iter()
        .enumerate()
        .flat_map(|(i, vh)| vh.domains.iter().map(move |d| (i, d.clone())))
        .collect();
    let verdicts = validator.validate(
        &checks
            .iter()
            .map(|(i, d)| {
                let vh = &envelope.virtual_hosts[*i];
                host_candidate(
                    gw,
                    &envelope,
                    bare(vh, vec![d.clone()]),
                    format!("{} virtual host {} domain {d:?}", rc.name, vh.name),
                )
            })
            .collect::<Vec<_>>(),
    );
    if let Some(Verdict::Unavailable(m)) = verdicts.iter().find(|v| matches!(v, Verdict::Unavailable(_))) {
        return unavailable(findings, m);
    }
    let rejected: Vec<(usize, &String, &String)> = checks
        .iter()
        .zip(&verdicts)
        .filter_map(|((i, d), v)| match v {
            Verdict::Rejected(m) => Some((*i, d, m)),
            _ => None,
        })
        .collect();
    if rejected.is_empty() {
        return Envelope::Rejected;
    }
    let mut fixed = rc.clone();
    for &(i, d, _) in &rejected {
        fixed.virtual_hosts[i].domains.retain(|x| x != d);
    }
    fixed.virtual_hosts.retain(|vh| !vh.domains.is_empty());
    let mut fixed_envelope = fixed.clone();
    for vh in &mut fixed_envelope.virtual_hosts {
        vh.routes.clear();
    }
    match validator
        .validate(&[candidate(
            gw,
            vec![fixed_envelope],
            format!("{} hosts without rejected domains", rc.name),
        )])
        .first()
    {
        Some(Verdict::Accepted) => {
            findings
                .dropped_domains
                .extend(rejected.into_iter().map(|(i, d, m)| DroppedDomain {
                    virtual_host: rc.virtual_hosts[i].name.clone(),
                    domain: d.clone(),
                    message: m.clone(),
                }));
            *rc = fixed;
            Envelope::Rebuilt
        }
        Some(Verdict::Unavailable(m)) => unavailable(findings, m),
        _ => Envelope::Rejected,
    }
}

/// `rc` holding only `vh`, as a candidate.
fn host_candidate(gw: &GatewayXds, rc: &RouteConfiguration, vh: VirtualHost, label: String) -> Candidate {
    let mut one = rc.clone();
    one.virtual_hosts = vec![vh];
    candidate(gw, vec![one], label)
}

/// Listener scope (README, "Modes"): each virtual host that Envoy rejects
/// on its own becomes a catch-all 500 keeping its name and domains (the
/// other hosts keep serving; domains Envoy rejects were dropped before, by
/// [`drop_rejected_domains`]). `None` when that does not make the route
/// configuration acceptable (e.g. two virtual hosts with one domain: a
/// problem of several hosts, not of one).
fn fence_virtual_hosts(
    gw: &GatewayXds,
    rc: &RouteConfiguration,
    validator: &dyn Validator,
    findings: &mut GatewayFindings,
) -> Option<RouteConfiguration> {
    let alone: Vec<Candidate> = rc
        .virtual_hosts
        .iter()
        .map(|vh| {
            host_candidate(
                gw,
                rc,
                vh.clone(),
                format!("{} virtual host {}", rc.name, vh.name),
            )
        })
        .collect();
    let verdicts = validator.validate(&alone);
    let mut fenced = rc.clone();
    let mut any = Vec::new();
    let above: Vec<String> = fenced.typed_per_filter_config.keys().cloned().collect();
    for (vh, verdict) in fenced.virtual_hosts.iter_mut().zip(&verdicts) {
        if let Verdict::Rejected(m) = verdict {
            *vh = crate::replacement::scope::fenced_host(&vh.name, vh.domains.clone());
            crate::replacement::disable_filters(&mut vh.typed_per_filter_config, above.iter().cloned());
            any.push((vh.name.clone(), m.clone()));
        }
    }
    if any.is_empty() {
        return None;
    }
    let recheck = validator.validate(&[candidate(gw, vec![fenced.clone()], format!("{} fenced", rc.name))]);
    if !matches!(recheck.first(), Some(Verdict::Accepted)) {
        return None;
    }
    findings.replaced_virtual_hosts.extend(any);
    Some(fenced)
}
