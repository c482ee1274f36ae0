//! TrafficPolicy edits: which routes and Gateways they rebuild.
//!
//! Policies reach what the memo keeps in two ways only, both computed on
//! every call from all policies (`policy::attach`, `policy::scope`):
//! - per route, its *effective* policy per rule (`attach.effective`), the
//!   only policy a route's works read of route-level policies;
//! - per Gateway, its scopes (Gateway and listener policies:
//!   `policy::scope::GatewayScopes`), read by the works of the routes bound
//!   to it (what a fenced route switches off) and by its assembly
//!   (projection onto route configurations and virtual hosts).
//!
//! A GatewayExtension edit is judged the same way (`mod.rs`): a provider
//! reaches a route only through its effective policies (`ext_auth::Use`),
//! and every Gateway is assembled from nothing besides, since an assembly
//! installs the providers' filter configs.
//!
//! So when TrafficPolicies changed and nothing else of the context did, a
//! route's works are reused only if its effective policies are equal to
//! those it was built with (kept in its slot) and the scopes of every
//! Gateway it binds to are equal to last call's; a Gateway whose scopes
//! changed is assembled again from nothing (no whole reuse, no splicing:
//! its virtual hosts' bytes carry its scopes). Everything else a policy
//! edit changes (policy status, attachments, scoped policies in force) is
//! made again (`standing_policies` reuses them only when no policy
//! changed). Sound because a route's works are a function of
//! its object, its bindings, its effective policies, its Gateways' scopes
//! and the rest of the context (unchanged), and a Gateway's assembly of
//! its works, its scopes and the context.

use std::sync::Arc;

use crate::binding::ParentBinding;
use crate::policy::Effective;
use crate::policy::scope::GatewayScopes;

use super::RouteMemo;

/// A route's effective policies, per rule (empty: none reaches it), as
/// `policy::attach` gives them.
pub(crate) type RoutePolicies = Vec<Option<Box<Effective>>>;

/// The same, as a slot keeps them (boxed: slots are moved every call,
/// and most routes have none, which allocates nothing).
pub(crate) type KeptPolicies = Box<[Option<Box<Effective>>]>;

/// Drops the offered slots whose works read a policy that changed (see the
/// module doc), when policies changed; notes which Gateways' scopes did for
/// [`super::Gateways`]; keeps this call's scopes for the next.
pub(crate) fn judge(
    memo: &mut RouteMemo,
    effective: &[RoutePolicies],
    scopes: &[GatewayScopes],
    bindings: &[Arc<Vec<ParentBinding>>],
) {
    let prior = std::mem::take(&mut memo.prior_scopes);
    if memo.policies_changed {
        let changed: Vec<bool> = scopes
            .iter()
            .enumerate()
            .map(|(gi, s)| prior.get(gi) != Some(s))
            .collect();
        for (ri, bs) in bindings.iter().enumerate() {
            let now = effective.get(ri).map_or(&[][..], Vec::as_slice);
            let stale = memo.prior_mut(ri).is_some_and(|slot| {
                *slot.policies != *now || bs.iter().any(|b| changed.get(b.gateway).copied().unwrap_or(true))
            });
            if stale {
                memo.drop_offered(ri);
            }
        }
        memo.scopes_changed = changed;
    }
    memo.next_scopes = scopes.to_vec();
}
