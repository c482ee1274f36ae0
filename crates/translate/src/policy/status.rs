//! Policy status (GEP-713 ancestor status): one `status.ancestors` entry per
//! Gateway that a targeted route is attached to (or that is targeted, or
//! ListenerSet that is targeted), each with `Accepted`:
//! `False`/`Invalid` listing the errors, `True`/`PartiallyValid` listing the
//! warnings, or `True`/`Accepted`. GatewayExtensions get a plain
//! `Accepted` condition.

use std::collections::BTreeSet;

use serde_json::json;

use super::{Compiled, PolicyError, ext_auth};
use crate::status::{Stamp, Timed, reason};

pub const PARTIALLY_VALID: &str = "PartiallyValid";

/// The Accepted condition and the failure reason it carries, if any.
pub fn accepted(stamp: &Stamp, errors: &[PolicyError], warnings: &[PolicyError]) -> crate::status::Condition {
    let join = |v: &[PolicyError]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    if !errors.is_empty() {
        stamp.condition("Accepted", false, reason::INVALID, join(errors))
    } else if !warnings.is_empty() {
        stamp.condition("Accepted", true, PARTIALLY_VALID, join(warnings))
    } else {
        stamp.condition("Accepted", true, reason::ACCEPTED, "Policy accepted")
    }
}

/// `status` of one TrafficPolicy: one entry per Gateway or ListenerSet
/// it is attached to.
pub fn traffic_policy(
    p: &Compiled<'_>,
    ancestors: &BTreeSet<super::scope::Ancestor>,
    controller: &str,
    time: &str,
) -> serde_json::Value {
    let stamp = Stamp {
        generation: p.policy.object.metadata.generation.unwrap_or(1),
    };
    // Policy statuses are built whole on every call (JSON), so their
    // conditions carry the call's time here.
    let condition = Timed::new(&accepted(&stamp, &p.errors, &p.warnings), time).to_json();
    let ancestors: Vec<_> = ancestors
        .iter()
        .map(|a| {
            json!({
                "ancestorRef": {
                    "group": "gateway.networking.k8s.io",
                    "kind": a.kind,
                    "namespace": a.namespace,
                    "name": a.name,
                },
                "controllerName": controller,
                "conditions": [condition],
            })
        })
        .collect();
    json!({ "ancestors": ancestors })
}

/// `status` of one GatewayExtension.
pub fn gateway_extension(p: &ext_auth::Provider, generation: i64, time: &str) -> serde_json::Value {
    let stamp = Stamp { generation };
    let errors: Vec<PolicyError> = p.built.as_ref().err().cloned().into_iter().collect();
    json!({ "conditions": [Timed::new(&accepted(&stamp, &errors, &[]), time).to_json()] })
}
