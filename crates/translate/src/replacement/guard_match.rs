//! What a route's match becomes when the real Envoy rejects the match
//! itself (STRICT: the route, replaced with a 500 but keeping its match,
//! is still rejected). Rather than fencing its whole virtual host, the
//! route keeps its position with a wider match Envoy can load: every
//! request it matched still meets the 500 (none reaches another route,
//! failing open), a request it did not match may meet it too (the
//! routes after it on that host lose those), and the host's other routes
//! keep serving. The same bargain as STANDARD's guard
//! (`route/matches.rs`), made without knowing which part Envoy refused,
//! so in two steps, each checked by the validator before the next
//! (`strict.rs` [`super::strict::isolate`]); if neither is accepted the
//! virtual host is fenced as before.

use envoy_types::pb::envoy::config::route::v3::query_parameter_matcher::QueryParameterMatchSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};

use crate::envoy::regex;
use crate::route::matches::sanitize_guard_prefix;

/// How far a rejected match is widened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Widening {
    /// Only its regular expressions go (what Envoy most often refuses
    /// that STANDARD cannot know: an RE2 program over Envoy's limits, a
    /// construct this build refuses): a regex path becomes the prefix
    /// every path it matches starts with, a regex header or query
    /// condition is dropped. Every other condition stays.
    Regexes,
    /// Every condition goes but a path prefix (the literal one of its
    /// path, whatever the kind), or the CONNECT matcher of a CONNECT
    /// route: a prefix does not match an HTTP/1.1 CONNECT request, so
    /// turning one into a prefix would let those requests through to the
    /// routes after it.
    Everything,
}

/// Widens `m` in place (see [`Widening`]); `false` if that changed
/// nothing (then there is nothing new to check).
pub(crate) fn widen(m: &mut RouteMatch, how: Widening) -> bool {
    let before = m.clone();
    match how {
        Widening::Regexes => {
            if let Some(p) = &m.path_specifier
                && literal_path(p).is_none()
                && !is_connect(p)
            {
                m.path_specifier = Some(PathSpecifier::Prefix(sanitize_guard_prefix(&path_prefix(p))));
            }
            m.headers.retain(|h| !header_regex(h));
            m.query_parameters.retain(|q| !query_regex(q));
        }
        Widening::Everything => {
            let path = match &m.path_specifier {
                Some(p) if is_connect(p) => p.clone(),
                p => PathSpecifier::Prefix(sanitize_guard_prefix(
                    &p.as_ref().map(path_prefix).unwrap_or_default(),
                )),
            };
            *m = RouteMatch {
                path_specifier: Some(path),
                // Kept: case-insensitive matching only ever matches more.
                case_sensitive: m.case_sensitive,
                ..Default::default()
            };
        }
    }
    *m != before
}

/// The path prefix a widened match answers on, for its report; `None`
/// for a CONNECT match, which still answers CONNECT requests only.
pub(crate) fn guard_prefix(m: Option<&RouteMatch>) -> Option<String> {
    let p = m.and_then(|m| m.path_specifier.as_ref());
    if p.is_some_and(is_connect) {
        return None;
    }
    Some(
        p.map(path_prefix)
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into()),
    )
}

fn is_connect(p: &PathSpecifier) -> bool {
    matches!(p, PathSpecifier::ConnectMatcher(_))
}

/// The text of a literal path kind (exact, prefix, separated prefix);
/// `None` for a regex, a URI template or CONNECT.
fn literal_path(p: &PathSpecifier) -> Option<&str> {
    match p {
        PathSpecifier::Prefix(s) | PathSpecifier::Path(s) | PathSpecifier::PathSeparatedPrefix(s) => Some(s),
        _ => None,
    }
}

/// The literal text every path `p` matches starts with ("" when unknown:
/// a URI template or CONNECT).
fn path_prefix(p: &PathSpecifier) -> String {
    match (literal_path(p), p) {
        (Some(s), _) => s.to_string(),
        (None, PathSpecifier::SafeRegex(r)) => regex::literal_prefix(&r.regex),
        (None, _) => String::new(),
    }
}

