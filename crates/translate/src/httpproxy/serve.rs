//! Serving HTTPProxy trees on the configured Gateway (README "HTTPProxy"):
//! each valid root becomes a virtual host (domain = its FQDN) on every
//! programmed HTTP listener of that Gateway, and, with `tls`, an SNI filter
//! chain of its own on every programmed HTTPS listener.
//!
//! [`build`] turns every programmed entry of a tree into an Envoy route
//! (once per translation, encoded); [`install`] puts them into the
//! Gateway's IR. Nothing that cannot be programmed reaches Envoy:
//! - a route whose action cannot be built (a Service that does not
//!   resolve, a header Envoy refuses, a bad timeout…) keeps its match and
//!   answers the replacement 500;
//! - a condition Envoy cannot program (a header name it refuses, a path
//!   with characters it refuses) is dropped from the match, which only
//!   widens it: the route becomes a 500 guard at the original's
//!   precedence;
//! - an invalid root that still names an FQDN gets a virtual host whose
//!   every request answers 500, on the HTTP listeners and in the HTTPS
//!   listeners' own chains, so that its traffic does not reach another
//!   virtual host (a catch-all `*` of a Gateway API route).
//!
//! Precedence inside a virtual host, as Contour sorts: exact paths, then
//! regular expressions, then prefixes (longer first), then more header and
//! query conditions first; equal ranks keep processing order.
//!
//! FQDN conflicts: a hostname a Gateway API route already programs on the
//! same listener (or an HTTPS listener whose own hostname is the FQDN) is
//! kept by the Gateway API route; the HTTPProxy root is reported
//! (`VirtualHostError/FQDNConflict`) and not installed on that listener.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy,
    Route as EnvoyRoute, RouteAction, RouteMatch, WeightedCluster, header_matcher, query_parameter_matcher,
    redirect_action, route, route_action, route_match, weighted_cluster,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use super::conditions::{HeaderMatch, Merged, PathMatch, QueryMatch};
use super::tree::{Action, Entry};
use super::{Analysis, ProxyError, ProxyId, reason, type_};
use crate::backend::{self, ClusterSpec};
use crate::envoy::regex;
use crate::gateway::GatewayState;
use crate::index::Index;
use crate::ir::{self, RouteOrder, RouteStore};
use crate::listener::Protocol;
use crate::route::filters::{self, HeaderMods};
use crate::route::matches::{Rank, regex_matcher};
use crate::tls::Certificate;

/// Envoy's limit on a query parameter matcher's name.
const MAX_QUERY_NAME_BYTES: usize = 1024;

/// One root (or fenced FQDN) ready to install.
#[derive(Debug)]
pub struct ServedHost {
    pub root: ProxyId,
    pub fqdn: String,
    /// For an HTTPS SNI chain (TLS roots).
    pub certificate: Option<Certificate>,
    /// `tls.minimumProtocolVersion: "1.3"`.
    pub tls13_only: bool,
    /// Routes for plaintext listeners (redirects to HTTPS for a TLS root,
    /// except routes with `permitInsecure`).
    pub http: Vec<(RouteOrder, Vec<u8>)>,
    /// Routes for the root's SNI chain (TLS roots only).
    pub https: Vec<(RouteOrder, Vec<u8>)>,
}

/// Everything HTTPProxies add to the serving Gateway.
#[derive(Debug, Default)]
pub struct Served {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    pub hosts: Vec<ServedHost>,
    pub clusters: BTreeMap<String, ClusterSpec>,
}

/// A root not installed on a listener because a Gateway API route (or an
/// HTTPS listener) already claims its FQDN there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub root: ProxyId,
    pub fqdn: String,
    /// The listener's name, and its index in the Gateway's listeners.
    pub listener: String,
    pub listener_index: usize,
}

/// What [`install`] could not do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    pub conflicts: Vec<Conflict>,
    /// Roots (and FQDNs) installed on no listener, and not for a conflict.
    pub unserved: Vec<(ProxyId, String)>,
}

