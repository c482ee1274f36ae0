//! Which rules each TrafficPolicy reaches, and how policies that reach the
//! same rule merge.
//!
//! Targets: `targetRefs` name an HTTPRoute or GRPCRoute in the policy's
//! namespace, optionally one rule of it by name (`sectionName`);
//! `targetSelectors` pick routes of a kind by labels. Gateway and listener
//! targets are `scope`'s. Order of precedence on
//! one rule: a rule target, then a whole-route target, then a selector;
//! ties go to the older policy, then to namespace/name. Per feature the
//! first policy in that order wins; every other policy that sets the
//! feature gets a warning naming the winner. An invalid policy replaces
//! every rule it reaches (fail closed).
//!
//! Of each route, attaching reads only its head (kind, namespace, name,
//! labels, rule count and rule names) and its position in the route
//! order: the incremental translator reuses last call's attachment when
//! these and the policies are unchanged (`incremental/standing_policies.rs`).

use std::collections::BTreeSet;

use super::{Compiled, Effective, FEATURES, KIND, PolicyError, ext_auth};
use crate::error::RuleError;
use crate::route::model::{Route, RouteKind};

const ROUTE_GROUP: &str = "gateway.networking.k8s.io";

/// The result of attaching every policy.
#[derive(Debug, Default)]
pub struct Attachment {
    /// `[route][rule]`: what reaches the rule, if any policy does (boxed:
    /// an `Effective` is ~2 KiB and most rules have none); empty for a
    /// route no policy reaches (read with `get`: every route is attached
    /// on every call, and most have no policy).
    pub effective: Vec<Vec<Option<Box<Effective>>>>,
    /// Per compiled policy: the routes (indices) it reaches.
    pub reached: Vec<BTreeSet<usize>>,
}

