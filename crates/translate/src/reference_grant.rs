//! ReferenceGrant: whether an object may reference one in another namespace.

use crate::index::Index;

/// The referencing side of a cross-namespace reference.
pub struct From<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
}

/// The referenced object.
pub struct To<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Same-namespace references are always allowed; others need a
/// ReferenceGrant in the target's namespace naming both sides.
pub fn permitted(index: &Index<'_>, from: &From<'_>, to: &To<'_>) -> bool {
    if from.namespace == to.namespace {
        return true;
    }
    index.reference_grants_in(to.namespace).any(|grant| {
        grant
            .spec
            .from
            .iter()
            .any(|f| f.group == from.group && f.kind == from.kind && f.namespace == from.namespace)
            && grant.spec.to.iter().any(|t| {
                t.group == to.group && t.kind == to.kind && t.name.as_deref().is_none_or(|n| n == to.name)
            })
    })
}
