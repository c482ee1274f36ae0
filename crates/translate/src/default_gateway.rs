//! Default Gateways (GEP-3793): where a route that asks for a default
//! Gateway is claimed.
//!
//! - A Gateway with `spec.defaultScope: All` is a default Gateway; there may
//!   be several (an operator swaps the default with no downtime by adding
//!   the new one before removing the old), and every one of them claims.
//! - A route with `spec.useDefaultGateways: All` is claimed by every default
//!   Gateway of ours (GatewayClass accepted). `None`, unset, or no default
//!   Gateway at all: nothing happens.
//! - A claim is an extra parent of the route *in the model only*
//!   (`ParentRef::by_default`, no sectionName, no port): `spec.parentRefs`
//!   is never changed, the claim shows only as its own `status.parents`
//!   entry. From there the normal rules decide (`binding`): the Gateway's
//!   `allowedRoutes` (without a permissive one, only routes of its own
//!   namespace), route kinds, hostname intersection. An accepted claim says
//!   `Route is bound to default Gateway`; a refused one gives the usual
//!   reason.
//! - Explicit parentRefs still bind as well. When one already names a
//!   default Gateway, the explicit reference is the route's one entry for
//!   that Gateway (no second, default, entry).
//! - `defaultScope` changes nothing about listeners or merging.
//! - Translation is a function of its inputs: a Gateway deleted or no longer
//!   default simply stops claiming, and its status entries disappear.

use api::gateway_api::experimental::gateways::GatewayDefaultScope;

use crate::gateway::GatewayState;
use crate::route::model::{ParentRef, Route};
use crate::status::{Condition, Stamp};

pub const BOUND_MESSAGE: &str = "Route is bound to default Gateway";
pub const CONDITION: &str = "DefaultGateway";
pub const CONDITION_MESSAGE: &str = "Gateway has default scope All";

/// Is this Gateway a default Gateway?
pub fn is_default(gw: &GatewayState<'_>) -> bool {
    matches!(
        gw.gateway.object.spec.default_scope,
        Some(GatewayDefaultScope::All)
    )
}

/// `DefaultGateway=True` for a default Gateway; nothing otherwise (the GEP
/// has no `False` form).
pub fn condition(gw: &GatewayState<'_>, stamp: &Stamp) -> Option<Condition> {
    is_default(gw).then(|| stamp.condition(CONDITION, true, CONDITION, CONDITION_MESSAGE))
}

/// Does `p` (as written in `route`) name the Gateway `gw`?
fn names(p: &ParentRef, route_ns: &str, gw: &GatewayState<'_>) -> bool {
    p.group == "gateway.networking.k8s.io"
        && p.kind == "Gateway"
        && p.name == gw.name
        && p.namespace.as_deref().unwrap_or(route_ns) == gw.namespace
}

/// Adds the default Gateways' claims to every route asking for one.
pub fn claim(routes: &mut [Route<'_>], gateways: &[GatewayState<'_>]) {
    let defaults: Vec<&GatewayState<'_>> = gateways
        .iter()
        .filter(|g| g.class_accepted && is_default(g))
        .collect();
    if defaults.is_empty() {
        return;
    }
    for route in routes.iter_mut().filter(|r| r.use_default_gateways) {
        for gw in &defaults {
            if route.parent_refs().iter().any(|p| names(p, route.namespace, gw)) {
                continue;
            }
            route.claim(ParentRef {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: Some(gw.namespace.clone().into()),
                name: gw.name.clone().into(),
                section_name: None,
                port: None,
                by_default: true,
            });
        }
    }
}
