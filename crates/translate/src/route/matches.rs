//! Gateway API matches → Envoy `RouteMatch`, and the precedence rank each
//! match has among all routes of a virtual host.

use api::gateway_api::experimental::httproutes::{
    HttpRouteRulesMatches, HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesMethod,
    HttpRouteRulesMatchesPathType, HttpRouteRulesMatchesQueryParamsType,
};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher, query_parameter_matcher, route_match,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};

use crate::error::RuleError;
use crate::regex;

/// Envoy's `QueryParameterMatcher.name` limit (longer is a NACK).
const MAX_QUERY_NAME_BYTES: usize = 1024;

/// Gateway API precedence of one match (spec: exact path, then longest
/// prefix, then method, then most headers, then most query params).
/// Regular expression paths are implementation-specific: they rank after
/// exact paths and before prefixes, longer patterns first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    path_kind: u8,
    path_len: std::cmp::Reverse<usize>,
    method: std::cmp::Reverse<bool>,
    headers: std::cmp::Reverse<usize>,
    queries: std::cmp::Reverse<usize>,
}

/// A match that Envoy can program, or the guard that must stand in for it.
pub enum Programmable {
    Ok(RouteMatch, Rank),
    /// The matcher itself is invalid: guard `prefix` so its traffic never
    /// falls through to a broader route.
    Guard {
        guard: RouteMatch,
        rank: Rank,
        error: RuleError,
    },
}

pub fn string_exact(v: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Exact(v.into())),
        ignore_case: false,
    }
}

pub fn regex_matcher(v: &str) -> RegexMatcher {
    RegexMatcher {
        regex: v.into(),
        ..Default::default()
    }
}

fn string_regex(v: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex_matcher(v))),
        ignore_case: false,
    }
}

/// Path prefix semantics of Gateway API (`/foo` matches `/foo` and
/// `/foo/bar`, not `/foobar`) are Envoy's `path_separated_prefix`, which
/// refuses a trailing slash; `/foo/` is a plain prefix already.
fn prefix_specifier(value: &str) -> route_match::PathSpecifier {
    if value == "/" || value.ends_with('/') {
        route_match::PathSpecifier::Prefix(value.into())
    } else {
        route_match::PathSpecifier::PathSeparatedPrefix(value.into())
    }
}

fn path_chars_ok(value: &str) -> bool {
    value.starts_with('/')
        && !value.contains(['?', '#'])
        && !value.bytes().any(|b| b.is_ascii_control() || b == b' ')
}

