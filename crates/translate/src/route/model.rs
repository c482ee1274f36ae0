//! One shape for every route kind.
//!
//! HTTPRoute and GRPCRoute arrive as distinct generated types; the rest of
//! the translator sees [`Route`]. GRPCRoute method matches become HTTP path
//! matches (gRPC is `POST /<service>/<method>` over HTTP/2), and every
//! filter, rule- or backend-level, of either kind is carried as the
//! HTTPRoute rule filter type (their schemas are identical).

use std::borrow::Cow;

use api::Source;
use api::gateway_api::experimental::grpcroutes::{
    GrpcRoute, GrpcRouteRulesMatches, GrpcRouteRulesMatchesHeadersType, GrpcRouteRulesMatchesMethodType,
};
use api::gateway_api::experimental::httproutes::{
    HttpRoute, HttpRouteRulesFilters, HttpRouteRulesMatches, HttpRouteRulesMatchesHeaders,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPath, HttpRouteRulesMatchesPathType,
    HttpRouteRulesRetry, HttpRouteRulesTimeouts,
};
use serde::Serialize;

use crate::error::RuleError;
use serde::de::DeserializeOwned;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    Http,
    Grpc,
}

impl RouteKind {
    pub fn kind(self) -> &'static str {
        match self {
            RouteKind::Http => "HTTPRoute",
            RouteKind::Grpc => "GRPCRoute",
        }
    }
}

#[derive(Clone, Debug)]
pub struct ParentRef {
    pub group: String,
    pub kind: String,
    /// As written (None = the route's namespace).
    pub namespace: Option<String>,
    pub name: String,
    pub section_name: Option<String>,
    pub port: Option<i32>,
    /// Not in `spec.parentRefs`: a default Gateway's claim (GEP-3793, see
    /// `default_gateway`).
    pub by_default: bool,
}

#[derive(Clone, Debug)]
pub struct BackendRef<'a> {
    /// Borrowed from the input (defaults filled in): one route has several.
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub port: Option<i32>,
    pub weight: i32,
    pub filters: Cow<'a, [HttpRouteRulesFilters]>,
}

#[derive(Clone, Debug)]
pub struct Rule<'a> {
    pub name: Option<String>,
    /// Never empty: no matches means "match everything" (`PathPrefix /`).
    pub matches: Cow<'a, [HttpRouteRulesMatches]>,
    pub filters: Cow<'a, [HttpRouteRulesFilters]>,
    pub backends: Vec<BackendRef<'a>>,
    pub timeouts: Option<&'a HttpRouteRulesTimeouts>,
    pub retry: Option<&'a HttpRouteRulesRetry>,
    /// Per match (or empty): an error found while converting it (a
    /// GRPCRoute regex part invalid on its own); the match becomes a guard.
    pub match_errors: Vec<Option<RuleError>>,
    /// A field set on the rule that portcullis does not implement.
    pub unsupported: Vec<String>,
    /// The rule's part of its Envoy route names, unique within the route
    /// (see [`assign_ids`]).
    pub id: String,
    /// Index of an earlier rule with the same name (spec: rule names are
    /// unique within a route; such a rule is fenced).
    pub duplicate_of: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Route<'a> {
    pub kind: RouteKind,
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    /// Compared, never printed: kept as the timestamp (formatting one per
    /// route showed in profiles).
    pub creation_timestamp: Option<api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    pub source: Source,
    pub hostnames: Vec<String>,
    pub parent_refs: Vec<ParentRef>,
    /// `spec.useDefaultGateways: All`.
    pub use_default_gateways: bool,
    pub rules: Vec<Rule<'a>>,
    /// `metadata.labels` (TrafficPolicy `targetSelectors` match on them).
    pub labels: Option<&'a std::collections::BTreeMap<String, String>>,
    /// Problems found while normalising (e.g. a filter that could not be
    /// carried over); each names the field.
    pub errors: Vec<String>,
}

