//! ReferenceGrant edits: which routes they rebuild, and when they rebuild
//! all.
//!
//! A ReferenceGrant is read only through `Index::reference_grants_in`
//! (`reference_grant::permitted`, asked for every cross-namespace
//! reference: a route's backends, a listener's certificates), which notes
//! the namespace it looked into as a Service lookup is noted
//! (`crate::service_reads`, key `grants_key`): per route, in the reads of
//! its works and report kept in its slot; else unscoped (today the
//! listeners' certificateRefs), kept by the translator as a union since
//! its last full translation.
//!
//! So an edit whose context changed in ReferenceGrants alone (with routes,
//! Services, EndpointSlices, Secrets, policies, Gateways as their own
//! rules say) rebuilds, as if edited, the routes that looked into the
//! namespace of a changed grant (before or after the edit: a grant's
//! namespace is part of its key) and reuses every other; a changed
//! namespace looked into unscoped makes a full translation. Sound because
//! the lookup is noted whether it finds a grant or not, and a route that
//! looked into no changed namespace finds the same grants again.

use api::Sourced;
use api::gateway_api::experimental::referencegrants::ReferenceGrant;

use crate::service_reads::{self, Reads};

/// The grants keys of the namespaces holding a ReferenceGrant that differs
/// between `before` and `after` (object or unreadable values; not a source
/// alone, which the index does not keep).
pub(crate) fn changed(before: &[Sourced<ReferenceGrant>], after: &[Sourced<ReferenceGrant>]) -> Reads {
    let mut keys = Vec::new();
    super::each_changed(before, after, Sourced::same, |g| {
        let ns = g.object.metadata.namespace.as_deref().unwrap_or("default");
        keys.push(service_reads::grants_key(ns));
    });
    Reads::of(keys)
}

/// Withdraws the slots of the routes that looked into a changed namespace:
/// they are rebuilt as if edited.
pub(crate) fn rebuild_readers(changed: &Reads, prior: &mut [Option<super::Slot>]) {
    for slot in prior.iter_mut() {
        if slot.as_ref().is_some_and(|s| s.service_reads.touches(changed)) {
            *slot = None;
        }
    }
}
