//! Policy status (GEP-713 ancestor status): one `status.ancestors` entry per
//! Gateway that a targeted route is attached to (or that is targeted, or
//! ListenerSet that is targeted), each with `Accepted`:
//! `False`/`Invalid` listing the errors, `True`/`PartiallyValid` listing the
//! warnings, or `True`/`Accepted`. GatewayExtensions get a plain
//! `Accepted` condition.

use std::collections::BTreeSet;

use super::{Compiled, PolicyError, ext_auth};
use crate::status::{ParentReference, PolicyAncestorStatus, Stamp, StatusBody, reason};

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
/// it is attached to. Typed (built on every call for every policy; as
/// JSON it cost ~5 µs a policy) and timed when written, as other statuses.
pub fn traffic_policy(
    p: &Compiled<'_>,
    ancestors: &BTreeSet<super::scope::Ancestor>,
    controller: &str,
) -> StatusBody {
    let stamp = Stamp {
        generation: p.policy.object.metadata.generation.unwrap_or(1),
    };
    let condition = accepted(&stamp, &p.errors, &p.warnings);
    let ancestors = ancestors
        .iter()
        .map(|a| PolicyAncestorStatus {
            ancestor_ref: ParentReference {
                group: "gateway.networking.k8s.io".into(),
                kind: a.kind.into(),
                namespace: a.namespace.clone(),
                name: a.name.clone(),
                section_name: None,
                port: None,
            },
            controller_name: controller.into(),
            conditions: vec![condition.clone()],
        })
        .collect();
    StatusBody::Policy { ancestors }
}

/// `status` of one GatewayExtension.
pub fn gateway_extension(p: &ext_auth::Provider, generation: i64) -> StatusBody {
    let stamp = Stamp { generation };
    let errors: Vec<PolicyError> = p.built.as_ref().err().cloned().into_iter().collect();
    StatusBody::Conditions {
        conditions: vec![accepted(&stamp, &errors, &[])],
    }
}