impl Route<'_> {
    pub fn display(&self) -> String {
        format!("{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// Same-shaped generated types convert through JSON.
fn convert<A: Serialize, B: DeserializeOwned>(a: &A) -> Result<B, String> {
    serde_json::to_value(a)
        .and_then(serde_json::from_value)
        .map_err(|e| e.to_string())
}

fn meta_common(
    meta: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (
    String,
    String,
    i64,
    Option<api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
        meta.generation.unwrap_or(1),
        meta.creation_timestamp.clone(),
    )
}

fn default_match() -> HttpRouteRulesMatches {
    HttpRouteRulesMatches {
        path: Some(HttpRouteRulesMatchesPath {
            r#type: Some(HttpRouteRulesMatchesPathType::PathPrefix),
            value: Some("/".into()),
        }),
        ..Default::default()
    }
}

/// The generated parentRef types of each route kind share one shape.
macro_rules! parent_ref {
    ($p:expr) => {
        ParentRef {
            group: $p
                .group
                .clone()
                .unwrap_or_else(|| "gateway.networking.k8s.io".into()),
            kind: $p.kind.clone().unwrap_or_else(|| "Gateway".into()),
            namespace: $p.namespace.clone(),
            name: $p.name.clone(),
            section_name: $p.section_name.clone(),
            port: $p.port,
            by_default: false,
        }
    };
}

/// Likewise the backendRef types; their filters convert to the HTTPRoute
/// rule filter type (a conversion failure is recorded in `errors`).
macro_rules! backend_ref {
    ($b:expr, $i:expr, $j:expr, $errors:expr) => {
        BackendRef {
            group: $b.group.as_deref().unwrap_or(""),
            kind: $b.kind.as_deref().unwrap_or("Service"),
            namespace: $b.namespace.as_deref(),
            name: &$b.name,
            port: $b.port,
            weight: $b.weight.unwrap_or(1),
            filters: Cow::Owned(
                $b.filters
                    .iter()
                    .flatten()
                    .filter_map(|f| {
                        convert(f)
                            .map_err(|e| {
                                $errors.push(format!("spec.rules[{}].backendRefs[{}].filters: {e}", $i, $j))
                            })
                            .ok()
                    })
                    .collect(),
            ),
        }
    };
}

pub fn from_http<'a>(route: &'a HttpRoute, source: &Source) -> Route<'a> {
    let (namespace, name, generation, creation_timestamp) = meta_common(&route.metadata);
    let mut errors = Vec::new();
    let parent_refs = route
        .spec
        .parent_refs
        .iter()
        .flatten()
        .map(|p| parent_ref!(p))
        .collect();
    let rules = route
        .spec
        .rules
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let backends = r
                .backend_refs
                .iter()
                .flatten()
                .enumerate()
                .map(|(j, b)| backend_ref!(b, i, j, errors))
                .collect();
            let mut unsupported = Vec::new();
            if r.session_persistence.is_some() {
                unsupported.push("sessionPersistence".to_string());
            }
            Rule {
                name: r.name.clone(),
                matches: match r.matches.as_deref() {
                    None | Some([]) => Cow::Owned(vec![default_match()]),
                    Some(m) => Cow::Borrowed(m),
                },
                filters: Cow::Borrowed(r.filters.as_deref().unwrap_or_default()),
                match_errors: Vec::new(),
                backends,
                timeouts: r.timeouts.as_ref(),
                retry: r.retry.as_ref(),
                unsupported,
                id: String::new(),
                duplicate_of: None,
            }
        })
        .collect::<Vec<_>>();
    let rules = assign_ids(rules);
    Route {
        kind: RouteKind::Http,
        namespace,
        name,
        generation,
        creation_timestamp,
        source: source.clone(),
        hostnames: lowercase_hostnames(route.spec.hostnames.as_deref(), &mut errors),
        parent_refs,
        use_default_gateways: matches!(
            route.spec.use_default_gateways,
            Some(api::gateway_api::experimental::httproutes::HttpRouteUseDefaultGateways::All)
        ),
        rules,
        errors,
        labels: route.metadata.labels.as_ref(),
    }
}