/// Builds the Envoy routes of every served root, recording what could not
/// be programmed on the proxy concerned.
pub fn build(index: &Index<'_>, analysis: &mut Analysis<'_>, gateway: &str) -> Served {
    let Analysis {
        virtual_hosts,
        statuses,
    } = analysis;
    let mut served = Served {
        gateway: gateway.to_string(),
        ..Default::default()
    };
    let mut fqdns_served = std::collections::BTreeSet::new();
    for vh in virtual_hosts.iter() {
        let certificate = match &vh.tls {
            None => None,
            Some(tls) => match certificate(index, &tls.secret_namespace, &tls.secret_name) {
                Ok(c) => Some(c),
                Err(message) => {
                    statuses.error(
                        &vh.root,
                        ProxyError::referential(
                            type_::TLS_ERROR,
                            reason::SECRET_NOT_VALID,
                            "spec.virtualhost.tls.secretName",
                            format!(
                                "Spec.VirtualHost.TLS Secret \"{}/{}\" is invalid: {message}",
                                tls.secret_namespace, tls.secret_name
                            ),
                        ),
                    );
                    served.hosts.push(fenced_host(&vh.root, &vh.fqdn));
                    fqdns_served.insert(vh.fqdn.clone());
                    continue;
                }
            },
        };
        let mut host = ServedHost {
            root: vh.root.clone(),
            fqdn: vh.fqdn.clone(),
            certificate: None,
            tls13_only: vh
                .tls
                .as_ref()
                .is_some_and(|t| t.minimum_protocol_version == "1.3"),
            http: Vec::new(),
            https: Vec::new(),
        };
        for (i, entry) in vh.entries.iter().enumerate() {
            if !entry.programmed {
                continue;
            }
            let (envoy, rank, permit_insecure) = match entry_route(index, entry, &mut served.clusters) {
                Ok(built) => built,
                Err(failed) => {
                    let (mut fenced, rank, error) = *failed;
                    if let Some(holder) = entry.holder() {
                        statuses.error(holder, error);
                    }
                    crate::replacement::replace(&mut fenced);
                    (fenced, rank, false)
                }
            };
            let order = RouteOrder {
                rank,
                route: i,
                rule: 0,
                match_index: 0,
            };
            if certificate.is_some() {
                let plain = if permit_insecure {
                    envoy.clone()
                } else {
                    https_redirect(&envoy)
                };
                host.http.push((order, crate::xds::canonical::route(&plain)));
                host.https.push((order, crate::xds::canonical::route(&envoy)));
            } else {
                host.http.push((order, crate::xds::canonical::route(&envoy)));
            }
        }
        host.certificate = certificate;
        fqdns_served.insert(vh.fqdn.clone());
        served.hosts.push(host);
    }
    // Invalid roots keep their FQDN fenced (unless a valid root serves it).
    let mut fenced: Vec<(ProxyId, String)> = statuses
        .proxies
        .iter()
        .filter(|(id, f)| !f.errors.is_empty() && !virtual_hosts.iter().any(|v| &v.root == *id))
        .filter_map(|(id, f)| f.fqdn.clone().map(|fqdn| (id.clone(), fqdn)))
        .filter(|(_, fqdn)| !fqdns_served.contains(fqdn) && crate::hostname::is_valid(fqdn, false))
        .collect();
    fenced.sort_by(|a, b| a.1.cmp(&b.1));
    fenced.dedup_by(|a, b| a.1 == b.1);
    for (id, fqdn) in fenced {
        served.hosts.push(fenced_host(&id, &fqdn));
    }
    served
}

/// A virtual host whose every request answers the replacement 500.
fn fenced_host(root: &ProxyId, fqdn: &str) -> ServedHost {
    let mut r = EnvoyRoute {
        name: format!("httpproxy/{root}/fenced"),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        ..Default::default()
    };
    crate::replacement::replace(&mut r);
    let order = RouteOrder {
        rank: Rank::of(2, 1, 0, 0),
        route: 0,
        rule: 0,
        match_index: 0,
    };
    ServedHost {
        root: root.clone(),
        fqdn: fqdn.to_string(),
        certificate: None,
        tls13_only: false,
        http: vec![(order, crate::xds::canonical::route(&r))],
        // Installed in the HTTPS listeners' own chains too, so that a
        // request for this FQDN over TLS does not reach another host.
        https: vec![(order, crate::xds::canonical::route(&r))],
    }
}

fn certificate(index: &Index<'_>, ns: &str, name: &str) -> Result<Certificate, String> {
    let secret = index.secret(ns, name).ok_or("Secret not found")?;
    let (cert_pem, key_pem) = crate::tls::check_secret(secret)?;
    Ok(Certificate {
        sds_name: crate::naming::secret(ns, name),
        cert_pem,
        key_pem,
    })
}

/// The same match, answering a redirect to HTTPS (Contour: 301).
fn https_redirect(r: &EnvoyRoute) -> EnvoyRoute {
    EnvoyRoute {
        name: r.name.clone(),
        r#match: r.r#match.clone(),
        action: Some(route::Action::Redirect(RedirectAction {
            scheme_rewrite_specifier: Some(redirect_action::SchemeRewriteSpecifier::HttpsRedirect(true)),
            response_code: redirect_action::RedirectResponseCode::MovedPermanently as i32,
            ..Default::default()
        })),
        ..Default::default()
    }
}

type Built = (EnvoyRoute, Rank, bool);
/// A route that could not be built: its match (a guard where the match
/// itself could not be programmed), rank and why.
type Failed = Box<(EnvoyRoute, Rank, ProxyError)>;

