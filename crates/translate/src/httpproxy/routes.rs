//! One entry of an HTTPProxy tree → one Envoy route: the match of its
//! merged conditions (with the guard that stands in when a condition
//! cannot be programmed), its precedence, and its action (services,
//! redirect, direct response, header policies, rewrite, timeouts, retries,
//! websockets). What cannot be built is returned with the route's match so
//! that the caller fences it (`serve.rs`).
//!
//! Precedence inside a virtual host, as Contour sorts: exact paths, then
//! regular expressions, then prefixes (longer first), then more header and
//! query conditions first; equal ranks keep processing order.

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
use super::{ProxyError, ProxyId, reason, type_};
use crate::backend::{self, ClusterSpec};
use crate::envoy::regex;
use crate::index::Index;
use crate::route::filters::{self, HeaderMods};
use crate::route::matches::{Rank, regex_matcher};

/// Envoy's limit on a query parameter matcher's name.
const MAX_QUERY_NAME_BYTES: usize = 1024;

pub(super) type Built = (EnvoyRoute, Rank, bool);
/// A route that could not be built: its match (a guard where the match
/// itself could not be programmed), rank and why.
pub(super) type Failed = Box<(EnvoyRoute, Rank, ProxyError)>;

/// One entry as an Envoy route: `(route, rank, permitInsecure)`.
pub(super) fn entry_route(
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
fn contour_duration(v: &str) -> Result<std::time::Duration, crate::duration::DurationError> {
    if v == "infinity" || v == "infinite" {
        return Ok(std::time::Duration::ZERO);
    }
    crate::duration::parse(v)
}

/// Why a headers policy cannot be programmed. The caller reports it on
/// the policy's field, with " on request/response headers" after it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum HeaderPolicyError {
    #[error("{value:?} is not a valid hostname for the Host header")]
    HostValue { value: String },
    /// The header modifier's error (its field is the policy's own
    /// `set[i]`/`remove[i]`); its message only, as Contour words it.
    #[error("{}", .0.message)]
    Header(#[source] crate::error::RuleError),
}

fn header_policy(
    policy: Option<&api::httpproxy::HeadersPolicy>,
    field: &str,
    allow_host: bool,
) -> Result<(HeaderMods, Option<String>), HeaderPolicyError> {
    let mut mods = HeaderMods::default();
    let mut host = None;
    let Some(p) = policy else {
        return Ok((mods, host));
    };
    let mut set = Vec::new();
    for h in &p.set {
        if allow_host && h.name.eq_ignore_ascii_case("host") {
            if !crate::hostname::is_valid(&h.value, false) {
                return Err(HeaderPolicyError::HostValue {
                    value: h.value.clone(),
                });
            }
            host = Some(h.value.clone());
        } else {
            set.push((h.name.as_str(), h.value.as_str()));
        }
    }
    filters::header_modifier(set, [], &p.remove, field, &mut mods).map_err(HeaderPolicyError::Header)?;
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
        let unresolved = |m: &dyn std::fmt::Display| {
            ProxyError::referential(
                type_::SERVICE_ERROR,
                reason::SERVICE_UNRESOLVED_REFERENCE,
                sfield.clone(),
                format!("Service [{}:{}] is invalid or missing: {m}", s.name, s.port),
            )
        };
        let port = i32::try_from(s.port)
            .ok()
            .filter(|p| (1..=65535).contains(p))
            .ok_or_else(|| unresolved(&format_args!("port {} is not a valid port", s.port)))?;
        let cluster = backend::service_cluster(index, &holder.namespace, &s.name, port, h2c, clusters)
            .map_err(|e| unresolved(&e))?;
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
                    e.to_string(),
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

#[cfg(test)]
mod header_policy_tests {
    use api::httpproxy::{HeaderValue, HeadersPolicy};

    use super::*;

    #[test]
    fn header_policy_errors_name_the_variant_and_keep_their_text() {
        let host = HeadersPolicy {
            set: vec![HeaderValue {
                name: "Host".into(),
                value: "a b".into(),
            }],
            remove: Vec::new(),
        };
        let err = header_policy(Some(&host), "f", true).err();
        assert_eq!(err, Some(HeaderPolicyError::HostValue { value: "a b".into() }));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#""a b" is not a valid hostname for the Host header"#)
        );
        let bad_name = HeadersPolicy {
            set: vec![HeaderValue {
                name: "a b".into(),
                value: "v".into(),
            }],
            remove: Vec::new(),
        };
        let err = header_policy(Some(&bad_name), "f", false).err();
        assert_eq!(
            err,
            Some(HeaderPolicyError::Header(crate::error::RuleError::structural(
                "f.set[0].name",
                r#""a b" is not a valid header name"#
            )))
        );
        // Contour's message only: the field is the caller's.
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#""a b" is not a valid header name"#)
        );
    }
}
