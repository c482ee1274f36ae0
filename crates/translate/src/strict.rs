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
//! own around one catch-all route: when Envoy rejects
//! it, that scope is replaced (the configuration by one catch-all 500
//! host, a virtual host by a catch-all 500 keeping its name and domains)
//! and `policy::scope` reports it as the policy's failure; its routes are
//! not bisected.
//!
//! This file runs the pass (candidates, content keys, the validator); the
//! narrowing and replacing of 3–4 and the two checks before 3 — STRICT's
//! fail-closed decisions — are `replacement::strict`'s.
//!
//! A validator that cannot answer (binary missing, timeout, crash) is an
//! `environment` error: reported, never by itself a reason to replace.

use std::fmt;
use std::str::FromStr;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use serde_json::Value;

use crate::GatewayXds;
use crate::output::bootstrap::{BootstrapOptions, static_bootstrap};
use crate::replacement::strict as fence;
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
    /// Rejected routes whose 500 kept its place on a widened match
    /// (`replacement/guard_match.rs`): it may shadow the routes after it.
    pub widened_matches: Vec<WidenedMatch>,
}

/// A rejected route answering 500 on a wider match than it had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WidenedMatch {
    pub route_name: String,
    /// The path prefix it now answers on; `None` for a CONNECT route,
    /// which still answers CONNECT requests only.
    pub prefix: Option<String>,
    /// Whether every condition but that prefix went (else only regexes).
    pub everything: bool,
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

pub(crate) fn candidate(gw: &GatewayXds, routes: Vec<RouteConfiguration>, label: String) -> Candidate {
    encoded_candidate(
        gw,
        routes.iter().map(EncodedRouteConfiguration::new).collect(),
        label,
    )
}

pub(crate) fn encoded_candidate(
    gw: &GatewayXds,
    routes: Vec<EncodedRouteConfiguration>,
    label: String,
) -> Candidate {
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
                match fence::scope_first(gw, &mut rc, validator, &mut findings) {
                    fence::Scoped::Done | fence::Scoped::Unavailable => {}
                    fence::Scoped::Unchanged => fence::isolate(
                        gw,
                        &gw.routes[rc_index],
                        &mut rc,
                        unknown,
                        m,
                        validator,
                        &mut findings,
                    ),
                    fence::Scoped::Changed => {
                        let rebuilt = EncodedRouteConfiguration::new(&rc);
                        let all = rc.virtual_hosts.iter().map(|vh| vh.routes.len()).sum();
                        fence::isolate(
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