/// One entry as an Envoy route: `(route, rank, permitInsecure)`.
fn entry_route(
    index: &Index<'_>,
    entry: &Entry<'_>,
    clusters: &mut BTreeMap<String, ClusterSpec>,
) -> Result<Built, Failed> {
    let holder = entry.holder().cloned().unwrap_or_else(|| ProxyId::new("", ""));
    let (rm, rank, match_error) = route_match(&entry.conditions);
    let name = match &entry.action {
        Action::Route { index, .. } => format!("httpproxy/{holder}/routes/{index}"),
        Action::BadGateway { include } => format!("httpproxy/{holder}/include/{include}"),
        Action::Fence { .. } => format!("httpproxy/{holder}/fenced"),
    };
    let mut r = EnvoyRoute {
        name,
        r#match: Some(rm),
        ..Default::default()
    };
    let field_prefix = match &entry.action {
        Action::Route { index, .. } => format!("spec.routes[{index}]"),
        _ => "spec".to_string(),
    };
    if let Some(message) = match_error {
        return Err(Box::new((
            r,
            rank,
            ProxyError::structural(
                type_::ROUTE_ERROR,
                reason::ROUTE_NOT_PROGRAMMABLE,
                format!("{field_prefix}.conditions"),
                format!("{message}; the route answers 500 for what it matches"),
            ),
        )));
    }
    let route = match &entry.action {
        Action::Route { route, .. } => *route,
        Action::BadGateway { .. } => {
            r.action = Some(route::Action::DirectResponse(DirectResponseAction {
                status: 502,
                ..Default::default()
            }));
            return Ok((r, rank, false));
        }
        Action::Fence { .. } => {
            crate::replacement::replace(&mut r);
            return Ok((r, rank, false));
        }
    };
    match action(
        index,
        &holder,
        route,
        &entry.conditions,
        &field_prefix,
        clusters,
        &mut r,
    ) {
        Ok(()) => Ok((r, rank, route.permit_insecure)),
        Err(e) => Err(Box::new((r, rank, e))),
    }
}

/// Contour's rank (`internal/sorter`) as a [`Rank`]: path kind (exact,
/// regex, prefix), longer first, more headers, more queries.
fn rank_of(m: &Merged) -> Rank {
    let kind = match m.path {
        PathMatch::Exact(_) => 0,
        PathMatch::Regex(_) => 1,
        PathMatch::Prefix(_) => 2,
    };
    Rank::of(kind, m.path.value().len(), m.headers.len(), m.queries.len())
}

fn path_ok(p: &str) -> bool {
    p.starts_with('/') && !p.contains(['?', '#']) && !p.bytes().any(|b| b.is_ascii_control() || b == b' ')
}

