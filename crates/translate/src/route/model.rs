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
    /// A field set on the rule that portcullis does not implement.
    pub unsupported: Vec<String>,
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
                backends,
                timeouts: r.timeouts.as_ref(),
                retry: r.retry.as_ref(),
                unsupported,
            }
        })
        .collect();
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

/// gRPC method match → HTTP path match.
fn grpc_match(m: &GrpcRouteRulesMatches) -> HttpRouteRulesMatches {
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
            (true, s, n) => (
                HttpRouteRulesMatchesPathType::RegularExpression,
                format!("/{}/{}", s.unwrap_or("[^/]+"), n.unwrap_or("[^/]+")),
            ),
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
    HttpRouteRulesMatches {
        path: path.or_else(|| default_match().path),
        headers,
        ..Default::default()
    }
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
            let mut unsupported = Vec::new();
            if r.session_persistence.is_some() {
                unsupported.push("sessionPersistence".to_string());
            }
            Rule {
                name: r.name.clone(),
                matches: match r.matches.as_deref() {
                    None | Some([]) => Cow::Owned(vec![default_match()]),
                    Some(m) => Cow::Owned(m.iter().map(grpc_match).collect()),
                },
                filters: Cow::Owned(filters),
                backends,
                timeouts: None,
                retry: None,
                unsupported,
            }
        })
        .collect();
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