fn string_regex(s: &StringMatcher) -> bool {
    matches!(s.match_pattern, Some(string_matcher::MatchPattern::SafeRegex(_)))
}

// The deprecated variant too: an extension's hook may write it.
#[allow(deprecated)]
fn header_regex(h: &HeaderMatcher) -> bool {
    match &h.header_match_specifier {
        Some(header_matcher::HeaderMatchSpecifier::SafeRegexMatch(_)) => true,
        Some(header_matcher::HeaderMatchSpecifier::StringMatch(s)) => string_regex(s),
        _ => false,
    }
}

fn query_regex(q: &QueryParameterMatcher) -> bool {
    matches!(&q.query_parameter_match_specifier, Some(QueryParameterMatchSpecifier::StringMatch(s)) if string_regex(s))
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, RouteMatch, header_matcher};
    use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};

    use super::{Widening, guard_prefix, widen};

    fn exact_header(name: &str, value: &str) -> HeaderMatcher {
        HeaderMatcher {
            name: name.into(),
            header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(value.into())),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn regex_header(name: &str, re: &str) -> HeaderMatcher {
        HeaderMatcher {
            name: name.into(),
            header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                    regex: re.into(),
                    ..Default::default()
                })),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn regexes_go_first_and_every_other_condition_stays() {
        let mut m = RouteMatch {
            path_specifier: Some(PathSpecifier::SafeRegex(RegexMatcher {
                regex: "/api/v[0-9]+/(a)\\1".into(),
                ..Default::default()
            })),
            headers: vec![exact_header("x-tenant", "a"), regex_header("x-b", "(b)\\1")],
            ..Default::default()
        };
        assert!(widen(&mut m, Widening::Regexes));
        assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/api/v".into())));
        assert_eq!(m.headers, [exact_header("x-tenant", "a")]);
        // Nothing left to widen at this step.
        assert!(!widen(&mut m, Widening::Regexes));

        assert!(widen(&mut m, Widening::Everything));
        assert_eq!(
            m,
            RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/api/v".into())),
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_regex_without_a_literal_prefix_widens_to_every_path() {
        let mut m = RouteMatch {
            path_specifier: Some(PathSpecifier::SafeRegex(RegexMatcher {
                regex: "(a)\\1".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(widen(&mut m, Widening::Regexes));
        assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/".into())));
    }

    #[test]
    fn an_exact_path_keeps_its_text_as_a_prefix_when_everything_goes() {
        let mut m = RouteMatch {
            path_specifier: Some(PathSpecifier::Path("/login".into())),
            headers: vec![exact_header("x-a", "1")],
            ..Default::default()
        };
        assert!(!widen(&mut m, Widening::Regexes), "no regex: nothing to widen");
        assert!(widen(&mut m, Widening::Everything));
        assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/login".into())));
        assert!(m.headers.is_empty());
    }

    #[test]
    fn a_connect_match_stays_a_connect_match() {
        use envoy_types::pb::envoy::config::route::v3::route_match::ConnectMatcher;
        let connect = Some(PathSpecifier::ConnectMatcher(ConnectMatcher::default()));
        let mut m = RouteMatch {
            path_specifier: connect.clone(),
            headers: vec![exact_header("x-a", "1"), regex_header("x-b", "(b)\\1")],
            ..Default::default()
        };
        assert!(widen(&mut m, Widening::Regexes));
        assert_eq!(m.path_specifier, connect, "a CONNECT matcher is no regex");
        assert_eq!(m.headers, [exact_header("x-a", "1")]);
        assert!(widen(&mut m, Widening::Everything));
        assert_eq!(
            m,
            RouteMatch {
                path_specifier: connect,
                ..Default::default()
            },
            "a prefix would not match an HTTP/1.1 CONNECT request"
        );
        assert_eq!(guard_prefix(Some(&m)), None);
    }
}
