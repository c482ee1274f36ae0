//! STRICT route replacement: the route configurations the translator built
//! are checked by the real Envoy (through [`Validator`], implemented outside
//! this pure crate), and whatever Envoy would reject is replaced before it
//! can reach Envoy as a NACK.
//!
//! Scope and order, per Gateway:
//! 1. the *skeleton* (listeners, secrets, every route configuration empty):
//!    if Envoy rejects it, no route is to blame — reported, nothing replaced;
//! 2. each route configuration, in one batch: a clean one costs one call;
//! 3. a rejected one is bisected over its routes (halves validated as
//!    route configurations holding only those routes, in batches, so calls
//!    run in parallel) down to the single routes Envoy rejects; each such
//!    route is replaced by the 500 (it keeps its match), its rule reported
//!    as `Replaced Rule (i): rejected by Envoy: …` (class `structural`);
//! 4. the replaced configuration is validated again; when it still fails
//!    (a virtual-host-level problem, or routes that only fail together),
//!    each virtual host Envoy rejects on its own becomes a catch-all 500
//!    keeping its name and domains; if that is not enough either (e.g. two
//!    virtual hosts with one domain), the whole route configuration
//!    becomes one catch-all 500 virtual host.
//!
//! Before 3, a rejected configuration's virtual hosts are checked without
//! routes: a domain Envoy rejects on its own (e.g. a control character)
//! would fail every subset and blame every route, so it is dropped first
//! (a host left without a domain is removed; no valid `Host` can match such
//! a domain), and when the hosts are rejected for another reason no route
//! is bisected at all.
//!
//! Before 3, the scope configuration (what a Gateway or listener policy
//! puts on the route configuration or a virtual host) is checked on its
//! own around one catch-all route ([`scope_first`]): when Envoy rejects
//! it, that scope is replaced (the configuration by one catch-all 500
//! host, a virtual host by a catch-all 500 keeping its name and domains)
//! and `policy::scope` reports it as the policy's failure; its routes are
//! not bisected.
//!
//! A validator that cannot answer (binary missing, timeout, crash) is an
//! `environment` error: reported, never by itself a reason to replace.

use std::fmt;
use std::str::FromStr;

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use serde_json::Value;

use crate::GatewayXds;
use crate::output::bootstrap::{BootstrapOptions, static_bootstrap};
use crate::xds::encoded::EncodedRouteConfiguration;

/// `routeReplacementMode` (design §1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplacementMode {
    /// Every error portcullis can detect in-process leads to replacement.
    #[default]
    Standard,
    /// STANDARD, plus validation of the generated xDS by the real Envoy.
    Strict,
}

impl ReplacementMode {
    pub const ALLOWED: &'static [&'static str] = &["STANDARD", "STRICT"];
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid route replacement mode {value:?}: allowed values are STANDARD, STRICT")]
pub struct InvalidMode {
    pub value: String,
}

impl FromStr for ReplacementMode {
    type Err = InvalidMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "STANDARD" => Ok(ReplacementMode::Standard),
            "STRICT" => Ok(ReplacementMode::Strict),
            other => Err(InvalidMode { value: other.into() }),
        }
    }
}

impl fmt::Display for ReplacementMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplacementMode::Standard => "STANDARD",
            ReplacementMode::Strict => "STRICT",
        })
    }
}

/// One self-contained configuration to check: a static Envoy bootstrap,
/// and, when built by this module, the same partial xDS it was made from
/// (a resident validator Envoy is fed that over ADS instead of starting a
/// process on the bootstrap).
#[derive(Clone, Debug)]
pub struct Candidate {
    /// What is being checked, for logs (`<route config> routes 3..5`).
    pub label: String,
    pub bootstrap: Value,
    /// The partial Gateway xDS behind `bootstrap`; `None` for candidates
    /// built by hand, which only a process validator can check.
    pub xds: Option<std::sync::Arc<GatewayXds>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Envoy rejected it, with its message.
    Rejected(String),
    /// The validator could not answer (environment error).
    Unavailable(String),
}

/// Validates candidates, returning one verdict per candidate in order.
/// Implementations may run them in parallel, cache and collapse duplicates.
pub trait Validator: Sync {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict>;

    /// Whether content with this key (a route, or a route configuration
    /// without its routes, in the context of its Gateway's listeners) was
    /// accepted before. A validator that remembers lets an edit cost one
    /// small call (the changed routes) instead of re-validating the whole
    /// route configuration.
    fn known_good(&self, _key: u64) -> bool {
        false
    }

    /// Records accepted content keys.
    fn remember_good(&self, _keys: &[u64]) {}
}

/// Content key of protos, in the context of `context` (the Gateway's
/// listeners and secrets: a route's validity can depend on its HCM).
fn content_key(context: u64, parts: &[&[u8]]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    context.hash(&mut h);
    parts.hash(&mut h);
    h.finish()
}

