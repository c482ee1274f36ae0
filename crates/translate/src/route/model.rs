//! One shape for every route kind.
//!
//! HTTPRoute and GRPCRoute arrive as distinct generated types; the rest of
//! the translator sees [`Route`]. GRPCRoute method matches become HTTP path
//! matches (gRPC is `POST /<service>/<method>` over HTTP/2), and every
//! filter, rule- or backend-level, of either kind is carried as the
//! HTTPRoute rule filter type (their schemas are identical).

use std::borrow::Cow;
use std::sync::OnceLock;

use api::gateway_api::experimental::grpcroutes::{
    GrpcRoute, GrpcRouteRulesMatches, GrpcRouteRulesMatchesHeadersType, GrpcRouteRulesMatchesMethodType,
};
use api::gateway_api::experimental::httproutes::{
    HttpRoute, HttpRouteRulesFilters, HttpRouteRulesMatches, HttpRouteRulesMatchesHeaders,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesMethod, HttpRouteRulesMatchesPath,
    HttpRouteRulesMatchesPathType, HttpRouteRulesRetry, HttpRouteRulesTimeouts,
};
use api::{FieldStep, Source, Unreadable};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::RuleError;

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

/// The generated parentRef types of each route kind share one shape.
macro_rules! parent_ref {
    ($p:expr) => {
        ParentRef {
            group: Cow::Borrowed($p.group.as_deref().unwrap_or("gateway.networking.k8s.io")),
            kind: Cow::Borrowed($p.kind.as_deref().unwrap_or("Gateway")),
            namespace: $p.namespace.as_deref().map(Cow::Borrowed),
            name: Cow::Borrowed(&$p.name),
            section_name: $p.section_name.as_deref().map(Cow::Borrowed),
            port: $p.port,
            by_default: false,
        }
    };
}

/// Borrowed from the input (defaults filled in), owned only for a default
/// Gateway's claim: every route's parentRefs are read on every call.
#[derive(Clone, Debug)]
pub struct ParentRef<'a> {
    pub group: Cow<'a, str>,
    pub kind: Cow<'a, str>,
    /// As written (None = the route's namespace).
    pub namespace: Option<Cow<'a, str>>,
    pub name: Cow<'a, str>,
    pub section_name: Option<Cow<'a, str>>,
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
    /// Values of the rule the loader could not read ([`api::Unreadable`]):
    /// when non-empty the rule is replaced by the 500, whatever else it
    /// says, and [`Rule::fenced`] says what the 500 must catch.
    pub load_errors: Vec<RuleError>,
    /// Only for a rule with `load_errors`: per match (same order as
    /// `matches`), every reading of it the 500 must cover.
    pub fenced: Vec<Vec<Reading>>,
}

/// One way a match of a rule with unreadable values may have been meant
/// (see `replacement::unreadable`).
#[derive(Clone, Debug)]
pub struct Reading {
    /// The match with a stand-in for each unreadable constraint (a method,
    /// a header or query match of unknown type): ranks the 500 where the
    /// match as written would have ranked.
    pub ranked_as: HttpRouteRulesMatches,
    /// The same reading without the unreadable constraints: what the 500
    /// catches, a superset of what the match as written catches.
    pub catches: HttpRouteRulesMatches,
}

/// A route in the shape every consumer reads: a *head* (identity,
/// generation, creation time, source, labels: borrowed from the input,
/// nothing allocated), built for every route on every call, and its
/// hostnames ([`Route::hostnames`]), parentRefs ([`Route::parent_refs`])
/// and rules ([`Route::rules`]), each built from the object only when
/// first read.
///
/// Why lazy: a translation reads every route's head (order, age, policy
/// targets), but an incremental one reads the rest only of the routes
/// whose bindings, works or tails it builds (`crate::incremental`);
/// building and dropping the models of all 10,000 routes on every edit was
/// half of an incremental translation. A consumer calls the accessor (the
/// compiler finds every one); what only needs the rules' count or names
/// reads them from the object ([`Route::rule_count`], [`Route::rule_name`]).
#[derive(Clone, Debug)]
pub struct Route<'a> {
    pub kind: RouteKind,
    /// Borrowed from the input (`default` when unset).
    pub namespace: &'a str,
    pub name: &'a str,
    pub generation: i64,
    /// Compared, never printed: kept as the timestamp (formatting one per
    /// route showed in profiles).
    pub creation_timestamp: Option<api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Borrowed from the input (an edit moves the lines of the routes after
    /// it: read it on every call, never keep it).
    pub source: &'a Source,
    /// `spec.useDefaultGateways: All`.
    pub use_default_gateways: bool,
    /// `metadata.labels` (TrafficPolicy `targetSelectors` match on them).
    pub labels: Option<&'a std::collections::BTreeMap<String, String>>,
    /// What the rules are built from.
    object: Object<'a>,
    unreadable: &'a [Unreadable],
    /// What is built on first read, allocated only then: the head stays
    /// small, and every head is built, moved and dropped on every call.
    read: OnceLock<Box<Read<'a>>>,
}