impl Attachment {
    /// Which policy supplies which feature to which rule (rules replaced
    /// by an invalid policy have none in force).
    pub fn records(&self, routes: &[Route<'_>]) -> Vec<crate::PolicyAttachment> {
        let mut out = Vec::new();
        for (route, rules) in routes.iter().zip(&self.effective) {
            for (rule, e) in rules.iter().enumerate() {
                let Some(e) = e.as_ref().filter(|e| e.errors.is_empty()) else {
                    continue;
                };
                for (fi, source) in e.sources.iter().enumerate() {
                    if let Some(policy) = source {
                        out.push(crate::PolicyAttachment {
                            route_kind: route.kind.kind().into(),
                            route_namespace: route.namespace.to_string(),
                            route_name: route.name.to_string(),
                            rule,
                            feature: FEATURES[fi].into(),
                            policy: policy.clone(),
                            level: if e.levels[fi] == 0 { "rule" } else { "route" }.into(),
                        });
                    }
                }
            }
        }
        out
    }
}

fn route_kind(group: &str, kind: &str) -> Option<RouteKind> {
    if !(group.is_empty() || group == ROUTE_GROUP) {
        return None;
    }
    match kind {
        "HTTPRoute" => Some(RouteKind::Http),
        "GRPCRoute" => Some(RouteKind::Grpc),
        _ => None,
    }
}

/// Whether `p`'s targets could reach a route of `kind` in `namespace`
/// named `name`, whatever its labels and rules: a targetRef naming it, or
/// a selector of its kind in its namespace. Only for such a policy can a
/// route added or removed change what attaching makes
/// (`incremental/standing_policies.rs`).
pub fn may_reach(p: &Compiled<'_>, kind: RouteKind, namespace: &str, name: &str) -> bool {
    let spec = &p.policy.object.spec;
    p.namespace == namespace
        && (spec
            .target_refs
            .iter()
            .any(|t| route_kind(&t.group, &t.kind) == Some(kind) && t.name == name)
            || spec
                .target_selectors
                .iter()
                .any(|s| route_kind(&s.group, &s.kind) == Some(kind)))
}

/// The routes of `kind` in `namespace` named `name` (all of them when
/// `name` is `None`): a range of `routes`, which the pipeline sorts by
/// (kind, namespace, name). A scan of every route per target made each
/// translation cost routes × policies (at 10,000 routes, 300 policies
/// added 13 ms to every edit, whichever object it touched).
fn range_of(
    routes: &[Route<'_>],
    kind: RouteKind,
    namespace: &str,
    name: Option<&str>,
) -> std::ops::Range<usize> {
    let start = routes.partition_point(|r| match name {
        Some(name) => (r.kind, r.namespace, r.name) < (kind, namespace, name),
        None => (r.kind, r.namespace) < (kind, namespace),
    });
    let len = routes[start..].partition_point(|r| {
        r.kind == kind && r.namespace == namespace && name.is_none_or(|name| r.name == name)
    });
    start..start + len
}

/// Resolves targets (recording target problems on the policies) and merges.
pub fn attach(policies: &mut [Compiled<'_>], routes: &[Route<'_>]) -> Attachment {
    // (route, rule) → [(precedence, policy index)]
    // Per route, sized on its first policy (an empty `Vec` allocates nothing).
    let mut reach: Vec<Vec<Vec<(u8, usize)>>> = vec![Vec::new(); routes.len()];
    let mut reached = vec![BTreeSet::new(); policies.len()];
    debug_assert!(
        routes.is_sorted_by_key(|r| (r.kind, r.namespace, r.name)),
        "routes come sorted by (kind, namespace, name)"
    );
    for (pi, p) in policies.iter_mut().enumerate() {
        let spec = &p.policy.object.spec;
        for (ti, t) in spec.target_refs.iter().enumerate() {
            let field = format!("spec.targetRefs[{ti}]");
            if super::scope::is_scope_kind(&t.group, &t.kind) {
                continue; // `scope` resolves Gateway, ListenerSet and listener targets.
            }
            let Some(kind) = route_kind(&t.group, &t.kind) else {
                p.errors.push(PolicyError::structural(
                    field,
                    format!(
                        "kind {}/{} cannot be targeted (Gateway, ListenerSet, HTTPRoute or GRPCRoute)",
                        t.group, t.kind
                    ),
                ));
                continue;
            };
            if let Some(ns) = t.namespace.as_deref().filter(|ns| *ns != p.namespace) {
                p.errors.push(PolicyError::semantic(
                    format!("{field}.namespace"),
                    format!(
                        "{} {ns}/{} is in another namespace; a policy targets only objects in its own namespace ({})",
                        kind.kind(),
                        t.name,
                        p.namespace
                    ),
                ));
                continue;
            }
            // The first of that name, if the inputs hold it twice.
            let named = range_of(routes, kind, &p.namespace, Some(&t.name));
            let found = (!named.is_empty()).then_some(named.start);
            let Some(ri) = found else {
                p.warnings.push(PolicyError::referential(
                    field,
                    format!("{} {}/{} not found", kind.kind(), p.namespace, t.name),
                ));
                continue;
            };
            match &t.section_name {
                None => {
                    for rule in rules_of(&mut reach, routes, ri) {
                        rule.push((1, pi));
                    }
                    reached[pi].insert(ri);
                }
                Some(section) => match (0..routes[ri].rule_count())
                    .position(|i| routes[ri].rule_name(i) == Some(section.as_str()))
                {
                    Some(rule) => {
                        rules_of(&mut reach, routes, ri)[rule].push((0, pi));
                        reached[pi].insert(ri);
                    }
                    None => p.warnings.push(PolicyError::referential(
                        format!("{field}.sectionName"),
                        format!(
                            "{} {}/{} has no rule named {section:?}",
                            kind.kind(),
                            p.namespace,
                            t.name
                        ),
                    )),
                },
            }
        }
        for (si, s) in spec.target_selectors.iter().enumerate() {
            if super::scope::is_scope_kind(&s.group, &s.kind) {
                continue;
            }
            let Some(kind) = route_kind(&s.group, &s.kind) else {
                p.errors.push(PolicyError::structural(
                    format!("spec.targetSelectors[{si}]"),
                    format!(
                        "kind {}/{} cannot be selected (Gateway, ListenerSet, HTTPRoute or GRPCRoute)",
                        s.group, s.kind
                    ),
                ));
                continue;
            };
            let mut any = false;
            for ri in range_of(routes, kind, &p.namespace, None) {
                let labels = routes[ri].labels;
                if s.match_labels
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
                {
                    for rule in rules_of(&mut reach, routes, ri) {
                        rule.push((2, pi));
                    }
                    reached[pi].insert(ri);
                    any = true;
                }
            }
            if !any {
                p.warnings.push(PolicyError::referential(
                    format!("spec.targetSelectors[{si}]"),
                    format!("selects no {} in namespace {}", kind.kind(), p.namespace),
                ));
            }
        }
        if spec.target_refs.is_empty() && spec.target_selectors.is_empty() {
            p.errors.push(PolicyError::structural(
                "spec.targetRefs",
                "a policy needs at least one targetRef or targetSelector",
            ));
        }
        p.errors.sort();
        p.errors.dedup();
    }

    let mut conflicts: Vec<BTreeSet<PolicyError>> = vec![BTreeSet::new(); policies.len()];
    let effective = reach
        .into_iter()
        .enumerate()
        .map(|(ri, rules)| {
            rules
                .into_iter()
                .enumerate()
                .map(|(rule_index, mut by)| {
                    if by.is_empty() {
                        return None;
                    }
                    by.sort_by(|a, b| {
                        let key = |(prec, pi): &(u8, usize)| {
                            let m = &policies[*pi].policy.object.metadata;
                            (
                                *prec,
                                m.creation_timestamp.is_none(),
                                m.creation_timestamp.as_ref().map(|t| t.0),
                                *pi,
                            )
                        };
                        key(a).cmp(&key(b))
                    });
                    by.dedup_by_key(|(_, pi)| *pi);
                    Some(Box::new(merge(
                        policies,
                        &by,
                        &routes[ri],
                        rule_index,
                        &mut conflicts,
                    )))
                })
                .collect()
        })
        .collect();
    for (p, c) in policies.iter_mut().zip(conflicts) {
        p.warnings.extend(c);
        p.warnings.sort();
        p.warnings.dedup();
    }
    Attachment { effective, reached }
}

/// Route `ri`'s per-rule entries of `reach`, sized to its rules.
fn rules_of<'v>(
    reach: &'v mut [Vec<Vec<(u8, usize)>>],
    routes: &[Route<'_>],
    ri: usize,
) -> &'v mut [Vec<(u8, usize)>] {
    let rules = &mut reach[ri];
    if rules.is_empty() {
        rules.resize(routes[ri].rule_count(), Vec::new());
    }
    rules
}

fn merge(
    policies: &[Compiled<'_>],
    order: &[(u8, usize)],
    route: &Route<'_>,
    rule_index: usize,
    conflicts: &mut [BTreeSet<PolicyError>],
) -> Effective {
    let mut e = Effective::default();
    let field = format!("spec.rules[{rule_index}]");
    for &(prec, pi) in order {
        let p = &policies[pi];
        if let Some(first) = p.errors.first() {
            e.errors.push(RuleError {
                field: field.clone(),
                message: format!("{} is invalid: {first}", p.display()),
                class: first.class,
            });
            continue;
        }
        for (fi, set) in p.features.set().iter().enumerate() {
            if !set {
                continue;
            }
            match &e.sources[fi] {
                None => {
                    e.features.take_from(&p.features, fi);
                    e.sources[fi] = Some(p.display());
                    e.levels[fi] = prec;
                }
                Some(winner) => {
                    conflicts[pi].insert(PolicyError::semantic(
                        format!("spec.{}", FEATURES[fi]),
                        format!(
                            "overridden on {} by {winner}, which takes precedence",
                            route.display()
                        ),
                    ));
                }
            }
        }
    }
    if let Some(ext_auth::Use::Unavailable { message, class }) = &e.features.ext_auth {
        e.errors.push(RuleError {
            field,
            message: format!(
                "extAuth from {}: {message}",
                e.sources[super::EXT_AUTH].as_deref().unwrap_or(KIND)
            ),
            class: *class,
        });
    }
    e
}
