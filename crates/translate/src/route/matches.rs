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

use crate::envoy::regex;
use crate::error::RuleError;

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

impl Rank {
    /// The rank of a match of another route kind (HTTPProxy): path kind
    /// 0 exact, 1 regular expression, 2 prefix; no method.
    pub fn of(path_kind: u8, path_len: usize, headers: usize, queries: usize) -> Rank {
        Rank {
            path_kind,
            path_len: std::cmp::Reverse(path_len),
            method: std::cmp::Reverse(false),
            headers: std::cmp::Reverse(headers),
            queries: std::cmp::Reverse(queries),
        }
    }
}

/// A match that Envoy can program, or the guard that must stand in for it.
pub enum Programmable {
    Ok(RouteMatch, Rank),
    /// The matcher itself is invalid: a guard (the match without its
    /// unprogrammable parts, a superset of it) with the original's rank,
    /// so its traffic never falls through to another route.
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
/// `/foo/bar`, not `/foobar`; "a trailing `/` is ignored", so `/foo/`
/// matches exactly what `/foo` matches) are Envoy's
/// `path_separated_prefix` of the value without its trailing slash (Envoy
/// refuses one there). Rewrites rely on it: `prefix_rewrite` replaces the
/// prefix as programmed, so `/foo/` must be programmed as `/foo` or
/// `/foo/bar` rewritten with `/xyz` would lose its separator (`/xyzbar`).
fn prefix_specifier(value: &str) -> route_match::PathSpecifier {
    let trimmed = value.trim_end_matches('/');
    if trimmed.is_empty() {
        route_match::PathSpecifier::Prefix("/".into())
    } else {
        route_match::PathSpecifier::PathSeparatedPrefix(trimmed.into())
    }
}

fn path_chars_ok(value: &str) -> bool {
    value.starts_with('/')
        && !value.contains(['?', '#'])
        && !value.bytes().any(|b| b.is_ascii_control() || b == b' ')
}

/// `converted`: an error found in the path while converting the match
/// from another kind (a GRPCRoute method): the path is treated as
/// unprogrammable.
pub fn build(m: &HttpRouteRulesMatches, field: &str, converted: Option<RuleError>) -> Programmable {
    let mut rm = RouteMatch::default();
    // What a guard must leave out: parts Envoy cannot program. Everything
    // else of the match is kept in the guard (see `guard`).
    let mut path_ok = converted.is_none();
    let mut first_error: Option<RuleError> = converted;
    let mut bad_headers: Vec<usize> = Vec::new();
    let mut bad_queries: Vec<usize> = Vec::new();
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
                path_ok = false;
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
                path_ok = false;
                first_error.get_or_insert(RuleError::structural(
                    format!("{field}.path.value"),
                    e.to_string(),
                ));
            }
            rm.path_specifier = Some(route_match::PathSpecifier::SafeRegex(regex_matcher(&value)));
        }
    }

    let mut seen_headers = std::collections::HashSet::new();
    for (i, h) in m.headers.iter().flatten().enumerate() {
        let name = h.name.to_ascii_lowercase();
        // Spec: with several matches for one header name, only the first counts.
        if !seen_headers.insert(name.clone()) {
            continue;
        }
        let mut ok = true;
        if !crate::route::filters::is_header_name(&name) {
            ok = false;
            first_error.get_or_insert(RuleError::structural(
                format!("{field}.headers[{i}].name"),
                format!("{:?} is not a valid header name", h.name),
            ));
        }
        let matcher = match h.r#type {
            Some(HttpRouteRulesMatchesHeadersType::RegularExpression) => {
                if let Err(e) = regex::check(&h.value) {
                    ok = false;
                    first_error.get_or_insert(RuleError::structural(
                        format!("{field}.headers[{i}].value"),
                        e.to_string(),
                    ));
                }
                string_regex(&h.value)
            }
            _ => string_exact(&h.value),
        };
        if !ok {
            bad_headers.push(rm.headers.len());
        }
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
    let mut seen_queries = std::collections::HashSet::new();
    for (i, q) in m.query_params.iter().flatten().enumerate() {
        if !seen_queries.insert(q.name.as_str()) {
            continue;
        }
        let mut ok = true;
        if q.name.is_empty()
            || q.name
                .bytes()
                .any(|b| b.is_ascii_control() || b == b'&' || b == b'=' || b == b' ')
        {
            ok = false;
            first_error.get_or_insert(RuleError::structural(
                format!("{field}.queryParams[{i}].name"),
                format!("{:?} is not a valid query parameter name", q.name),
            ));
        } else if q.name.len() > MAX_QUERY_NAME_BYTES {
            ok = false;
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
                    ok = false;
                    first_error.get_or_insert(RuleError::structural(
                        format!("{field}.queryParams[{i}].value"),
                        e.to_string(),
                    ));
                }
                string_regex(&q.value)
            }
            _ => string_exact(&q.value),
        };
        if !ok {
            bad_queries.push(rm.query_parameters.len());
        }
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
            let mut rank = rank;
            if !path_ok {
                let prefix = match kind {
                    HttpRouteRulesMatchesPathType::RegularExpression => regex::literal_prefix(&value),
                    _ => value.clone(),
                };
                rm.path_specifier = Some(match exact_path_before_query(kind.clone(), &value) {
                    // `/admin?x` or `/admin#x` as an exact path means the
                    // path `/admin`: guarding that exact path covers it
                    // without fencing the whole `/admin` subtree (or, for
                    // `/?x`, every path of the host).
                    Some(path) => route_match::PathSpecifier::Path(path.into()),
                    None => route_match::PathSpecifier::Prefix(sanitize_guard_prefix(&prefix)),
                });
                // An exact or prefix path not starting with `/` matches no
                // request at all, so no route loses a request to it: its
                // guard (on `/`) ranks as the prefix `/`, last, instead of
                // taking every request of the host from the routes an
                // exact path outranks.
                if kind != HttpRouteRulesMatchesPathType::RegularExpression && !value.starts_with('/') {
                    rank.path_kind = 2;
                    rank.path_len = std::cmp::Reverse(1);
                }
            }
            let guard = guard(rm, &bad_headers, &bad_queries);
            // Otherwise the guard keeps the original's rank: it sorts
            // exactly where the original would, and as it matches a
            // superset of the original's requests, none of them reaches a
            // route the original would have beaten.
            Programmable::Guard { guard, rank, error }
        }
    }
}

