//! `rbac` → Envoy's RBAC filter, per route. The expressions are OR-ed into
//! the condition of one policy (one map entry keeps the output
//! deterministic): `Allow` lets a request through only when one matches,
//! `Deny` refuses it (403) when one matches.

use api::policy::{Rbac, RbacAction};
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, Rbac as Rules, permission, principal, rbac,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::{Rbac as RbacFilter, RbacPerRoute};
use envoy_types::pb::google::api::expr::v1alpha1::{Expr, expr};

use super::{PolicyError, cel};

pub const POLICY_NAME: &str = "trafficpolicy";

pub fn compile(r: &Rbac, field: &str) -> Result<RbacPerRoute, PolicyError> {
    if r.match_expressions.is_empty() {
        return Err(PolicyError::structural(
            format!("{field}.matchExpressions"),
            "at least one expression is required",
        ));
    }
    let mut condition: Option<Expr> = None;
    let mut next_id = 0;
    for (i, text) in r.match_expressions.iter().enumerate() {
        let mut e = cel::parse(text)
            .map_err(|e| PolicyError::structural(format!("{field}.matchExpressions[{i}]"), e.to_string()))?;
        // Ids must be unique across the combined expression.
        renumber(&mut e, &mut next_id);
        condition = Some(match condition {
            None => e,
            Some(prev) => {
                next_id += 1;
                Expr {
                    id: next_id,
                    expr_kind: Some(expr::ExprKind::CallExpr(Box::new(expr::Call {
                        target: None,
                        function: "_||_".into(),
                        args: vec![prev, e],
                    }))),
                }
            }
        });
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

fn renumber(e: &mut Expr, next: &mut i64) {
    *next += 1;
    e.id = *next;
    match e.expr_kind.as_mut() {
        Some(expr::ExprKind::SelectExpr(s)) => {
            if let Some(o) = s.operand.as_mut() {
                renumber(o, next);
            }
        }
        Some(expr::ExprKind::CallExpr(c)) => {
            if let Some(t) = c.target.as_mut() {
                renumber(t, next);
            }
            for a in &mut c.args {
                renumber(a, next);
            }
        }
        Some(expr::ExprKind::ListExpr(l)) => {
            for a in &mut l.elements {
                renumber(a, next);
            }
        }
        Some(expr::ExprKind::StructExpr(s)) => {
            for entry in &mut s.entries {
                *next += 1;
                entry.id = *next;
                if let Some(expr::create_struct::entry::KeyKind::MapKey(k)) = entry.key_kind.as_mut() {
                    renumber(k, next);
                }
                if let Some(v) = entry.value.as_mut() {
                    renumber(v, next);
                }
            }
        }
        _ => {}
    }
}