/// The Envoy match of merged conditions, the rank, and (when some
/// condition could not be programmed and was dropped, leaving a guard)
/// why.
fn route_match(m: &Merged) -> (RouteMatch, Rank, Option<String>) {
    let rank = rank_of(m);
    let mut problem: Option<String> = None;
    let path = match &m.path {
        PathMatch::Prefix(p) if path_ok(p) => route_match::PathSpecifier::Prefix(p.clone()),
        PathMatch::Exact(p) if path_ok(p) => route_match::PathSpecifier::Path(p.clone()),
        PathMatch::Regex(p) if regex::check(p).is_ok() => {
            route_match::PathSpecifier::SafeRegex(regex_matcher(p))
        }
        other => {
            problem.get_or_insert(format!("path {:?} cannot be programmed", other.value()));
            let literal = match other {
                PathMatch::Regex(p) => regex::literal_prefix(p),
                PathMatch::Prefix(p) | PathMatch::Exact(p) => p.clone(),
            };
            let cut: String = literal
                .chars()
                .take_while(|c| !c.is_ascii_control() && !matches!(c, '?' | '#' | ' '))
                .collect();
            route_match::PathSpecifier::Prefix(if cut.starts_with('/') { cut } else { "/".into() })
        }
    };
    let mut rm = RouteMatch {
        path_specifier: Some(path),
        ..Default::default()
    };
    for h in &m.headers {
        if !filters::is_header_name(&h.name) || h.name.len() > filters::MAX_HEADER_BYTES {
            problem.get_or_insert(format!("header name {:?} cannot be programmed", h.name));
            continue;
        }
        let string = |p: string_matcher::MatchPattern| StringMatcher {
            match_pattern: Some(p),
            ignore_case: h.ignore_case,
        };
        let (spec, invert) = match &h.matcher {
            HeaderMatch::Present => (header_matcher::HeaderMatchSpecifier::PresentMatch(true), false),
            HeaderMatch::NotPresent => (header_matcher::HeaderMatchSpecifier::PresentMatch(true), true),
            HeaderMatch::Exact(v) => (
                header_matcher::HeaderMatchSpecifier::StringMatch(string(
                    string_matcher::MatchPattern::Exact(v.clone()),
                )),
                false,
            ),
            HeaderMatch::NotExact(v) => (
                header_matcher::HeaderMatchSpecifier::StringMatch(string(
                    string_matcher::MatchPattern::Exact(v.clone()),
                )),
                true,
            ),
            HeaderMatch::Contains(v) => (
                header_matcher::HeaderMatchSpecifier::StringMatch(string(
                    string_matcher::MatchPattern::Contains(v.clone()),
                )),
                false,
            ),
            HeaderMatch::NotContains(v) => (
                header_matcher::HeaderMatchSpecifier::StringMatch(string(
                    string_matcher::MatchPattern::Contains(v.clone()),
                )),
                true,
            ),
            HeaderMatch::Regex(v) => {
                if regex::check(v).is_err() {
                    problem.get_or_insert(format!("header {:?} regex {v:?} cannot be programmed", h.name));
                    continue;
                }
                (
                    header_matcher::HeaderMatchSpecifier::StringMatch(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex_matcher(v))),
                        ignore_case: false,
                    }),
                    false,
                )
            }
        };
        rm.headers.push(HeaderMatcher {
            name: h.name.clone(),
            invert_match: invert,
            treat_missing_header_as_empty: h.treat_missing_as_empty,
            header_match_specifier: Some(spec),
        });
    }
    for q in &m.queries {
        if q.name.is_empty() || q.name.len() > MAX_QUERY_NAME_BYTES {
            problem.get_or_insert(format!("query parameter name {:?} cannot be programmed", q.name));
            continue;
        }
        let string = |p: string_matcher::MatchPattern| {
            query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(p),
                ignore_case: q.ignore_case,
            })
        };
        let spec = match &q.matcher {
            QueryMatch::Present => query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true),
            QueryMatch::Exact(v) => string(string_matcher::MatchPattern::Exact(v.clone())),
            QueryMatch::Prefix(v) => string(string_matcher::MatchPattern::Prefix(v.clone())),
            QueryMatch::Suffix(v) => string(string_matcher::MatchPattern::Suffix(v.clone())),
            QueryMatch::Contains(v) => string(string_matcher::MatchPattern::Contains(v.clone())),
            QueryMatch::Regex(v) => {
                if regex::check(v).is_err() {
                    problem.get_or_insert(format!(
                        "query parameter {:?} regex {v:?} cannot be programmed",
                        q.name
                    ));
                    continue;
                }
                string(string_matcher::MatchPattern::SafeRegex(regex_matcher(v)))
            }
        };
        rm.query_parameters.push(QueryParameterMatcher {
            name: q.name.clone(),
            query_parameter_match_specifier: Some(spec),
        });
    }
    (rm, rank, problem)
}

fn route_error(reason: &'static str, field: String, message: impl Into<String>) -> ProxyError {
    ProxyError::structural(type_::ROUTE_ERROR, reason, field, message)
}

fn pb_duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Contour's durations: Go's `time.ParseDuration` spellings portcullis
/// reads (`10s`, `1m30s`, `500ms`), or `infinity` (no timeout: 0).
fn contour_duration(v: &str) -> Result<std::time::Duration, String> {
    if v == "infinity" || v == "infinite" {
        return Ok(std::time::Duration::ZERO);
    }
    crate::duration::parse(v)
}

fn header_policy(
    policy: Option<&api::httpproxy::HeadersPolicy>,
    field: &str,
    allow_host: bool,
) -> Result<(HeaderMods, Option<String>), String> {
    let mut mods = HeaderMods::default();
    let mut host = None;
    let Some(p) = policy else {
        return Ok((mods, host));
    };
    let mut set = Vec::new();
    for h in &p.set {
        if allow_host && h.name.eq_ignore_ascii_case("host") {
            if !crate::hostname::is_valid(&h.value, false) {
                return Err(format!(
                    "{:?} is not a valid hostname for the Host header",
                    h.value
                ));
            }
            host = Some(h.value.clone());
        } else {
            set.push((h.name.as_str(), h.value.as_str()));
        }
    }
    filters::header_modifier(set, [], &p.remove, field, &mut mods).map_err(|e| e.message)?;
    Ok((mods, host))
}