/// Gives each rule its Envoy route name part and marks duplicate names.
///
/// A named rule is known by its name, any other by its index; Envoy route
/// names must be unique and STRICT maps a rejected route back to its rule by
/// that part (`strict::parse_route_name`: a rule name first, else an
/// index). So a rule whose name repeats an earlier one's, or that has none,
/// gets its index, written with as many leading zeros as it takes to differ
/// from every rule name (`1` next to a rule named `1` becomes `01`): the
/// parts stay unique and still read back as the right rule.
pub fn assign_ids(mut rules: Vec<Rule<'_>>) -> Vec<Rule<'_>> {
    use std::collections::{HashMap, HashSet};
    let names: HashSet<String> = rules.iter().filter_map(|r| r.name.clone()).collect();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, rule) in rules.iter_mut().enumerate() {
        if let Some(n) = &rule.name {
            match first.get(n) {
                Some(&k) => rule.duplicate_of = Some(k),
                None => {
                    first.insert(n.clone(), i);
                    rule.id.clone_from(n);
                    continue;
                }
            }
        }
        let mut id = i.to_string();
        while names.contains(&id) {
            id.insert(0, '0');
        }
        rule.id = id;
    }
    rules
}

/// Hostnames are case-insensitive and Envoy lowercases virtual host
/// domains: `Example.COM` and `example.com` on one listener would be a
/// duplicate domain, which Envoy rejects (a NACK of the whole route
/// configuration). The CRD only allows lower case, so an upper-case one is
/// read in lower case and reported.
fn lowercase_hostnames(hostnames: Option<&[String]>, errors: &mut Vec<String>) -> Vec<String> {
    hostnames
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let lower = h.to_ascii_lowercase();
            if lower != *h {
                errors.push(format!(
                    "spec.hostnames[{i}]: {h:?} must be lower case; read as {lower:?}"
                ));
            }
            lower
        })
        .collect()
}

/// gRPC method match → HTTP path match, and the error of a regular
/// expression part that is invalid on its own.
///
/// A regex match becomes `/(?:service)/(?:method)`: each part grouped, so
/// an alternation stays inside its own path segment (`pkg.Foo|pkg.Bar`
/// ungrouped would be `/pkg.Foo` or `pkg.Bar/Get`). Grouping is only sound
/// when each part is a regular expression by itself: `a)|(.*` is not, and
/// grouped it would balance into `/(?:a)|(.*)/…`, which matches anything.
/// Such a part is reported (the match becomes a guard, see
/// `route::matches::build`) and the path is composed ungrouped, its
/// literal prefix the guard's path.
fn grpc_match(m: &GrpcRouteRulesMatches, field: &str) -> (HttpRouteRulesMatches, Option<RuleError>) {
    let mut error = None;
    let path = m.method.as_ref().and_then(|method| {
        let regex = matches!(
            method.r#type,
            Some(GrpcRouteRulesMatchesMethodType::RegularExpression)
        );
        let (service, name) = (method.service.as_deref(), method.method.as_deref());
        let (kind, value) = match (regex, service, name) {
            (_, None, None) => return None,
            (false, Some(s), Some(n)) => (HttpRouteRulesMatchesPathType::Exact, format!("/{s}/{n}")),
            (false, Some(s), None) => (HttpRouteRulesMatchesPathType::PathPrefix, format!("/{s}")),
            (false, None, Some(n)) => (
                HttpRouteRulesMatchesPathType::RegularExpression,
                format!("/[^/]+/{}", escape_regex(n)),
            ),
            (true, s, n) => {
                for (part, name) in [(s, "service"), (n, "method")] {
                    if let Some(Err(e)) = part.map(crate::regex::check) {
                        error.get_or_insert(RuleError::structural(
                            format!("{field}.method.{name}"),
                            e.to_string(),
                        ));
                    }
                }
                let (s, n) = (s.unwrap_or("[^/]+"), n.unwrap_or("[^/]+"));
                let value = if error.is_some() {
                    format!("/{s}/{n}")
                } else {
                    format!("/(?:{s})/(?:{n})")
                };
                (HttpRouteRulesMatchesPathType::RegularExpression, value)
            }
        };
        Some(HttpRouteRulesMatchesPath {
            r#type: Some(kind),
            value: Some(value),
        })
    });
    let headers = m.headers.as_ref().map(|hs| {
        hs.iter()
            .map(|h| HttpRouteRulesMatchesHeaders {
                name: h.name.clone(),
                value: h.value.clone(),
                r#type: Some(match h.r#type {
                    Some(GrpcRouteRulesMatchesHeadersType::RegularExpression) => {
                        HttpRouteRulesMatchesHeadersType::RegularExpression
                    }
                    _ => HttpRouteRulesMatchesHeadersType::Exact,
                }),
            })
            .collect()
    });
    (
        HttpRouteRulesMatches {
            path: path.or_else(|| default_match().path),
            headers,
            ..Default::default()
        },
        error,
    )
}

