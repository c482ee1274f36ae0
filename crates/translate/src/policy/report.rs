//! What every TrafficPolicy and GatewayExtension reports: status (with
//! the ancestor Gateways its targets are attached to), diagnostics, and the
//! failure records behind `policy_validation_failures_total`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::Diagnostic;

use super::scope::Ancestor;
use crate::binding::ParentBinding;
use crate::gateway::GatewayState;
use crate::route::model::Route;
use crate::{ObjectStatus, Output, PolicyFailure, Settings};

/// What one TrafficPolicy reports, with what it was made from besides
/// the policy itself: its errors and warnings, and its ancestors. Kept by
/// the incremental translator, which offers it back when the policies and
/// the routes' heads are unchanged (`incremental/standing_policies.rs`): then it
/// is reused if these are equal, and made again otherwise.
#[derive(Clone, Debug)]
pub struct PolicyReport {
    errors: Vec<super::PolicyError>,
    warnings: Vec<super::PolicyError>,
    ancestors: BTreeSet<Ancestor>,
    diagnostics: Vec<Diagnostic>,
    failures: Vec<PolicyFailure>,
    status: Arc<ObjectStatus>,
}

impl PolicyReport {
    fn emit(&self, out: &mut Output) {
        out.diagnostics.extend(self.diagnostics.iter().cloned());
        out.policy_failures.extend(self.failures.iter().cloned());
        out.status.push(self.status.clone());
    }
}

/// Status, diagnostics and failure records of every TrafficPolicy and
/// GatewayExtension; returns the TrafficPolicies' reports (in policy
/// order) for the next call. `prior`: last call's reports, one per policy
/// in the same order, when the policies and their attachment are last
/// call's (else empty); a policy's is reused when its errors, warnings
/// and ancestors are equal to those it was made from (the rest it reads —
/// the policy, its source and generation, the names of the routes it
/// reaches, the controller name — is then the same).
#[allow(clippy::too_many_arguments)]
pub fn report(
    policies: &[super::Compiled<'_>],
    attachment: &super::attach::Attachment,
    scopes: &super::scope::Scopes,
    providers: &BTreeMap<(String, String), super::ext_auth::Provider>,
    routes: &[Route<'_>],
    bindings: &[std::sync::Arc<Vec<ParentBinding>>],
    gateways: &[GatewayState<'_>],
    settings: &Settings,
    prior: Vec<PolicyReport>,
    out: &mut Output,
) -> Vec<PolicyReport> {
    debug_assert!(prior.is_empty() || prior.len() == policies.len());
    let mut prior = prior.into_iter();
    let mut reports = Vec::with_capacity(policies.len());
    for (pi, (p, reached)) in policies.iter().zip(&attachment.reached).enumerate() {
        // Gateways and ListenerSets it targets directly, and the Gateways its
        // routes attach to.
        let mut ancestors: BTreeSet<Ancestor> = scopes.reached.get(pi).cloned().unwrap_or_default();
        for &ri in reached {
            for b in bindings[ri].iter() {
                if !b.attachments.is_empty() {
                    ancestors.insert(Ancestor::gateway(&gateways[b.gateway]));
                }
            }
        }
        let r = match prior.next() {
            Some(r) if r.errors == p.errors && r.warnings == p.warnings && r.ancestors == ancestors => r,
            _ => report_one(p, ancestors, reached, routes, settings),
        };
        r.emit(out);
        reports.push(r);
    }
    for p in providers.values() {
        if let Err(err) = &p.built {
            if !p.loader_reported {
                let object = Some(format!("{} {}/{}", super::ext_auth::KIND, p.namespace, p.name));
                out.diagnostics.push(Diagnostic::error(
                    object,
                    Some(&p.source),
                    format!("{err} [{}]", err.class),
                ));
            }
            out.policy_failures.push(crate::PolicyFailure {
                policy_kind: super::ext_auth::KIND.into(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                reason: crate::status::reason::INVALID.into(),
                class: err.class,
                message: err.to_string(),
            });
        }
        out.push_status(crate::ObjectStatus::new(
            super::API_VERSION,
            super::ext_auth::KIND,
            Some(&p.namespace),
            &p.name,
            super::status::gateway_extension(p, p.generation),
        ));
    }
    reports
}

/// One TrafficPolicy's report (`ancestors` as [`report`] finds them).
fn report_one(
    p: &super::Compiled<'_>,
    ancestors: BTreeSet<Ancestor>,
    reached: &BTreeSet<usize>,
    routes: &[Route<'_>],
    settings: &Settings,
) -> PolicyReport {
    let mut diagnostics = Vec::new();
    let mut failures = Vec::new();
    let object = Some(p.display());
    let source = Some(&p.policy.source);
    let (reason, list) = if p.errors.is_empty() {
        (super::status::PARTIALLY_VALID, &p.warnings)
    } else {
        (crate::status::reason::INVALID, &p.errors)
    };
    // The loader has reported a spec it could not read, at its field.
    let loaded: Vec<super::PolicyError> = p
        .policy
        .object
        .load_errors
        .iter()
        .map(|e| super::load_error(e))
        .collect();
    for e in p.errors.iter().filter(|e| !loaded.contains(e)) {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            source,
            format!("{e} [{}]", e.class),
        ));
    }
    for w in &p.warnings {
        diagnostics.push(Diagnostic::warning(
            object.clone(),
            source,
            format!("{w} [{}]", w.class),
        ));
    }
    for e in list {
        failures.push(PolicyFailure {
            policy_kind: super::KIND.into(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            reason: reason.into(),
            class: e.class,
            message: e.to_string(),
        });
    }
    if ancestors.is_empty() && !reached.is_empty() {
        let names: Vec<String> = reached.iter().map(|&ri| routes[ri].display()).collect();
        diagnostics.push(Diagnostic::warning(
            object.clone(),
            source,
            format!(
                "its targets ({}) are not attached to any Gateway",
                names.join(", ")
            ),
        ));
    }
    let status = Arc::new(ObjectStatus::new(
        super::API_VERSION,
        super::KIND,
        Some(&p.namespace),
        &p.name,
        super::status::traffic_policy(p, &ancestors, &settings.controller_name),
    ));
    PolicyReport {
        errors: p.errors.clone(),
        warnings: p.warnings.clone(),
        ancestors,
        diagnostics,
        failures,
        status,
    }
}