/// Fills `r`'s action from the route: services (weighted, mirrors, h2c),
/// redirect or direct response, header policies, rewrite, timeouts,
/// retries, websockets.
fn action(
    index: &Index<'_>,
    holder: &ProxyId,
    route: &api::httpproxy::Route,
    conditions: &Merged,
    field: &str,
    clusters: &mut BTreeMap<String, ClusterSpec>,
    r: &mut EnvoyRoute,
) -> Result<(), ProxyError> {
    let (req, host) = header_policy(
        route.request_headers_policy.as_ref(),
        &format!("{field}.requestHeadersPolicy"),
        true,
    )
    .map_err(|m| {
        route_error(
            reason::REQUEST_HEADERS_POLICY_INVALID,
            format!("{field}.requestHeadersPolicy"),
            format!("{m} on request headers"),
        )
    })?;
    let (resp, _) = header_policy(
        route.response_headers_policy.as_ref(),
        &format!("{field}.responseHeadersPolicy"),
        false,
    )
    .map_err(|m| {
        route_error(
            reason::RESPONSE_HEADER_POLICY_INVALID,
            format!("{field}.responseHeadersPolicy"),
            format!("{m} on response headers"),
        )
    })?;
    r.request_headers_to_add = req.add;
    r.request_headers_to_remove = req.remove;
    r.response_headers_to_add = resp.add;
    r.response_headers_to_remove = resp.remove;

    if let Some(d) = &route.direct_response_policy {
        if !(200..=599).contains(&d.status_code) {
            return Err(route_error(
                reason::DIRECT_RESPONSE_POLICY_INVALID,
                format!("{field}.directResponsePolicy.statusCode"),
                format!("status code {} is not between 200 and 599", d.status_code),
            ));
        }
        r.action = Some(route::Action::DirectResponse(DirectResponseAction {
            status: d.status_code as u32,
            body: (!d.body.is_empty()).then(|| DataSource {
                specifier: Some(data_source::Specifier::InlineString(d.body.clone())),
                ..Default::default()
            }),
            ..Default::default()
        }));
        return Ok(());
    }
    if let Some(p) = &route.request_redirect_policy {
        r.action = Some(route::Action::Redirect(redirect(
            p,
            &format!("{field}.requestRedirectPolicy"),
        )?));
        return Ok(());
    }

    let mut weighted = Vec::new();
    let mut mirrors = Vec::new();
    let all_zero = route.services.iter().filter(|s| !s.mirror).all(|s| s.weight == 0);
    for (si, s) in route.services.iter().enumerate() {
        let sfield = format!("{field}.services[{si}]");
        let h2c = match s.protocol.as_deref() {
            None => false,
            Some("h2c") => true,
            Some(other) => {
                return Err(ProxyError::structural(
                    type_::SERVICE_ERROR,
                    reason::UNSUPPORTED_PROTOCOL,
                    format!("{sfield}.protocol"),
                    format!("unsupported protocol: {other}"),
                ));
            }
        };
        let port = i32::try_from(s.port).ok().filter(|p| (1..=65535).contains(p));
        let cluster = port
            .ok_or_else(|| format!("port {} is not a valid port", s.port))
            .and_then(|port| backend::service_cluster(index, &holder.namespace, &s.name, port, h2c, clusters))
            .map_err(|m| {
                ProxyError::referential(
                    type_::SERVICE_ERROR,
                    reason::SERVICE_UNRESOLVED_REFERENCE,
                    sfield.clone(),
                    format!("Service [{}:{}] is invalid or missing: {m}", s.name, s.port),
                )
            })?;
        if s.mirror {
            if !mirrors.is_empty() {
                return Err(ProxyError::semantic(
                    type_::SERVICE_ERROR,
                    reason::ONLY_ONE_MIRROR,
                    sfield,
                    "only one service per route may be nominated as mirror",
                ));
            }
            mirrors.push(route_action::RequestMirrorPolicy {
                cluster,
                ..Default::default()
            });
            continue;
        }
        let weight = if all_zero { 1 } else { s.weight };
        let weight = u32::try_from(weight)
            .ok()
            .filter(|w| *w <= 1_000_000)
            .ok_or_else(|| {
                ProxyError::structural(
                    type_::SERVICE_ERROR,
                    reason::SERVICE_WEIGHT_INVALID,
                    format!("{sfield}.weight"),
                    format!("weight {} is not between 0 and 1000000", s.weight),
                )
            })?;
        let (sreq, shost) = header_policy(
            s.request_headers_policy.as_ref(),
            &format!("{sfield}.requestHeadersPolicy"),
            false,
        )
        .map_err(|m| {
            ProxyError::structural(
                type_::SERVICE_ERROR,
                reason::REQUEST_HEADERS_POLICY_INVALID,
                format!("{sfield}.requestHeadersPolicy"),
                format!("{m} on request headers"),
            )
        })?;
        debug_assert!(shost.is_none());
        let (sresp, _) = header_policy(
            s.response_headers_policy.as_ref(),
            &format!("{sfield}.responseHeadersPolicy"),
            false,
        )
        .map_err(|m| {
            ProxyError::structural(
                type_::SERVICE_ERROR,
                reason::RESPONSE_HEADERS_POLICY_INVALID,
                format!("{sfield}.responseHeadersPolicy"),
                format!("{m} on response headers"),
            )
        })?;
        if weight == 0 {
            continue;
        }
        weighted.push(weighted_cluster::ClusterWeight {
            name: cluster,
            weight: Some(UInt32Value { value: weight }),
            request_headers_to_add: sreq.add,
            request_headers_to_remove: sreq.remove,
            response_headers_to_add: sresp.add,
            response_headers_to_remove: sresp.remove,
            ..Default::default()
        });
    }
    if weighted.is_empty() {
        return Err(ProxyError::semantic(
            type_::SERVICE_ERROR,
            reason::SERVICE_UNRESOLVED_REFERENCE,
            format!("{field}.services"),
            "no service receives traffic (only mirrors, or every weight is 0)",
        ));
    }
    let mut a = RouteAction {
        cluster_not_found_response_code: route_action::ClusterNotFoundResponseCode::InternalServerError
            as i32,
        request_mirror_policies: mirrors,
        ..Default::default()
    };
    let single = weighted.len() == 1
        && weighted[0].request_headers_to_add.is_empty()
        && weighted[0].request_headers_to_remove.is_empty()
        && weighted[0].response_headers_to_add.is_empty()
        && weighted[0].response_headers_to_remove.is_empty();
    a.cluster_specifier = Some(if single {
        route_action::ClusterSpecifier::Cluster(weighted.remove(0).name)
    } else {
        route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: weighted,
            ..Default::default()
        })
    });
    if let Some(h) = host {
        a.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h));
    }
    if let Some(p) = &route.path_rewrite_policy {
        prefix_rewrite(p, conditions, field, &mut a)?;
    }
    if let Some(t) = &route.timeout_policy {
        let tfield = format!("{field}.timeoutPolicy");
        let parse = |v: &str, which: &str| {
            contour_duration(v).map_err(|e| {
                route_error(
                    reason::TIMEOUT_POLICY_NOT_VALID,
                    format!("{tfield}.{which}"),
                    format!("route.timeoutPolicy failed to parse: {e}"),
                )
            })
        };
        if !t.response.is_empty() {
            a.timeout = Some(pb_duration(parse(&t.response, "response")?));
        }
        if !t.idle.is_empty() {
            a.idle_timeout = Some(pb_duration(parse(&t.idle, "idle")?));
        }
        if !t.idle_connection.is_empty() {
            return Err(route_error(
                reason::TIMEOUT_POLICY_NOT_VALID,
                format!("{tfield}.idleConnection"),
                "route.timeoutPolicy.idleConnection is not supported by portcullis",
            ));
        }
    }
    if let Some(p) = &route.retry_policy {
        let pfield = format!("{field}.retryPolicy");
        let count = u32::try_from(p.count.max(1)).unwrap_or(u32::MAX);
        let mut policy = RetryPolicy {
            retry_on: if p.retry_on.is_empty() {
                "5xx".into()
            } else {
                p.retry_on.join(",")
            },
            num_retries: Some(UInt32Value { value: count }),
            retriable_status_codes: p.retriable_status_codes.clone(),
            ..Default::default()
        };
        for on in &p.retry_on {
            if !RETRY_ON.contains(&on.as_str()) {
                return Err(route_error(
                    reason::RETRY_POLICY_NOT_VALID,
                    format!("{pfield}.retryOn"),
                    format!("{on:?} is not a retry condition Envoy knows"),
                ));
            }
        }
        if p.retriable_status_codes.iter().any(|c| !(100..=599).contains(c)) {
            return Err(route_error(
                reason::RETRY_POLICY_NOT_VALID,
                format!("{pfield}.retriableStatusCodes"),
                "status codes must be between 100 and 599",
            ));
        }
        if !p.per_try_timeout.is_empty() {
            let d = contour_duration(&p.per_try_timeout).map_err(|e| {
                route_error(
                    reason::RETRY_POLICY_NOT_VALID,
                    format!("{pfield}.perTryTimeout"),
                    e,
                )
            })?;
            policy.per_try_timeout = Some(pb_duration(d));
        }
        a.retry_policy = Some(policy);
    }
    if route.enable_websockets {
        a.upgrade_configs.push(route_action::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..Default::default()
        });
    }
    r.action = Some(route::Action::Route(a));
    Ok(())
}

