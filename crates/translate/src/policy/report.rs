//! What every TrafficPolicy and GatewayExtension reports: status (with
//! the ancestor Gateways its targets are attached to), diagnostics, and the
//! failure records behind `policy_validation_failures_total`.

use std::collections::{BTreeMap, BTreeSet};

use api::Diagnostic;

use crate::binding::ParentBinding;
use crate::gateway::GatewayState;
use crate::route::model::Route;
use crate::{Output, Settings};

/// Status, diagnostics and failure records of every TrafficPolicy and
/// GatewayExtension.
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
    out: &mut Output,
) {
    for (pi, (p, reached)) in policies.iter().zip(&attachment.reached).enumerate() {
        // Gateways and ListenerSets it targets directly, and the Gateways its
        // routes attach to.
        let mut ancestors: BTreeSet<super::scope::Ancestor> =
            scopes.reached.get(pi).cloned().unwrap_or_default();
        for &ri in reached {
            for b in bindings[ri].iter() {
                if !b.attachments.is_empty() {
                    ancestors.insert(super::scope::Ancestor::gateway(&gateways[b.gateway]));
                }
            }
        }
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
            out.diagnostics.push(Diagnostic::error(
                object.clone(),
                source,
                format!("{e} [{}]", e.class),
            ));
        }
        for w in &p.warnings {
            out.diagnostics.push(Diagnostic::warning(
                object.clone(),
                source,
                format!("{w} [{}]", w.class),
            ));
        }
        for e in list {
            out.policy_failures.push(crate::PolicyFailure {
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
            out.diagnostics.push(Diagnostic::warning(
                object.clone(),
                source,
                format!(
                    "its targets ({}) are not attached to any Gateway",
                    names.join(", ")
                ),
            ));
        }
        out.push_status(crate::ObjectStatus::new(
            super::API_VERSION,
            super::KIND,
            Some(&p.namespace),
            &p.name,
            super::status::traffic_policy(p, &ancestors, &settings.controller_name),
        ));
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
}
