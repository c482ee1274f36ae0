//! One route rule → Envoy routes (one per match) for one listener.
//!
//! Errors never drop a rule: a rule that cannot be programmed keeps its
//! matches and is replaced with a 500; a matcher that cannot be programmed
//! becomes a 500 guard on its literal path prefix. This file finds the
//! errors; when they replace what is `replacement::rule`'s decision.

use std::collections::BTreeMap;

use api::gateway_api::experimental::httproutes::{HttpRouteRulesFilters, HttpRouteRulesFiltersType as T};
use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route as EnvoyRoute, RouteAction, RouteMatch, WeightedCluster, route, route_action,
    route_match, weighted_cluster,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use crate::backend::{self, Backend, ClusterSpec};
use crate::duration;
use crate::error::RuleError;
use crate::index::Index;
use crate::listener::Protocol;
use crate::replacement;
use crate::route::filters::{self, HeaderMods, MatchedPath, PrefixRewrite};
use crate::route::matches::{self, Programmable, Rank};
use crate::route::model::{Route, Rule};

/// Where the rule is programmed.
#[derive(Clone, Copy, Debug)]
pub struct ListenerContext {
    pub port: i32,
    pub protocol: Protocol,
}

/// One Envoy route with its precedence.
#[derive(Clone, Debug)]
pub struct BuiltRoute {
    pub route: EnvoyRoute,
    pub rank: Rank,
    /// Answers the replacement 500 (or is a guard): policies skip it.
    pub replaced: bool,
}