/// A [`Route`]'s parts beyond its head, each built on first read.
#[derive(Clone, Debug, Default)]
struct Read<'a> {
    /// The hostnames (lower case) and the problems found reading them.
    hostnames: OnceLock<(Vec<String>, Vec<String>)>,
    /// `spec.parentRefs` and the default Gateways' claims.
    parent_refs: OnceLock<Vec<ParentRef<'a>>>,
    /// The rules and the problems found converting them.
    body: OnceLock<Body<'a>>,
}

/// The object a [`Route`] was read from.
#[derive(Clone, Copy, Debug)]
enum Object<'a> {
    Http(&'a HttpRoute),
    Grpc(&'a GrpcRoute),
}

/// `$body` on the route's object, whichever kind it is: the generated
/// HTTPRoute and GRPCRoute types share these fields' names, not their types.
macro_rules! either_kind {
    ($object:expr, |$r:ident| $body:expr) => {
        match $object {
            Object::Http($r) => $body,
            Object::Grpc($r) => $body,
        }
    };
}

#[derive(Clone, Debug)]
struct Body<'a> {
    rules: Vec<Rule<'a>>,
    /// Problems found while normalising the rules (e.g. a filter that could
    /// not be carried over); each names the field.
    errors: Vec<String>,
}

impl<'a> Route<'a> {
    pub fn display(&self) -> String {
        format!("{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }

    /// The rules, built on first read.
    pub fn rules(&self) -> &[Rule<'a>] {
        &self.body().rules
    }

    /// Problems found while normalising the route (rules first, then
    /// hostnames); each names the field. Builds the rules if not yet read.
    pub fn errors(&self) -> impl Iterator<Item = &String> {
        self.body().errors.iter().chain(&self.hostnames_read().1)
    }

    /// `spec.hostnames`, in lower case (see `lowercase_hostnames`).
    pub fn hostnames(&self) -> &[String] {
        &self.hostnames_read().0
    }

    /// The parts beyond the head (allocated on first call).
    fn read(&self) -> &Read<'a> {
        self.read.get_or_init(Box::default)
    }

    fn hostnames_read(&self) -> &(Vec<String>, Vec<String>) {
        self.read().hostnames.get_or_init(|| {
            let written = either_kind!(self.object, |r| r.spec.hostnames.as_deref());
            let mut errors = Vec::new();
            (lowercase_hostnames(written, &mut errors), errors)
        })
    }

    /// `spec.parentRefs`, then the default Gateways' claims.
    pub fn parent_refs(&self) -> &[ParentRef<'a>] {
        self.read().parent_refs.get_or_init(|| {
            either_kind!(self.object, |r| r
                .spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| parent_ref!(p))
                .collect())
        })
    }

    /// Adds a default Gateway's claim after the parentRefs.
    pub fn claim(&mut self, claim: ParentRef<'a>) {
        self.parent_refs();
        let mut read = std::mem::take(&mut self.read).into_inner().unwrap_or_default();
        let mut refs = std::mem::take(&mut read.parent_refs)
            .into_inner()
            .unwrap_or_default();
        refs.push(claim);
        read.parent_refs = OnceLock::from(refs);
        self.read = OnceLock::from(read);
    }

    /// How many rules the route has (`rules().len()`, read from the object
    /// without building them).
    pub fn rule_count(&self) -> usize {
        either_kind!(self.object, |r| r.spec.rules.as_ref().map_or(0, Vec::len))
    }