/// The original match without the parts Envoy cannot program (given by
/// ascending index): dropping a header or query condition, or widening a path to a
/// literal prefix, only ever matches more requests, never fewer.
fn guard(mut rm: RouteMatch, bad_headers: &[usize], bad_queries: &[usize]) -> RouteMatch {
    let mut i = 0;
    rm.headers.retain(|_| {
        i += 1;
        bad_headers.binary_search(&(i - 1)).is_err()
    });
    let mut i = 0;
    rm.query_parameters.retain(|_| {
        i += 1;
        bad_queries.binary_search(&(i - 1)).is_err()
    });
    rm
}

/// The path part of an exact path written with a query or fragment
/// (`/admin?x` → `/admin`), when that part is itself a programmable path.
fn exact_path_before_query(kind: HttpRouteRulesMatchesPathType, value: &str) -> Option<&str> {
    if kind != HttpRouteRulesMatchesPathType::Exact {
        return None;
    }
    let i = value.find(['?', '#'])?;
    let path = &value[..i];
    path_chars_ok(path).then_some(path)
}

/// A guard prefix must itself be programmable: cut it at the first byte
/// Envoy would refuse, and never let it be empty. It is also cut after the
/// first slash of a `//`: a request path with merged slashes (`/a//b` sent
/// as `/a/b`, or normalized so) must still meet the guard, and a shorter
/// prefix only widens it.
pub(crate) fn sanitize_guard_prefix(p: &str) -> String {
    let mut cut: String = p
        .chars()
        .take_while(|c| !c.is_ascii_control() && *c != '?' && *c != '#' && *c != ' ')
        .collect();
    if let Some(i) = cut.find("//") {
        cut.truncate(i + 1);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> HttpRouteRulesMatches {
        serde_json::from_value(v).expect("match")
    }

    fn built(v: serde_json::Value) -> (RouteMatch, Rank, bool) {
        match build(&parse(v), "m", None) {
            Programmable::Ok(m, r) => (m, r, false),
            Programmable::Guard { guard, rank, .. } => (guard, rank, true),
        }
    }

    /// A guard ranks exactly as its match would if it were valid, and keeps
    /// everything of it but the invalid parts.
    #[test]
    fn a_guard_keeps_the_rank_and_the_programmable_parts_of_its_match() {
        let valid = serde_json::json!({
            "path": {"type": "Exact", "value": "/admin"},
            "method": "POST",
            "headers": [{"name": "x-team", "value": "blue"},
                        {"type": "RegularExpression", "name": "x-role", "value": "a+"}],
            "queryParams": [{"name": "q", "value": "1"}]
        });
        let mut invalid = valid.clone();
        invalid["headers"][1]["value"] = "(a)\\1".into();
        invalid["queryParams"] =
            serde_json::json!([{"name": "q", "value": "1"}, {"name": "a&b", "value": "1"}]);
        let (_, want_rank, _) = built(valid);
        let (guard, rank, guarded) = built(invalid);
        assert!(guarded);
        // The invalid query parameter counts for the original's rank: one
        // more than the valid match has.
        let mut two_queries = want_rank;
        two_queries.queries = std::cmp::Reverse(2);
        assert_eq!(rank, two_queries);
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Path("/admin".into()))
        );
        let names: Vec<&str> = guard.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["x-team", ":method"]);
        let queries: Vec<&str> = guard.query_parameters.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(queries, ["q"]);

        // An invalid regular expression path: its literal prefix, ranked
        // among regular expressions by the pattern.
        let (guard, rank, _) =
            built(serde_json::json!({"path": {"type": "RegularExpression", "value": "/admin/("}}));
        let (_, regex_rank, _) =
            built(serde_json::json!({"path": {"type": "RegularExpression", "value": "/admin/x"}}));
        assert_eq!(rank, regex_rank);
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Prefix("/admin/".into()))
        );
    }

    /// An exact path without a leading `/` matches nothing: its guard on
    /// `/` must not outrank the host's prefix routes.
    #[test]
    fn a_guard_for_a_path_matching_nothing_ranks_last() {
        let (guard, rank, guarded) = built(serde_json::json!({"path": {"type": "Exact", "value": "admin"}}));
        let (_, root, _) = built(serde_json::json!({"path": {"type": "PathPrefix", "value": "/"}}));
        assert!(guarded);
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Prefix("/".into()))
        );
        assert_eq!(rank, root);
    }

    /// `/?x` as an exact path means the path `/`: its guard is that exact
    /// path, not a prefix `/` ranked as an exact path (every request of the
    /// host).
    #[test]
    fn an_exact_path_with_a_query_is_guarded_on_its_path() {
        let (guard, _, guarded) = built(serde_json::json!({"path": {"type": "Exact", "value": "/?x=1"}}));
        assert!(guarded);
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Path("/".into()))
        );
        let (guard, _, _) = built(serde_json::json!({"path": {"type": "Exact", "value": "/a b?x"}}));
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Prefix("/a".into()))
        );
    }

    #[test]
    fn a_guard_prefix_stops_at_a_double_slash() {
        let (guard, _, guarded) =
            built(serde_json::json!({"path": {"type": "PathPrefix", "value": "/a//b"}}));
        assert!(guarded);
        assert_eq!(
            guard.path_specifier,
            Some(route_match::PathSpecifier::Prefix("/a/".into()))
        );
    }

    /// Spec: a trailing `/` of a PathPrefix is ignored.
    #[test]
    fn a_trailing_slash_prefix_is_a_separated_prefix() {
        let (m, _, _) = built(serde_json::json!({"path": {"type": "PathPrefix", "value": "/foo/"}}));
        assert_eq!(
            m.path_specifier,
            Some(route_match::PathSpecifier::PathSeparatedPrefix("/foo".into()))
        );
        let (m, _, _) = built(serde_json::json!({"path": {"type": "PathPrefix", "value": "/"}}));
        assert_eq!(
            m.path_specifier,
            Some(route_match::PathSpecifier::Prefix("/".into()))
        );
    }
}
