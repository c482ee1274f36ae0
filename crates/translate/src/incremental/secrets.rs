//! Secret edits: whether they rebuild anything.
//!
//! Every Secret lookup goes through `Index::secret`, which notes its key
//! (found or not) for the whole call, never per route: listeners' and
//! HTTPProxy roots' certificates are read outside the routes. The
//! translator keeps the union of those keys over the calls since its last
//! full translation (a Gateway or an HTTPProxy tree reused from an earlier
//! call does not look its Secrets up again). An edit whose context changed
//! in Secrets alone, none of them looked up — a certificate rotated that
//! no listener or root names, as cert-manager rotates every certificate of
//! a cluster — reuses everything as a route edit that touched nothing;
//! one that was looked up makes a full translation. Sound because nothing
//! else reads a Secret (the index's map is reachable only through
//! `Index::secret`) and the translation is deterministic: no lookup of a
//! changed Secret, no difference.

use api::Sourced;
use api::k8s_openapi::api::core::v1::Secret;

use crate::service_reads::Reads;

/// The keys of the Secrets that differ between `before` and `after`
/// (object or unreadable values; not a source alone, which the index does
/// not keep).
pub(crate) fn changed(before: &[Sourced<Secret>], after: &[Sourced<Secret>]) -> Reads {
    super::changed_keys(before, after, |s| &s.metadata, |_, _| {})
}

/// Whether a `changed` Secret was looked up since the last full
/// translation (`looked_up`): then everything is rebuilt, else nothing.
pub(crate) fn forces_full(changed: &Reads, looked_up: &Reads) -> bool {
    looked_up.touches(changed)
}