/// Everything one rule produced.
#[derive(Clone, Debug, Default)]
pub struct BuiltRule {
    pub routes: Vec<BuiltRoute>,
    /// Set when the rule (or one of its matchers) was replaced.
    pub replaced: Option<RuleError>,
    /// ResolvedRefs problems: (reason, message).
    pub unresolved: Vec<(&'static str, String)>,
    pub warnings: Vec<String>,
    /// Extension resources its `extensionRef` filters name (registered
    /// kinds, resolved in the route's namespace): `PostRouteModify`'s
    /// context for its routes.
    pub extension_resources: Vec<crate::extension::ExtensionResource>,
}

/// What the rule does with matching requests, before it is attached to
/// each match.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // built once per rule, moved into the route
enum Behaviour {
    Forward(RouteAction),
    Redirect(envoy_types::pb::envoy::config::route::v3::RedirectAction),
    Respond(u32),
}

const INVALID_BACKEND_CLUSTER: &str = "portcullis/invalid-backend";

fn pb_duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Gateway API's maximum backendRef weight.
const MAX_WEIGHT: u32 = 1_000_000;

fn route_name(route: &Route<'_>, rule: &Rule<'_>, match_index: usize) -> String {
    use std::fmt::Write;
    // One allocation: this runs for every Envoy route.
    let kind = match route.kind {
        crate::route::model::RouteKind::Http => "httproute",
        crate::route::model::RouteKind::Grpc => "grpcroute",
    };
    let mut name =
        String::with_capacity(kind.len() + route.namespace.len() + route.name.len() + rule.id.len() + 24);
    // `rule.id` is unique within the route (see `model::assign_ids`).
    let _ = write!(
        name,
        "{kind}/{}/{}/rule/{}/match/{match_index}",
        route.namespace, route.name, rule.id
    );
    name
}

pub fn build(
    index: &Index<'_>,
    route: &Route<'_>,
    rule_index: usize,
    rule: &Rule<'_>,
    ctx: ListenerContext,
    clusters: &mut BTreeMap<String, ClusterSpec>,
    policy: Option<&crate::policy::Effective>,
) -> BuiltRule {
    // Values the loader could not read: the whole rule answers 500.
    if !rule.load_errors.is_empty() {
        let name = |j| route_name(route, rule, j);
        return replacement::unreadable::fence(rule_index, rule, name);
    }
    let field = format!("spec.rules[{rule_index}]");
    let mut out = BuiltRule {
        routes: Vec::with_capacity(rule.matches.len()),
        ..Default::default()
    };
    for u in &rule.unsupported {
        out.warnings
            .push(format!("{field}.{u}: not supported by portcullis; ignored"));
    }
    let prefix_dependent = depends_on_matched_prefix(rule);
    let mut cached: Option<(Result<Behaviour, RuleError>, (HeaderMods, HeaderMods))> = None;
    for (j, m) in rule.matches.iter().enumerate() {
        let match_field = format!("{field}.matches[{j}]");
        let matched = match m.path.as_ref() {
            Some(p) if p.r#type.is_none()
                || p.r#type == Some(api::gateway_api::experimental::httproutes::HttpRouteRulesMatchesPathType::PathPrefix) =>
            {
                MatchedPath::Prefix(p.value.as_deref().unwrap_or("/"))
            }
            None => MatchedPath::Prefix("/"),
            _ => MatchedPath::Other,
        };
        // The behaviour depends on the match only through prefix rewrites;
        // otherwise it is computed once for the rule.
        // Kept for the next match only when there is one (a RouteAction is
        // ~1.5 KiB with its strings: cloning it for single-match rules
        // showed in profiles).
        let last = j + 1 == rule.matches.len();
        let (behaviour, mods) = match (cached.take(), prefix_dependent) {
            (Some((b, m)), false) => {
                if !last {
                    cached = Some((b.clone(), m.clone()));
                }
                (b, m)
            }
            _ => {
                let mut mods = (HeaderMods::default(), HeaderMods::default());
                let b = behaviour(
                    index, route, rule, &field, ctx, &matched, clusters, &mut mods, &mut out,
                );
                if !last && !prefix_dependent {
                    cached = Some((b.clone(), mods.clone()));
                }
                (b, mods)
            }
        };
        let name = route_name(route, rule, j);
        let converted = rule.match_errors.get(j).cloned().flatten();
        match matches::build(m, &match_field, converted) {
            Programmable::Ok(rm, rank) => {
                let mut r = EnvoyRoute {
                    name,
                    r#match: Some(rm),
                    ..Default::default()
                };
                match behaviour {
                    Ok(b) => {
                        r.action = Some(match b {
                            Behaviour::Forward(a) => route::Action::Route(a),
                            Behaviour::Redirect(a) => route::Action::Redirect(a),
                            Behaviour::Respond(status) => {
                                route::Action::DirectResponse(DirectResponseAction {
                                    status,
                                    ..Default::default()
                                })
                            }
                        });
                        r.request_headers_to_add = mods.0.add;
                        r.request_headers_to_remove = mods.0.remove;
                        r.response_headers_to_add = mods.1.add;
                        r.response_headers_to_remove = mods.1.remove;
                        out.routes.push(BuiltRoute {
                            route: r,
                            rank,
                            replaced: false,
                        });
                    }
                    Err(e) => replacement::rule::failed(r, rank, e, &mut out),
                }
            }
            Programmable::Guard { guard, rank, error } => {
                replacement::rule::guard(&name, guard, rank, error, &mut out);
            }
        }
    }
    if let Some(p) = policy {
        replacement::rule::policy(&mut out, p, &field);
    }
    // A GRPCRoute's method match is programmed as a path match: name the
    // field the user wrote.
    if route.kind == crate::route::model::RouteKind::Grpc
        && let Some(e) = out.replaced.as_mut()
    {
        e.field = e
            .field
            .replace(".path.value", ".method")
            .replace(".path", ".method");
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn behaviour(
    index: &Index<'_>,
    route: &Route<'_>,
    rule: &Rule<'_>,
    field: &str,
    ctx: ListenerContext,
    matched: &MatchedPath<'_>,
    clusters: &mut BTreeMap<String, ClusterSpec>,
    mods: &mut (HeaderMods, HeaderMods),
    out: &mut BuiltRule,
) -> Result<Behaviour, RuleError> {
    let filters_field = format!("{field}.filters");
    if let Some(k) = rule.duplicate_of {
        return Err(RuleError::semantic(
            format!("{field}.name"),
            format!(
                "rule name {:?} is also the name of spec.rules[{k}]; rule names must be unique within a route",
                rule.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    filters::check_combination(&rule.filters, &filters_field)?;

    // Backend-level filters other than header modifiers can only be honoured
    // when the rule has a single backend: then they act as rule filters.
    let mut rule_filters: Vec<(String, &HttpRouteRulesFilters)> = rule
        .filters
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("{filters_field}[{i}]"), f))
        .collect();
    for (bi, b) in rule.backends.iter().enumerate() {
        for (fi, f) in b.filters.iter().enumerate() {
            let ff = format!("{field}.backendRefs[{bi}].filters[{fi}]");
            match f.r#type {
                T::RequestHeaderModifier | T::ResponseHeaderModifier => {}
                _ if rule.backends.len() == 1 => {
                    // Spec: RequestRedirect and URLRewrite exclude each
                    // other on a rule or a backendRef alike; one of them
                    // lifted from the backend must not silently lose to the
                    // other.
                    let clash = match f.r#type {
                        T::UrlRewrite => Some(T::RequestRedirect),
                        T::RequestRedirect => Some(T::UrlRewrite),
                        _ => None,
                    };
                    if let Some(other) = clash
                        && rule_filters.iter().any(|(_, g)| g.r#type == other)
                    {
                        return Err(RuleError::semantic(
                            ff,
                            "RequestRedirect and URLRewrite cannot be used together",
                        ));
                    }
                    if f.r#type != T::RequestMirror
                        && f.r#type != T::ExtensionRef
                        && rule_filters.iter().any(|(_, g)| g.r#type == f.r#type)
                    {
                        return Err(RuleError::semantic(
                            ff,
                            format!(
                                "filter type {:?} is given on both the rule and its backendRef",
                                f.r#type
                            ),
                        ));
                    }
                    rule_filters.push((ff, f));
                }
                _ => {
                    return Err(RuleError::semantic(
                        ff,
                        format!("{:?} on one of several backendRefs is not supported", f.r#type),
                    ));
                }
            }
        }
    }

    let mut redirect = None;
    let mut rewrite: (Option<String>, Option<PrefixRewrite>) = (None, None);
    let mut mirrors = Vec::new();
    for (ff, f) in &rule_filters {
        match f.r#type {
            T::RequestHeaderModifier => header_filter(f, ff, &mut mods.0)?,
            T::ResponseHeaderModifier => header_filter(f, ff, &mut mods.1)?,
            T::RequestRedirect => {
                let r = f
                    .request_redirect
                    .as_ref()
                    .ok_or_else(|| missing(ff, "requestRedirect"))?;
                redirect = Some(filters::redirect(
                    r,
                    &format!("{ff}.requestRedirect"),
                    ctx.port,
                    ctx.protocol,
                    matched,
                )?);
            }
            T::UrlRewrite => {
                let r = f.url_rewrite.as_ref().ok_or_else(|| missing(ff, "urlRewrite"))?;
                rewrite = filters::url_rewrite(r, &format!("{ff}.urlRewrite"), matched)?;
            }
            T::RequestMirror => {
                let m = f
                    .request_mirror
                    .as_ref()
                    .ok_or_else(|| missing(ff, "requestMirror"))?;
                let b = crate::route::model::BackendRef {
                    group: m.backend_ref.group.as_deref().unwrap_or(""),
                    kind: m.backend_ref.kind.as_deref().unwrap_or("Service"),
                    namespace: m.backend_ref.namespace.as_deref(),
                    name: &m.backend_ref.name,
                    port: m.backend_ref.port,
                    weight: 1,
                    filters: std::borrow::Cow::Borrowed(&[]),
                };
                let fraction = mirror_fraction(
                    m.percent,
                    m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
                    &format!("{ff}.requestMirror"),
                )?;
                match backend::resolve(
                    index,
                    route,
                    &b,
                    || format!("{ff}.requestMirror.backendRef"),
                    clusters,
                ) {
                    Backend::Cluster { name, .. } => mirrors.push(route_action::RequestMirrorPolicy {
                        cluster: name,
                        runtime_fraction: fraction.map(|n| RuntimeFractionalPercent {
                            default_value: Some(FractionalPercent {
                                numerator: n,
                                denominator: fractional_percent::DenominatorType::Million as i32,
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    // A mirror that cannot be resolved is reported and left
                    // out: the primary traffic is unaffected.
                    Backend::Invalid { reason, message, .. } => out.unresolved.push((reason, message)),
                }
            }
            T::ExtensionRef => {
                let e = f
                    .extension_ref
                    .as_ref()
                    .ok_or_else(|| missing(ff, "extensionRef"))?;
                use crate::extension::resources::Lookup;
                let lookup = index.extensions.as_ref().map_or(Lookup::NotRegistered, |x| {
                    x.resolve(&e.group, &e.kind, route.namespace, &e.name)
                });
                match lookup {
                    // The extension server gets it in `PostRouteModify`'s
                    // context; the route itself is built without it.
                    // Without the Route hook nothing would apply the
                    // filter: it must not be skipped silently (the spec's
                    // 500 for a filter that cannot be honoured).
                    Lookup::Found(_)
                        if !index
                            .extensions
                            .as_ref()
                            .is_some_and(|x| x.runs(crate::extension::Hook::Route)) =>
                    {
                        return Err(RuleError::referential(
                            format!("{ff}.extensionRef"),
                            format!(
                                "{}/{} {}: the extension's Route hook is not enabled (hooks.xdsTranslator.post), so nothing would apply this filter",
                                e.group, e.kind, e.name
                            ),
                        ));
                    }
                    Lookup::Found(r) => {
                        if !out.extension_resources.contains(&r) {
                            out.extension_resources.push(r);
                        }
                    }
                    Lookup::Missing => {
                        return Err(RuleError::referential(
                            format!("{ff}.extensionRef"),
                            format!(
                                "{}/{} {} not found in namespace {}",
                                e.group, e.kind, e.name, route.namespace
                            ),
                        ));
                    }
                    Lookup::NotRegistered => {
                        return Err(RuleError::referential(
                            format!("{ff}.extensionRef"),
                            format!(
                                "{}/{} {} cannot be resolved (no such extension kind is known)",
                                e.group, e.kind, e.name
                            ),
                        ));
                    }
                }
            }
            ref other => {
                // Fail closed: an unimplemented filter (CORS, ExternalAuth…)
                // must not be silently skipped.
                return Err(RuleError::structural(
                    ff.clone(),
                    format!("filter type {other:?} is not supported"),
                ));
            }
        }
    }
    if let Some(r) = redirect {
        // A redirect answers without forwarding: Envoy has no upstream to
        // mirror and no backend to send to. The spec allows a mirror beside
        // a redirect (but not backendRefs); neither can take effect, so say
        // so rather than drop them silently.
        if rule_filters.iter().any(|(_, f)| f.r#type == T::RequestMirror) {
            out.warnings.push(format!(
                "{filters_field}: RequestMirror beside RequestRedirect is not supported by portcullis (a redirect forwards nothing to mirror); the mirror is ignored"
            ));
        }
        if !rule.backends.is_empty() {
            out.warnings.push(format!(
                "{field}.backendRefs: ignored, a rule with RequestRedirect answers every request with the redirect (the CRD rejects backendRefs beside RequestRedirect)"
            ));
        }
        return Ok(Behaviour::Redirect(r));
    }

    // Backends.
    let mut weighted: Vec<weighted_cluster::ClusterWeight> = Vec::new();
    let mut valid_weight = 0u64;
    let mut invalid_weight = 0u64;
    for (bi, b) in rule.backends.iter().enumerate() {
        let bfield = || format!("{field}.backendRefs[{bi}]");
        // The CRD's minimum; `backend::resolve` would read it as 0.
        if b.weight < 0 {
            return Err(RuleError::structural(
                format!("{}.weight", bfield()),
                format!("{} is below the minimum weight 0", b.weight),
            ));
        }
        let resolved = backend::resolve(index, route, b, bfield, clusters);
        let mut bmods = (HeaderMods::default(), HeaderMods::default());
        for (fi, f) in b.filters.iter().enumerate() {
            let ff = format!("{}.filters[{fi}]", bfield());
            match f.r#type {
                T::RequestHeaderModifier => header_filter(f, &ff, &mut bmods.0)?,
                T::ResponseHeaderModifier => header_filter(f, &ff, &mut bmods.1)?,
                _ => {}
            }
        }
        let weight = match &resolved {
            Backend::Cluster { weight, .. } | Backend::Invalid { weight, .. } => *weight,
        };
        // The CRD caps a weight at 1,000,000; without the API server to
        // enforce it, an oversized weight (or a sum past u32) would wrap.
        if weight > MAX_WEIGHT {
            return Err(RuleError::structural(
                format!("{}.weight", bfield()),
                format!("{weight} is above the maximum weight {MAX_WEIGHT}"),
            ));
        }
        let name = match resolved {
            Backend::Cluster { name, weight } => {
                valid_weight += u64::from(weight);
                name
            }
            Backend::Invalid {
                weight,
                reason,
                message,
            } => {
                out.unresolved.push((reason, message));
                invalid_weight += u64::from(weight);
                INVALID_BACKEND_CLUSTER.to_string()
            }
        };
        // Envoy sums every weighted cluster it is given, the invalid
        // backends' share (`INVALID_BACKEND_CLUSTER`) included, and refuses
        // a sum above u32 ("The sum of weights of all weighted clusters of
        // route … exceeds 4294967295"), a NACK of the whole configuration.
        let total = valid_weight + invalid_weight;
        if total > u64::from(u32::MAX) {
            return Err(RuleError::structural(
                format!("{field}.backendRefs"),
                format!(
                    "the backend weights (valid and invalid backends alike) sum to at least {total}, above Envoy's limit of {}",
                    u32::MAX
                ),
            ));
        }
        if weight == 0 {
            continue;
        }
        weighted.push(weighted_cluster::ClusterWeight {
            name,
            weight: Some(UInt32Value { value: weight }),
            request_headers_to_add: bmods.0.add,
            request_headers_to_remove: bmods.0.remove,
            response_headers_to_add: bmods.1.add,
            response_headers_to_remove: bmods.1.remove,
            ..Default::default()
        });
    }
    // Spec: no backends, or all weights zero, or only invalid ones → 500.
    if valid_weight == 0 {
        return Ok(Behaviour::Respond(500));
    }
    let mut action = RouteAction {
        cluster_not_found_response_code: route_action::ClusterNotFoundResponseCode::InternalServerError
            as i32,
        request_mirror_policies: mirrors,
        ..Default::default()
    };
    let single_plain = weighted.len() == 1
        && invalid_weight == 0
        && weighted[0].request_headers_to_add.is_empty()
        && weighted[0].request_headers_to_remove.is_empty()
        && weighted[0].response_headers_to_add.is_empty()
        && weighted[0].response_headers_to_remove.is_empty();
    action.cluster_specifier = Some(if single_plain {
        route_action::ClusterSpecifier::Cluster(weighted.remove(0).name)
    } else {
        route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: weighted,
            ..Default::default()
        })
    });
    if let Some(host) = rewrite.0 {
        action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(host));
    }
    match rewrite.1 {
        Some(PrefixRewrite::Prefix(p)) => action.prefix_rewrite = p,
        Some(PrefixRewrite::Regex(r)) => action.regex_rewrite = Some(r),
        None => {}
    }
    if let Some(t) = &rule.timeouts {
        let request = t
            .request
            .as_deref()
            .map(|v| {
                duration::parse(v)
                    .map_err(|e| RuleError::structural(format!("{field}.timeouts.request"), e.to_string()))
            })
            .transpose()?;
        let backend = t
            .backend_request
            .as_deref()
            .map(|v| {
                duration::parse(v).map_err(|e| {
                    RuleError::structural(format!("{field}.timeouts.backendRequest"), e.to_string())
                })
            })
            .transpose()?;
        if let (Some(r), Some(b)) = (request, backend)
            && !r.is_zero()
            && b > r
        {
            return Err(RuleError::semantic(
                format!("{field}.timeouts.backendRequest"),
                "must not be longer than timeouts.request",
            ));
        }
        // A zero request timeout disables the timeout, as in Envoy.
        if let Some(r) = request.or(backend) {
            action.timeout = Some(pb_duration(r));
        }
        if let (Some(_), Some(b)) = (request, backend) {
            action
                .retry_policy
                .get_or_insert_with(Default::default)
                .per_try_timeout = Some(pb_duration(b));
        }
    }
    if let Some(r) = &rule.retry {
        let policy = action.retry_policy.get_or_insert_with(Default::default);
        // Checked before conversion: a negative code must be refused, not
        // dropped.
        let mut codes: Vec<u32> = Vec::new();
        for (i, c) in r.codes.iter().flatten().enumerate() {
            match u32::try_from(*c) {
                Ok(c) if (400..=599).contains(&c) => codes.push(c),
                _ => {
                    return Err(RuleError::structural(
                        format!("{field}.retry.codes[{i}]"),
                        format!("{c} is not within 400-599"),
                    ));
                }
            }
        }
        let mut on = vec!["connect-failure", "refused-stream", "reset"];
        if !codes.is_empty() {
            on.push("retriable-status-codes");
        }
        policy.retry_on = on.join(",");
        policy.retriable_status_codes = codes;
        // Refused, not clamped, outside 0-1000 (the bound TrafficPolicy
        // `retry.attempts` has too).
        let attempts = r.attempts.unwrap_or(1);
        let attempts = u32::try_from(attempts)
            .ok()
            .filter(|a| *a <= 1000)
            .ok_or_else(|| {
                RuleError::structural(
                    format!("{field}.retry.attempts"),
                    format!("{attempts} is not within 0-1000"),
                )
            })?;
        policy.num_retries = Some(UInt32Value { value: attempts });
        if let Some(b) = &r.backoff {
            let d = duration::parse(b)
                .map_err(|e| RuleError::structural(format!("{field}.retry.backoff"), e.to_string()))?;
            if d.is_zero() {
                return Err(RuleError::structural(
                    format!("{field}.retry.backoff"),
                    "must be greater than zero",
                ));
            }
            policy.retry_back_off = Some(
                envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff {
                    base_interval: Some(pb_duration(d)),
                    ..Default::default()
                },
            );
        }
    }
    Ok(Behaviour::Forward(action))
}

/// A mirror's share in millionths (None: all requests). The CRD's bounds
/// (percent 0–100; numerator ≥ 0; denominator ≥ 1 and ≥ numerator; not
/// both percent and fraction) are checked here: without the API server a
/// value outside them must not be bent into range silently.
fn mirror_fraction(
    percent: Option<i32>,
    fraction: Option<(i32, Option<i32>)>,
    field: &str,
) -> Result<Option<u32>, RuleError> {
    match (percent, fraction) {
        (Some(_), Some(_)) => Err(RuleError::structural(
            field,
            "only one of percent or fraction may be specified",
        )),
        (Some(p), None) => match u32::try_from(p) {
            Ok(p) if p <= 100 => Ok(Some(p * 10_000)),
            _ => Err(RuleError::structural(
                format!("{field}.percent"),
                format!("{p} is not within 0-100"),
            )),
        },
        (None, Some((numerator, denominator))) => {
            let den = denominator.unwrap_or(100);
            if den < 1 {
                return Err(RuleError::structural(
                    format!("{field}.fraction.denominator"),
                    format!("{den} is below the minimum 1"),
                ));
            }
            if numerator < 0 || numerator > den {
                return Err(RuleError::structural(
                    format!("{field}.fraction.numerator"),
                    format!("{numerator} is not within 0 and the denominator {den}"),
                ));
            }
            // 0 ≤ numerator ≤ den: the share is within 0..=1,000,000.
            Ok(Some((i64::from(numerator) * 1_000_000 / i64::from(den)) as u32))
        }
        (None, None) => Ok(None),
    }
}

/// Whether a filter of the rule rewrites relative to the matched prefix.
fn depends_on_matched_prefix(rule: &Rule<'_>) -> bool {
    use api::gateway_api::experimental::httproutes::{
        HttpRouteRulesFiltersRequestRedirectPathType as R, HttpRouteRulesFiltersUrlRewritePathType as U,
    };
    rule.filters
        .iter()
        .chain(rule.backends.iter().flat_map(|b| b.filters.iter()))
        .any(|f| {
            f.request_redirect
                .as_ref()
                .and_then(|r| r.path.as_ref())
                .is_some_and(|p| p.r#type == R::ReplacePrefixMatch)
                || f.url_rewrite
                    .as_ref()
                    .and_then(|r| r.path.as_ref())
                    .is_some_and(|p| p.r#type == U::ReplacePrefixMatch)
        })
}

/// A Request- or ResponseHeaderModifier filter (rule- or backend-level).
fn header_filter(f: &HttpRouteRulesFilters, ff: &str, into: &mut HeaderMods) -> Result<(), RuleError> {
    macro_rules! apply {
        ($m:expr, $name:literal) => {{
            let m = $m.as_ref().ok_or_else(|| missing(ff, $name))?;
            filters::header_modifier(
                m.set
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.add
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.remove.as_deref().unwrap_or_default(),
                &format!("{ff}.{}", $name),
                into,
            )
        }};
    }
    // The two generated modifier types differ only in name. One filter of
    // each direction reaches a route (or a weighted cluster), so its count
    // is the count Envoy sees there, before policies add theirs (checked
    // in `check_merged_additions`).
    match f.r#type {
        T::RequestHeaderModifier => {
            apply!(f.request_header_modifier, "requestHeaderModifier")?;
            filters::check_additions(into, &format!("{ff}.requestHeaderModifier"), "request")
        }
        _ => {
            apply!(f.response_header_modifier, "responseHeaderModifier")?;
            filters::check_additions(into, &format!("{ff}.responseHeaderModifier"), "response")
        }
    }
}

fn missing(field: &str, name: &str) -> RuleError {
    RuleError::structural(format!("{field}.{name}"), "required for this filter type")
}

/// The RouteMatch kind used by guards and tests.
pub fn prefix_match(p: &str) -> RouteMatch {
    RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix(p.into())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use crate::error::ErrorClass;

    const HEAD: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules:
";

    /// (rule, message, class) of every replacement.
    fn replaced(rules: &str) -> Vec<(usize, String, ErrorClass)> {
        let text = format!("{HEAD}{rules}");
        let out = crate::translate(
            &api::loader::load_str("t.yaml", &text).inputs,
            &crate::Settings::default(),
        );
        out.replacements
            .into_iter()
            .map(|r| (r.rule, r.message, r.class))
            .collect()
    }

    /// Envoy adds up every weighted cluster it is given, the invalid
    /// backends' share included: 4,294 valid backends of 1,000,000 fit in
    /// u32, one more invalid one does not (Envoy 1.40: "The sum of weights
    /// of all weighted clusters of route … exceeds 4294967295").
    #[test]
    fn the_weight_total_counts_invalid_backends_too() {
        let valid = vec!["{name: web, port: 80, weight: 1000000}"; 4294].join(", ");
        let ok = replaced(&format!(
            "  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    backendRefs: [{valid}]\n"
        ));
        assert_eq!(ok, vec![]);
        let over = replaced(&format!(
            "  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    backendRefs: [{valid}, {{name: missing, port: 80, weight: 1000000}}]\n"
        ));
        assert_eq!(
            over,
            vec![(
                0,
                "spec.rules[0].backendRefs: the backend weights (valid and invalid backends alike) sum to at least 4295000000, above Envoy's limit of 4294967295".to_string(),
                ErrorClass::Structural
            )]
        );
    }

    /// Exactly Envoy's limit of 1,000 additions is accepted (checked with
    /// `envoy --mode validate`, see fixture hardening-header-additions);
    /// one more replaces the rule.
    #[test]
    fn header_additions_are_capped_at_envoys_limit() {
        let set = |n: usize| {
            (0..n)
                .map(|i| format!("{{name: x-{i}, value: v}}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rule = |n: usize| {
            format!(
                "  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    filters:\n    - type: ResponseHeaderModifier\n      responseHeaderModifier: {{set: [{}]}}\n    backendRefs: [{{name: web, port: 80}}]\n",
                set(n)
            )
        };
        assert_eq!(replaced(&rule(1000)), vec![]);
        assert_eq!(
            replaced(&rule(1001)),
            vec![(
                0,
                "spec.rules[0].filters[0].responseHeaderModifier: 1001 response header additions (set and add) exceed Envoy's limit of 1000 per route".to_string(),
                ErrorClass::Structural
            )]
        );
    }
}