    /// The name of rule `i` as written (`rules()[i].name`, read from the
    /// object without building the rules).
    pub fn rule_name(&self, i: usize) -> Option<&'a str> {
        either_kind!(self.object, |r| r.spec.rules.as_ref()?.get(i)?.name.as_deref())
    }

    /// Whether anything beyond the head was read, so built: hostnames,
    /// parentRefs or rules (for the incremental translator's count).
    pub fn read_beyond_head(&self) -> bool {
        self.read.get().is_some()
    }

    fn body(&self) -> &Body<'a> {
        self.read().body.get_or_init(|| match self.object {
            Object::Http(r) => http_body(r, self.unreadable),
            Object::Grpc(r) => grpc_body(r, self.unreadable),
        })
    }
}

/// Same-shaped generated types convert through JSON (the caller names
/// the field in the error it reports).
fn convert<A: Serialize, B: DeserializeOwned>(a: &A) -> Result<B, serde_json::Error> {
    serde_json::to_value(a).and_then(serde_json::from_value)
}

/// A route's namespace and name as the model reads them (the route order
/// and the incremental translator's keys read them from the object with
/// this, before or without a model).
pub fn namespace_name(
    meta: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

fn meta_common(
    meta: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (
    &str,
    &str,
    i64,
    Option<api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) {
    let (namespace, name) = namespace_name(meta);
    (
        namespace,
        name,
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

pub fn from_http<'a>(route: &'a HttpRoute, source: &'a Source, unreadable: &'a [Unreadable]) -> Route<'a> {
    let (namespace, name, generation, creation_timestamp) = meta_common(&route.metadata);
    Route {
        kind: RouteKind::Http,
        namespace,
        name,
        generation,
        creation_timestamp,
        source,
        use_default_gateways: matches!(
            route.spec.use_default_gateways,
            Some(api::gateway_api::experimental::httproutes::HttpRouteUseDefaultGateways::All)
        ),
        labels: route.metadata.labels.as_ref(),
        object: Object::Http(route),
        unreadable,
        read: OnceLock::new(),
    }
}

fn http_body<'a>(route: &'a HttpRoute, unreadable: &[Unreadable]) -> Body<'a> {
    let mut errors = Vec::new();
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
            let matches = match r.matches.as_deref() {
                None | Some([]) => Cow::Owned(vec![default_match()]),
                Some(m) => Cow::Borrowed(m),
            };
            let (load_errors, fenced) = fence(i, unreadable, &matches, None);
            Rule {
                name: r.name.clone(),
                matches,
                filters: Cow::Borrowed(r.filters.as_deref().unwrap_or_default()),
                match_errors: Vec::new(),
                backends,
                timeouts: r.timeouts.as_ref(),
                retry: r.retry.as_ref(),
                unsupported,
                id: String::new(),
                duplicate_of: None,
                load_errors,
                fenced,
            }
        })
        .collect::<Vec<_>>();
    Body {
        rules: assign_ids(rules),
        errors,
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
                    if let Some(Err(e)) = part.map(crate::envoy::regex::check) {
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

pub fn from_grpc<'a>(route: &'a GrpcRoute, source: &'a Source, unreadable: &'a [Unreadable]) -> Route<'a> {
    let (namespace, name, generation, creation_timestamp) = meta_common(&route.metadata);
    Route {
        kind: RouteKind::Grpc,
        namespace,
        name,
        generation,
        creation_timestamp,
        source,
        use_default_gateways: matches!(
            route.spec.use_default_gateways,
            Some(api::gateway_api::experimental::grpcroutes::GrpcRouteUseDefaultGateways::All)
        ),
        labels: route.metadata.labels.as_ref(),
        object: Object::Grpc(route),
        unreadable,
        read: OnceLock::new(),
    }
}

fn grpc_body<'a>(route: &'a GrpcRoute, unreadable: &[Unreadable]) -> Body<'a> {
    let mut errors = Vec::new();
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
            let written = r.matches.as_deref().unwrap_or_default();
            let matches: Cow<'_, [HttpRouteRulesMatches]> = Cow::Owned(matches);
            let (load_errors, fenced) = fence(i, unreadable, &matches, Some(written));
            Rule {
                name: r.name.clone(),
                matches,
                match_errors,
                filters: Cow::Owned(filters),
                backends,
                timeouts: None,
                retry: None,
                unsupported,
                id: String::new(),
                duplicate_of: None,
                load_errors,
                fenced,
            }
        })
        .collect::<Vec<_>>();
    Body {
        rules: assign_ids(rules),
        errors,
    }
}