pub fn escape_regex(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub fn from_grpc<'a>(route: &'a GrpcRoute, source: &Source) -> Route<'a> {
    let (namespace, name, generation, creation_timestamp) = meta_common(&route.metadata);
    let mut errors = Vec::new();
    let parent_refs = route
        .spec
        .parent_refs
        .iter()
        .flatten()
        .map(|p| parent_ref!(p))
        .collect();
    let rules = route
        .spec
        .rules
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let mut conv_filters = |fs: Option<&Vec<_>>, field: String| -> Vec<HttpRouteRulesFilters> {
                fs.into_iter()
                    .flatten()
                    .filter_map(
                        |f: &api::gateway_api::experimental::grpcroutes::GrpcRouteRulesFilters| {
                            convert(f).map_err(|e| errors.push(format!("{field}: {e}"))).ok()
                        },
                    )
                    .collect()
            };
            let filters = conv_filters(r.filters.as_ref(), format!("spec.rules[{i}].filters"));
            let backends = r
                .backend_refs
                .iter()
                .flatten()
                .enumerate()
                .map(|(j, b)| backend_ref!(b, i, j, errors))
                .collect();
            let (matches, match_errors) = match r.matches.as_deref() {
                None | Some([]) => (vec![default_match()], Vec::new()),
                Some(m) => m
                    .iter()
                    .enumerate()
                    .map(|(j, m)| grpc_match(m, &format!("spec.rules[{i}].matches[{j}]")))
                    .unzip(),
            };
            let mut unsupported = Vec::new();
            if r.session_persistence.is_some() {
                unsupported.push("sessionPersistence".to_string());
            }
            Rule {
                name: r.name.clone(),
                matches: Cow::Owned(matches),
                match_errors,
                filters: Cow::Owned(filters),
                backends,
                timeouts: None,
                retry: None,
                unsupported,
                id: String::new(),
                duplicate_of: None,
            }
        })
        .collect::<Vec<_>>();
    let rules = assign_ids(rules);
    Route {
        kind: RouteKind::Grpc,
        namespace,
        name,
        generation,
        creation_timestamp,
        source: source.clone(),
        hostnames: lowercase_hostnames(route.spec.hostnames.as_deref(), &mut errors),
        parent_refs,
        use_default_gateways: matches!(
            route.spec.use_default_gateways,
            Some(api::gateway_api::experimental::grpcroutes::GrpcRouteUseDefaultGateways::All)
        ),
        rules,
        errors,
        labels: route.metadata.labels.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: Option<&str>) -> Rule<'static> {
        Rule {
            name: name.map(str::to_string),
            matches: Cow::Owned(vec![default_match()]),
            filters: Cow::Owned(Vec::new()),
            backends: Vec::new(),
            timeouts: None,
            retry: None,
            match_errors: Vec::new(),
            unsupported: Vec::new(),
            id: String::new(),
            duplicate_of: None,
        }
    }

    /// Envoy route names must be unique and map back to their rule
    /// (`strict::parse_route_name`: a rule name, else an index).
    #[test]
    fn rule_ids_are_unique_and_duplicate_names_are_marked() {
        let rules = assign_ids(vec![
            rule(Some("dup")),
            rule(None),
            rule(Some("dup")),
            rule(Some("1")),
            rule(Some("01")),
            rule(None),
        ]);
        let ids: Vec<&str> = rules.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["dup", "001", "2", "1", "01", "5"]);
        let dups: Vec<Option<usize>> = rules.iter().map(|r| r.duplicate_of).collect();
        assert_eq!(dups, [None, None, Some(0), None, None, None]);
    }
}