/// Envoy's `x-envoy-retry-on` and `x-envoy-retry-grpc-on` conditions.
const RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// `pathRewritePolicy.replacePrefix` (Contour): the entry whose `prefix`
/// is the route's merged prefix wins, else the one without `prefix`.
fn prefix_rewrite(
    p: &api::httpproxy::PathRewritePolicy,
    conditions: &Merged,
    field: &str,
    a: &mut RouteAction,
) -> Result<(), ProxyError> {
    let pfield = format!("{field}.pathRewritePolicy.replacePrefix");
    let PathMatch::Prefix(prefix) = &conditions.path else {
        return Err(ProxyError::semantic(
            type_::PREFIX_REPLACE_ERROR,
            reason::MUST_HAVE_PREFIX,
            pfield,
            "cannot specify prefix replacements without a prefix condition",
        ));
    };
    let chosen = p
        .replace_prefix
        .iter()
        .find(|r| !r.prefix.is_empty() && r.prefix == *prefix)
        .or_else(|| p.replace_prefix.iter().find(|r| r.prefix.is_empty()));
    if let Some(r) = chosen {
        if !r.replacement.starts_with('/') || r.replacement.bytes().any(|b| b.is_ascii_control() || b == b' ')
        {
            return Err(ProxyError::structural(
                type_::PREFIX_REPLACE_ERROR,
                reason::PREFIX_REPLACEMENT_NOT_VALID,
                pfield,
                format!("replacement {:?} is not a valid path prefix", r.replacement),
            ));
        }
        a.prefix_rewrite = r.replacement.clone();
    }
    Ok(())
}