/// The load errors of rule `rule` and, when there are any, the readings of
/// each of its matches that its 500 must cover.
///
/// What a match with an unreadable value may have meant is not known, so
/// the 500 catches every reading of it, each ranked as that reading would
/// rank (so nothing the match was meant to catch falls to a route the match
/// would have beaten):
/// - a path of unknown type is read as each type the spec defines (`Exact`,
///   `PathPrefix`, `RegularExpression`; an invalid pattern becomes the usual
///   guard on its literal prefix); a path whose value cannot be read
///   catches every path;
/// - a method, or a header or query match of unknown type, ranks as if it
///   were there but does not constrain what the 500 catches;
/// - a gRPC method match of unknown type is read as `Exact` and as
///   `RegularExpression` (`path_readings`).
fn fence(
    rule: usize,
    unreadable: &[Unreadable],
    matches: &[HttpRouteRulesMatches],
    grpc: Option<&[GrpcRouteRulesMatches]>,
) -> (Vec<RuleError>, Vec<Vec<Reading>>) {
    let mine: Vec<&Unreadable> = unreadable.iter().filter(|u| u.is_in("rules", rule)).collect();
    if mine.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let errors = mine
        .iter()
        .map(|u| RuleError::structural(u.field(), u.message.clone()))
        .collect();
    let fenced = matches
        .iter()
        .enumerate()
        .map(|(j, m)| {
            // What of match j could not be read, by the steps below
            // `spec.rules[rule].matches[j]`.
            let below: Vec<&[FieldStep]> = mine
                .iter()
                .filter_map(|u| match u.path.get(3..5) {
                    Some([FieldStep::Key(k), FieldStep::Index(i)]) if k == "matches" && *i == j => {
                        u.path.get(5..)
                    }
                    _ => None,
                })
                .collect();
            let key = |name: &str| {
                below
                    .iter()
                    .any(|p| matches!(p.first(), Some(FieldStep::Key(k)) if k == name))
            };
            let elements = |name: &str| -> Option<Vec<usize>> {
                let mut out = Vec::new();
                for p in &below {
                    match p {
                        [FieldStep::Key(k)] if k == name => return None, // the whole list
                        [FieldStep::Key(k), FieldStep::Index(i), ..] if k == name => out.push(*i),
                        _ => {}
                    }
                }
                Some(out)
            };
            let (bad_headers, bad_queries) = (elements("headers"), elements("queryParams"));
            let mut ranked_as = m.clone();
            let mut catches = m.clone();
            if key("method") && grpc.is_none() {
                // HTTPRoute: ranked as a match with a method, catching any.
                ranked_as.method = Some(HttpRouteRulesMatchesMethod::Get);
            }
            let keep = |bad: &Option<Vec<usize>>, i: usize| bad.as_ref().is_some_and(|b| !b.contains(&i));
            if let Some(hs) = catches.headers.as_mut() {
                let mut i = 0;
                hs.retain(|_| (keep(&bad_headers, i), i += 1).0);
            }
            if let Some(qs) = catches.query_params.as_mut() {
                let mut i = 0;
                qs.retain(|_| (keep(&bad_queries, i), i += 1).0);
            }
            let path_readings: Vec<(HttpRouteRulesMatches, HttpRouteRulesMatches)> = if key("path") {
                match m.path.as_ref().and_then(|p| p.value.clone()) {
                    Some(value) => [
                        HttpRouteRulesMatchesPathType::Exact,
                        HttpRouteRulesMatchesPathType::PathPrefix,
                        HttpRouteRulesMatchesPathType::RegularExpression,
                    ]
                    .into_iter()
                    .map(|t| {
                        let path = Some(HttpRouteRulesMatchesPath {
                            r#type: Some(t),
                            value: Some(value.clone()),
                        });
                        let mut r = ranked_as.clone();
                        let mut c = catches.clone();
                        r.path = path.clone();
                        c.path = path;
                        (r, c)
                    })
                    .collect(),
                    None => {
                        let (mut r, mut c) = (ranked_as.clone(), catches.clone());
                        r.path = default_match().path;
                        c.path = default_match().path;
                        vec![(r, c)]
                    }
                }
            } else if let Some(written) = grpc.and_then(|g| g.get(j)).filter(|_| key("method")) {
                // A gRPC method match is the path: read as each method
                // match type the GRPCRoute spec defines (the loader removed
                // the unknown one; a removed service or method name reads
                // as "any", a superset).
                [
                    GrpcRouteRulesMatchesMethodType::Exact,
                    GrpcRouteRulesMatchesMethodType::RegularExpression,
                ]
                .into_iter()
                .map(|t| {
                    let mut g = written.clone();
                    if let Some(method) = g.method.as_mut() {
                        method.r#type = Some(t);
                    }
                    let path = grpc_match(&g, "").0.path;
                    let (mut r, mut c) = (ranked_as.clone(), catches.clone());
                    r.path = path.clone();
                    c.path = path;
                    (r, c)
                })
                .collect()
            } else {
                vec![(ranked_as, catches)]
            };
            let mut readings: Vec<Reading> = Vec::with_capacity(path_readings.len());
            for (ranked_as, catches) in path_readings {
                // A gRPC method that could not be read at all reads the
                // same both ways.
                if !readings
                    .iter()
                    .any(|r| r.ranked_as == ranked_as && r.catches == catches)
                {
                    readings.push(Reading { ranked_as, catches });
                }
            }
            readings
        })
        .collect();
    (errors, fenced)
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
            load_errors: Vec::new(),
            fenced: Vec::new(),
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

    fn unreadable(rule: usize, path: &[&str], message: &str) -> Unreadable {
        Unreadable {
            rule,
            path: path
                .iter()
                .map(|p| match p.parse() {
                    Ok(i) => FieldStep::Index(i),
                    Err(_) => FieldStep::Key((*p).to_string()),
                })
                .collect(),
            message: message.into(),
        }
    }

    fn http_match(value: serde_json::Value) -> HttpRouteRulesMatches {
        serde_json::from_value(value).expect("match")
    }

    #[test]
    fn a_rule_without_unreadable_values_is_not_fenced() {
        let m = [http_match(serde_json::json!({"path": {"value": "/a"}}))];
        let u = [unreadable(
            1,
            &["spec", "rules", "1", "filters", "0", "type"],
            "x",
        )];
        assert!(matches!(fence(0, &u, &m, None), (e, f) if e.is_empty() && f.is_empty()));
    }

    #[test]
    fn each_reading_catches_a_superset_and_ranks_as_written() {
        // As the loader leaves it: the unknown path type, method and header
        // type removed; the header element kept in its place.
        let m = [
            http_match(serde_json::json!({"path": {"value": "/a"}})),
            http_match(serde_json::json!({
                "path": {"type": "Exact", "value": "/b"},
                "headers": [{"name": "x", "value": "1"}, {"name": "y", "value": "2"}],
            })),
        ];
        let u = [
            unreadable(
                0,
                &["spec", "rules", "0", "matches", "0", "path", "type"],
                "unknown",
            ),
            unreadable(0, &["spec", "rules", "0", "matches", "1", "method"], "unknown"),
            unreadable(
                0,
                &["spec", "rules", "0", "matches", "1", "headers", "0", "type"],
                "unknown",
            ),
        ];
        let (errors, fenced) = fence(0, &u, &m, None);
        assert_eq!(errors.len(), 3);
        assert_eq!(errors[1].to_string(), "spec.rules[0].matches[1].method: unknown");
        // Match 0: every path type the spec defines, on the same value.
        let types: Vec<_> = fenced[0]
            .iter()
            .map(|r| r.catches.path.as_ref().and_then(|p| p.r#type.clone()))
            .collect();
        assert_eq!(
            types,
            vec![
                Some(HttpRouteRulesMatchesPathType::Exact),
                Some(HttpRouteRulesMatchesPathType::PathPrefix),
                Some(HttpRouteRulesMatchesPathType::RegularExpression),
            ]
        );
        // Match 1: ranked with a method and both headers; catches any method
        // and ignores the header whose match type is unknown.
        let [reading] = fenced[1].as_slice() else {
            panic!("one reading: {:?}", fenced[1])
        };
        assert!(reading.ranked_as.method.is_some());
        assert_eq!(reading.ranked_as.headers.as_ref().map(Vec::len), Some(2));
        assert!(reading.catches.method.is_none());
        let names: Vec<&str> = reading
            .catches
            .headers
            .iter()
            .flatten()
            .map(|h| h.name.as_str())
            .collect();
        assert_eq!(names, vec!["y"]);
    }
}