/// Keys of one route configuration, read off its bytes: its envelope
/// (virtual hosts without routes) and each route in flat order; and its
/// layout, to pick routes from.
fn rc_keys(
    context: u64,
    rc: &EncodedRouteConfiguration,
) -> (u64, Vec<u64>, Option<crate::xds::encoded::Layout<'_>>) {
    match rc.layout() {
        Some(layout) => {
            let routes = layout
                .routes()
                .into_iter()
                .map(|r| content_key(context, &[r]))
                .collect();
            let envelope = content_key(context, &[layout.subset(&[]).bytes()]);
            (envelope, routes, Some(layout))
        }
        // Not our bytes (cannot happen): judged as one piece.
        None => (content_key(context, &[rc.bytes()]), Vec::new(), None),
    }
}

/// An Envoy route found to be rejected by Envoy, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedRoute {
    pub route_name: String,
    pub message: String,
}

/// A virtual host's domain that Envoy refuses to load at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedDomain {
    pub virtual_host: String,
    pub domain: String,
    pub message: String,
}

/// What the STRICT pass found for one Gateway.
#[derive(Debug, Default)]
pub struct GatewayFindings {
    pub rejected_routes: Vec<RejectedRoute>,
    /// Route configurations replaced whole, with Envoy's message.
    pub replaced_configs: Vec<(String, String)>,
    /// Virtual hosts replaced by a catch-all 500 (name, Envoy's message).
    pub replaced_virtual_hosts: Vec<(String, String)>,
    /// Domains Envoy rejects on their own, dropped from their virtual host
    /// (removed when it has none left).
    pub dropped_domains: Vec<DroppedDomain>,
    /// Problems outside any route: (message, is_environment).
    pub problems: Vec<(String, bool)>,
    /// Scope configuration (what a Gateway or listener policy puts on a
    /// route configuration or virtual host) Envoy rejects on its own: that
    /// scope was replaced whole, its routes not bisected.
    pub scope_rejections: Vec<ScopeRejection>,
}

/// A route configuration (`virtual_host` None) or virtual host whose own
/// configuration Envoy rejects even around a single catch-all route; it
/// became the catch-all 500 (`replacement::scope`). `policy::scope` names
/// the policy that put the configuration there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeRejection {
    pub route_config: String,
    pub virtual_host: Option<String>,
    pub message: String,
}

fn candidate(gw: &GatewayXds, routes: Vec<RouteConfiguration>, label: String) -> Candidate {
    encoded_candidate(
        gw,
        routes.iter().map(EncodedRouteConfiguration::new).collect(),
        label,
    )
}

fn encoded_candidate(gw: &GatewayXds, routes: Vec<EncodedRouteConfiguration>, label: String) -> Candidate {
    let partial = GatewayXds {
        listeners: gw.listeners.clone(),
        routes,
        clusters: Vec::new(),
        endpoints: Vec::new(),
        secrets: gw.secrets.clone(),
    };
    Candidate {
        label,
        bootstrap: static_bootstrap(&partial, "portcullis-strict", &BootstrapOptions::default()),
        xds: Some(std::sync::Arc::new(partial)),
    }
}

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