fn redirect(p: &api::httpproxy::RequestRedirectPolicy, field: &str) -> Result<RedirectAction, ProxyError> {
    let invalid = |m: String| {
        route_error(
            reason::REQUEST_REDIRECT_POLICY,
            field.to_string(),
            format!("route.requestRedirectPolicy is invalid: {m}"),
        )
    };
    let mut r = RedirectAction::default();
    if let Some(s) = &p.scheme {
        if s != "http" && s != "https" {
            return Err(invalid(format!("scheme {s:?} must be http or https")));
        }
        r.scheme_rewrite_specifier = Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s.clone()));
    }
    if let Some(h) = &p.hostname {
        if !crate::hostname::is_valid(h, false) {
            return Err(invalid(format!("{h:?} is not a valid hostname")));
        }
        r.host_redirect = h.clone();
    }
    if let Some(port) = p.port {
        if !(1..=65535).contains(&port) {
            return Err(invalid(format!("{port} is not a valid port")));
        }
        r.port_redirect = port.unsigned_abs();
    }
    r.response_code = match p.status_code.unwrap_or(302) {
        301 => redirect_action::RedirectResponseCode::MovedPermanently,
        302 => redirect_action::RedirectResponseCode::Found,
        other => return Err(invalid(format!("status code {other} must be 301 or 302"))),
    } as i32;
    match (&p.path, &p.prefix) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "cannot specify both redirect path and redirect prefix".into(),
            ));
        }
        (Some(path), None) => {
            if !path_ok(path) {
                return Err(invalid(format!("{path:?} is not a valid path")));
            }
            r.path_rewrite_specifier =
                Some(redirect_action::PathRewriteSpecifier::PathRedirect(path.clone()));
        }
        (None, Some(prefix)) => {
            if !path_ok(prefix) {
                return Err(invalid(format!("{prefix:?} is not a valid path prefix")));
            }
            r.path_rewrite_specifier = Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(
                prefix.clone(),
            ));
        }
        (None, None) => {}
    }
    Ok(r)
}

