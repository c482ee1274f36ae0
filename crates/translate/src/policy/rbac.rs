//! `rbac` → Envoy's RBAC filter, per route. The expressions are OR-ed into
//! the condition of one policy (one map entry keeps the output
//! deterministic): `Allow` lets a request through only when one matches,
//! `Deny` refuses it (403) when one matches.

use api::policy::{Rbac, RbacAction};
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, Rbac as Rules, permission, principal, rbac,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::{Rbac as RbacFilter, RbacPerRoute};

use super::PolicyError;
use crate::envoy::cel;

pub const POLICY_NAME: &str = "trafficpolicy";

pub fn compile(r: &Rbac, field: &str) -> Result<RbacPerRoute, PolicyError> {
    if r.match_expressions.is_empty() {
        return Err(PolicyError::structural(
            format!("{field}.matchExpressions"),
            "at least one expression is required",
        ));
    }
    let mut parsed = Vec::with_capacity(r.match_expressions.len());
    for (i, text) in r.match_expressions.iter().enumerate() {
        parsed.push(
            cel::parse(text).map_err(|e| {
                PolicyError::structural(format!("{field}.matchExpressions[{i}]"), e.to_string())
            })?,
        );
    }
    // OR-ed as a balanced tree; the combination must still fit Envoy's
    // nesting limit.
    // Ids are renumbered below, across the combined expression.
    let mut condition = cel::balanced("_||_", parsed, &mut 0);
    if let Some(c) = condition.as_mut() {
        if cel::depth(c) > cel::MAX_DEPTH {
            return Err(PolicyError::structural(
                format!("{field}.matchExpressions"),
                format!(
                    "the expressions OR-ed together nest more than {} levels deep",
                    cel::MAX_DEPTH
                ),
            ));
        }
        // Ids must be unique across the combined expression.
        cel::renumber(c, &mut 0);
    }
    let action = match r.action {
        RbacAction::Allow => rbac::Action::Allow,
        RbacAction::Deny => rbac::Action::Deny,
    };
    let policy = Policy {
        permissions: vec![Permission {
            rule: Some(permission::Rule::Any(true)),
        }],
        principals: vec![Principal {
            identifier: Some(principal::Identifier::Any(true)),
        }],
        condition,
        ..Default::default()
    };
    Ok(RbacPerRoute {
        rbac: Some(RbacFilter {
            rules: Some(Rules {
                action: action as i32,
                policies: [(POLICY_NAME.to_string(), policy)].into_iter().collect(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    })
}