/// Runs the STRICT pass on one Gateway's xDS, replacing in place.
pub fn check_gateway(key: &str, gw: &mut GatewayXds, validator: &dyn Validator) -> GatewayFindings {
    let mut findings = GatewayFindings::default();
    if gw.routes.is_empty() {
        return findings;
    }
    let context = {
        let parts: Vec<Vec<u8>> = gw
            .listeners
            .iter()
            .map(prost::Message::encode_to_vec)
            .chain(gw.secrets.iter().map(prost::Message::encode_to_vec))
            .collect();
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        content_key(0, &parts)
    };
    // Per route configuration: what is not known to be good yet.
    let mut plans = Vec::new();
    // The skeleton (listeners and secrets, every route configuration
    // empty) first, unless this exact one was accepted before.
    let skeleton_known = validator.known_good(context);
    let mut batch = if skeleton_known {
        Vec::new()
    } else {
        vec![candidate(gw, Vec::new(), format!("{key} skeleton"))]
    };
    // Keys and candidates come from the encoded bytes: a warm check reads
    // every route but decodes none.
    for (i, rc) in gw.routes.iter().enumerate() {
        let (envelope, routes, layout) = rc_keys(context, rc);
        let unknown: Vec<usize> = (0..routes.len())
            .filter(|&p| !validator.known_good(routes[p]))
            .collect();
        if layout.is_some() && unknown.is_empty() && validator.known_good(envelope) {
            continue;
        }
        let picked = layout.map_or_else(|| rc.clone(), |l| l.subset(&unknown));
        batch.push(encoded_candidate(gw, vec![picked], rc.name.clone()));
        plans.push((i, envelope, routes, unknown));
    }
    if batch.is_empty() {
        return findings;
    }
    let mut verdicts = validator.validate(&batch).into_iter();
    let skeleton_verdict = if skeleton_known {
        Some(Verdict::Accepted)
    } else {
        verdicts.next()
    };
    match skeleton_verdict {
        Some(Verdict::Accepted) => validator.remember_good(&[context]),
        Some(Verdict::Rejected(m)) => {
            findings.problems.push((
                format!("Envoy rejects Gateway {key} without any route: {m}"),
                false,
            ));
            return findings;
        }
        Some(Verdict::Unavailable(m)) => {
            findings
                .problems
                .push((format!("STRICT validation of {key} unavailable: {m}"), true));
            return findings;
        }
        None => {
            findings.problems.push((
                format!("STRICT validation of {key} unavailable: the validator gave no verdict"),
                true,
            ));
            return findings;
        }
    }
    for ((rc_index, envelope, routes, unknown), verdict) in plans.into_iter().zip(verdicts) {
        match verdict {
            Verdict::Accepted => {
                let mut good: Vec<u64> = unknown.iter().map(|&p| routes[p]).collect();
                good.push(envelope);
                validator.remember_good(&good);
            }
            Verdict::Unavailable(m) => findings.problems.push((
                format!(
                    "STRICT validation of {} unavailable: {m}",
                    gw.routes[rc_index].name
                ),
                true,
            )),
            Verdict::Rejected(m) => {
                // Replacing edits the message: decoded here, encoded again.
                let mut rc = gw.routes[rc_index].decode();
                // Scope configuration first: a policy's configuration on
                // the route configuration or a virtual host that Envoy
                // rejects replaces that scope; bisecting routes could only
                // blame routes that are not at fault.
                match scope_first(gw, &mut rc, validator, &mut findings) {
                    Scoped::Done | Scoped::Unavailable => {}
                    Scoped::Unchanged => isolate(
                        gw,
                        &gw.routes[rc_index],
                        &mut rc,
                        unknown,
                        m,
                        validator,
                        &mut findings,
                    ),
                    Scoped::Changed => {
                        let rebuilt = EncodedRouteConfiguration::new(&rc);
                        let all = rc.virtual_hosts.iter().map(|vh| vh.routes.len()).sum();
                        isolate(
                            gw,
                            &rebuilt,
                            &mut rc,
                            (0..all).collect(),
                            m,
                            validator,
                            &mut findings,
                        );
                    }
                }
                gw.routes[rc_index] = EncodedRouteConfiguration::new(&rc);
                let (envelope, routes, _) = rc_keys(context, &gw.routes[rc_index]);
                let replaced_whole = findings.replaced_configs.iter().any(|(n, _)| *n == rc.name)
                    || findings
                        .scope_rejections
                        .iter()
                        .any(|r| r.virtual_host.is_none() && r.route_config == rc.name);
                if !replaced_whole {
                    let mut good = routes;
                    good.push(envelope);
                    validator.remember_good(&good);
                }
            }
        }
    }
    findings
}

/// What [`scope_first`] did to a rejected route configuration.
enum Scoped {
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
fn scope_first(
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
fn isolate(
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

/// `(kind, namespace, name, rule id)` of an Envoy route named by
/// `route::rule` (`httproute/<ns>/<name>/rule/<id>/match/<j>[/guard]`).
pub fn parse_route_name(name: &str) -> Option<(&'static str, &str, &str, &str)> {
    let mut parts = name.split('/');
    let kind = match parts.next()? {
        "httproute" => "HTTPRoute",
        "grpcroute" => "GRPCRoute",
        _ => return None,
    };
    let ns = parts.next()?;
    let route = parts.next()?;
    (parts.next()? == "rule").then_some(())?;
    let rule = parts.next()?;
    Some((kind, ns, route, rule))
}

/// Why `envoy --mode validate` refused a configuration, from its stderr,
/// without the temporary file's path (so the message is stable) and
/// without the proto dump Envoy prints before a constraint violation.
pub fn envoy_reason(stderr: &str) -> String {
    let text = stderr.trim();
    let line = text
        .lines()
        .find(|l| l.contains("[critical]") || l.contains("[error]"))
        .unwrap_or(text);
    let msg = line.rsplit("] ").next().unwrap_or(line);
    let msg = match msg.split_once("': ") {
        Some((head, reason)) if head.starts_with("error initializing configuration '") => reason,
        _ => msg,
    };
    // "<reason>: goo.gle/debugproto <proto dump>\n: <constraint>" (or
    // goo.gle/debugstr); either side may be empty.
    const DUMP: &str = "goo.gle/debug";
    if !text.contains(DUMP) {
        return msg.trim().to_string();
    }
    let head = msg
        .split(DUMP)
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(':')
        .trim();
    let tail = text.rfind("\n: ").map(|i| text[i + 3..].trim());
    match (head.is_empty(), tail) {
        (_, None) => head.to_string(),
        (true, Some(t)) => t.to_string(),
        (false, Some(t)) => format!("{head}: {t}"),
    }
}