/// Installs the served roots into the IR of the serving Gateway: a virtual
/// host per root on every programmed HTTP listener, an SNI chain per TLS
/// root on every programmed HTTPS port. Returns the FQDNs not installed
/// because something else already claims them, or no listener admits.
pub fn install(
    ir: &mut ir::Gateway,
    store: &mut RouteStore,
    gw: &GatewayState<'_>,
    served: &Served,
) -> Installed {
    let mut conflicts = Vec::new();
    let mut admitted = std::collections::BTreeSet::new();
    ir.clusters
        .extend(served.clusters.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (li, l) in gw.listeners.iter().enumerate().filter(|(_, l)| l.programmed()) {
        let Some(protocol) = l.protocol else { continue };
        let Some(port) = ir.ports.get_mut(&l.port) else {
            continue;
        };
        for host in &served.hosts {
            if crate::hostname::intersect(l.hostname.as_deref(), &host.fqdn).is_none() {
                continue;
            }
            match protocol {
                Protocol::Http => {
                    let Some(chain) = port.chains.first_mut() else {
                        continue;
                    };
                    if chain.virtual_hosts.contains_key(&host.fqdn) {
                        conflicts.push(Conflict {
                            root: host.root.clone(),
                            fqdn: host.fqdn.clone(),
                            listener: l.key.clone(),
                            listener_index: li,
                        });
                        continue;
                    }
                    add(chain, store, host, &host.http, &l.key);
                    admitted.insert(host.fqdn.clone());
                }
                Protocol::Https => {
                    let Some(cert) = &host.certificate else {
                        // A fenced FQDN: its 500 in the listener's own
                        // chain (unless a Gateway API route serves it).
                        let own = crate::naming::route_config(&gw.namespace, &gw.name, l.port, Some(&l.key));
                        if let Some(chain) = port.chains.iter_mut().find(|c| c.route_config == own)
                            && !host.https.is_empty()
                            && !chain.virtual_hosts.contains_key(&host.fqdn)
                        {
                            add(chain, store, host, &host.https, &l.key);
                        }
                        continue;
                    };
                    let name = crate::naming::route_config(
                        &gw.namespace,
                        &gw.name,
                        l.port,
                        Some(&format!("httpproxy:{}", host.fqdn)),
                    );
                    if port.chains.iter().any(|c| c.route_config == name) {
                        admitted.insert(host.fqdn.clone());
                        continue; // already installed by another listener on this port
                    }
                    if port.chains.iter().any(|c| c.server_names.contains(&host.fqdn)) {
                        conflicts.push(Conflict {
                            root: host.root.clone(),
                            fqdn: host.fqdn.clone(),
                            listener: l.key.clone(),
                            listener_index: li,
                        });
                        continue;
                    }
                    ir.certificates.insert(cert.sds_name.clone(), cert.clone());
                    let mut chain = ir::Chain {
                        route_config: name,
                        server_names: vec![host.fqdn.clone()],
                        certificates: vec![cert.sds_name.clone()],
                        virtual_hosts: BTreeMap::new(),
                        http_filters: Default::default(),
                        scope: ir::Scope::default(),
                        tls13_only: host.tls13_only,
                    };
                    add(&mut chain, store, host, &host.https, &l.key);
                    admitted.insert(host.fqdn.clone());
                    port.chains.push(chain);
                }
            }
        }
    }
    let conflicted: std::collections::BTreeSet<&str> =
        conflicts.iter().map(|c: &Conflict| c.fqdn.as_str()).collect();
    let unserved = served
        .hosts
        .iter()
        .filter(|h| !admitted.contains(&h.fqdn) && !conflicted.contains(h.fqdn.as_str()))
        .map(|h| (h.root.clone(), h.fqdn.clone()))
        .collect();
    Installed { conflicts, unserved }
}

fn add(
    chain: &mut ir::Chain,
    store: &mut RouteStore,
    host: &ServedHost,
    routes: &[(RouteOrder, Vec<u8>)],
    owner: &str,
) {
    let (orders, bytes): (Vec<RouteOrder>, Vec<Option<Vec<u8>>>) =
        routes.iter().map(|(o, b)| (*o, Some(b.clone()))).unzip();
    let refs = store.add(bytes, 1).into_iter().next().unwrap_or_default();
    chain.add(&host.fqdn, owner, 2, orders.into_iter().zip(refs));
}

/// Records FQDN conflicts on the roots (they are not served on those
/// listeners), on the Gateway and on the Gateway API routes that keep the
/// FQDN; and roots no listener of the Gateway admits.
#[allow(clippy::too_many_arguments)]
pub fn report_conflicts(
    gateway: &str,
    gateway_index: usize,
    source: &api::Source,
    installed: &Installed,
    routes: &[crate::route::model::Route<'_>],
    bindings: &[Vec<crate::binding::ParentBinding>],
    analysis: &mut Analysis<'_>,
    out: &mut crate::Output,
) {
    for c in &installed.conflicts {
        analysis.statuses.error(
            &c.root,
            ProxyError::semantic(
                type_::VIRTUAL_HOST_ERROR,
                reason::FQDN_CONFLICT,
                "spec.virtualhost.fqdn",
                format!(
                    "fqdn {:?} is also claimed on listener {} of Gateway {gateway} by a Gateway API route or listener, which keeps it there",
                    c.fqdn, c.listener
                ),
            ),
        );
        out.diagnostics.push(api::Diagnostic::warning(
            Some(format!("Gateway {gateway}")),
            Some(source),
            format!(
                "listener {}: hostname {:?} is claimed by HTTPProxy {} too; the Gateway API route (or listener) keeps it",
                c.listener, c.fqdn, c.root
            ),
        ));
        for (route, bs) in routes.iter().zip(bindings) {
            let claims = bs.iter().filter(|b| b.gateway == gateway_index).any(|b| {
                b.attachments
                    .iter()
                    .any(|a| a.listener == c.listener_index && a.hostnames.contains(&c.fqdn))
            });
            if claims {
                out.diagnostics.push(api::Diagnostic::warning(
                    Some(route.display()),
                    Some(&route.source),
                    format!(
                        "hostname {:?} on listener {} of Gateway {gateway} is also claimed by HTTPProxy {}; this route keeps it",
                        c.fqdn, c.listener, c.root
                    ),
                ));
            }
        }
    }
    for (root, fqdn) in &installed.unserved {
        analysis.statuses.error(
            root,
            ProxyError::semantic(
                type_::VIRTUAL_HOST_ERROR,
                reason::NO_MATCHING_LISTENER,
                "spec.virtualhost.fqdn",
                format!(
                    "fqdn {fqdn:?} is served on no listener of Gateway {gateway} (no programmed HTTP listener, or HTTPS listener for a TLS root, admits it)"
                ),
            ),
        );
    }
}