pub fn build(m: &HttpRouteRulesMatches, field: &str) -> Programmable {
    let mut rm = RouteMatch::default();
    let mut first_error: Option<RuleError> = None;
    let (kind, value) = match &m.path {
        Some(p) => (
            p.r#type
                .clone()
                .unwrap_or(HttpRouteRulesMatchesPathType::PathPrefix),
            p.value.clone().unwrap_or_else(|| "/".into()),
        ),
        None => (HttpRouteRulesMatchesPathType::PathPrefix, "/".into()),
    };
    let path_kind;
    match kind {
        HttpRouteRulesMatchesPathType::Exact | HttpRouteRulesMatchesPathType::PathPrefix => {
            if !path_chars_ok(&value)
                || value.contains("//") && kind == HttpRouteRulesMatchesPathType::PathPrefix
            {
                first_error.get_or_insert(RuleError::structural(
                    format!("{field}.path.value"),
                    format!("{value:?} is not a valid path (must start with '/', no '?', '#', '//', spaces or control characters)"),
                ));
            }
            if kind == HttpRouteRulesMatchesPathType::Exact {
                path_kind = 0;
                rm.path_specifier = Some(route_match::PathSpecifier::Path(value.clone()));
            } else {
                path_kind = 2;
                rm.path_specifier = Some(prefix_specifier(&value));
            }
        }
        HttpRouteRulesMatchesPathType::RegularExpression => {
            path_kind = 1;
            if let Err(e) = regex::check(&value) {
                first_error.get_or_insert(RuleError::structural(
                    format!("{field}.path.value"),
                    e.to_string(),
                ));
            }
            rm.path_specifier = Some(route_match::PathSpecifier::SafeRegex(regex_matcher(&value)));
        }
    }

    let mut seen_headers = Vec::new();
    for (i, h) in m.headers.iter().flatten().enumerate() {
        let name = h.name.to_ascii_lowercase();
        // Spec: with several matches for one header name, only the first counts.
        if seen_headers.contains(&name) {
            continue;
        }
        seen_headers.push(name.clone());
        if !crate::route::filters::is_header_name(&name) {
            first_error.get_or_insert(RuleError::structural(
                format!("{field}.headers[{i}].name"),
                format!("{:?} is not a valid header name", h.name),
            ));
        }
        let matcher = match h.r#type {
            Some(HttpRouteRulesMatchesHeadersType::RegularExpression) => {
                if let Err(e) = regex::check(&h.value) {
                    first_error.get_or_insert(RuleError::structural(
                        format!("{field}.headers[{i}].value"),
                        e.to_string(),
                    ));
                }
                string_regex(&h.value)
            }
            _ => string_exact(&h.value),
        };
        rm.headers.push(HeaderMatcher {
            name,
            header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(matcher)),
            ..Default::default()
        });
    }
    if let Some(method) = &m.method {
        rm.headers.push(HeaderMatcher {
            name: ":method".into(),
            header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(string_exact(
                method_name(method),
            ))),
            ..Default::default()
        });
    }
    let mut seen_queries = Vec::new();
    for (i, q) in m.query_params.iter().flatten().enumerate() {
        if seen_queries.contains(&q.name) {
            continue;
        }
        seen_queries.push(q.name.clone());
        if q.name.is_empty()
            || q.name
                .bytes()
                .any(|b| b.is_ascii_control() || b == b'&' || b == b'=' || b == b' ')
        {
            first_error.get_or_insert(RuleError::structural(
                format!("{field}.queryParams[{i}].name"),
                format!("{:?} is not a valid query parameter name", q.name),
            ));
        } else if q.name.len() > MAX_QUERY_NAME_BYTES {
            first_error.get_or_insert(RuleError::structural(
                format!("{field}.queryParams[{i}].name"),
                format!(
                    "query parameter name of {} bytes is longer than Envoy's limit of {MAX_QUERY_NAME_BYTES}",
                    q.name.len()
                ),
            ));
        }
        let matcher = match q.r#type {
            Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) => {
                if let Err(e) = regex::check(&q.value) {
                    first_error.get_or_insert(RuleError::structural(
                        format!("{field}.queryParams[{i}].value"),
                        e.to_string(),
                    ));
                }
                string_regex(&q.value)
            }
            _ => string_exact(&q.value),
        };
        rm.query_parameters.push(QueryParameterMatcher {
            name: q.name.clone(),
            query_parameter_match_specifier: Some(
                query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(matcher),
            ),
        });
    }

    let rank = Rank {
        path_kind,
        path_len: std::cmp::Reverse(value.len()),
        method: std::cmp::Reverse(m.method.is_some()),
        headers: std::cmp::Reverse(seen_headers.len()),
        queries: std::cmp::Reverse(seen_queries.len()),
    };
    match first_error {
        None => Programmable::Ok(rm, rank),
        Some(error) => {
            // The guard covers every request whose path starts with the
            // longest literal prefix of the path pattern, whatever its
            // headers, query or method: strictly broader than the original
            // match, so nothing it would have caught falls through.
            let prefix = match kind {
                HttpRouteRulesMatchesPathType::RegularExpression => regex::literal_prefix(&value),
                _ => value.clone(),
            };
            let prefix = sanitize_guard_prefix(&prefix);
            let guard = RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.clone())),
                ..Default::default()
            };
            let rank = Rank {
                path_kind: 2,
                path_len: std::cmp::Reverse(prefix.len()),
                method: std::cmp::Reverse(false),
                headers: std::cmp::Reverse(0),
                queries: std::cmp::Reverse(0),
            };
            Programmable::Guard { guard, rank, error }
        }
    }
}

/// A guard prefix must itself be programmable: cut it at the first byte
/// Envoy would refuse, and never let it be empty.
fn sanitize_guard_prefix(p: &str) -> String {
    let cut: String = p
        .chars()
        .take_while(|c| !c.is_ascii_control() && *c != '?' && *c != '#' && *c != ' ')
        .collect();
    if cut.starts_with('/') { cut } else { "/".into() }
}

pub fn method_name(m: &HttpRouteRulesMatchesMethod) -> &'static str {
    use HttpRouteRulesMatchesMethod as M;
    match m {
        M::Get => "GET",
        M::Head => "HEAD",
        M::Post => "POST",
        M::Put => "PUT",
        M::Delete => "DELETE",
        M::Connect => "CONNECT",
        M::Options => "OPTIONS",
        M::Trace => "TRACE",
        M::Patch => "PATCH",
    }
}
