//! Namespace edits: which routes and ListenerSets they rebuild.
//!
//! A Namespace is read only as its labels (`Index::labels_of_namespace`),
//! and only for the namespace of the object asking:
//! - a route's binding, where a listener's `allowedRoutes.namespaces.from:
//!   Selector` is matched against the route's own namespace
//!   (`binding.rs`);
//! - a ListenerSet's admission, where its Gateway's
//!   `allowedListeners.namespaces.from: Selector` is matched against the
//!   ListenerSet's own namespace (`listener_set.rs`).
//!
//! So an edit of Namespaces changes only the namespaces whose labels, as
//! the index makes them (`index::namespace_labels`), differ: a Namespace
//! added without labels, or one whose other fields changed, changes
//! nothing. The routes in a relabelled namespace are rebuilt as if
//! edited; the ListenerSets in one count as edited in place, that is as
//! an edit of their parent Gateways (`gateway_edits.rs`).

use std::collections::HashSet;

use api::Sourced;
use api::k8s_openapi::api::core::v1::Namespace;

use crate::index::{labels_in, namespace_labels};
use crate::route::model::namespace_name;

/// The namespaces whose labels differ between `before` and `after`.
pub(crate) fn relabelled(before: &[Sourced<Namespace>], after: &[Sourced<Namespace>]) -> HashSet<String> {
    let (a, b) = (namespace_labels(before), namespace_labels(after));
    a.keys()
        .chain(b.keys())
        .filter(|ns| labels_in(&a, ns) != labels_in(&b, ns))
        .cloned()
        .collect()
}

/// Withdraws the slots (input positions of `inputs`) of the routes in a
/// relabelled namespace: they are rebuilt as if edited.
pub(crate) fn rebuild_routes(
    relabelled: &HashSet<String>,
    inputs: &api::Inputs,
    prior: &mut [Option<super::Slot>],
) {
    if relabelled.is_empty() {
        return;
    }
    let http = inputs
        .http_routes
        .iter()
        .map(|r| namespace_name(&r.object.metadata).0);
    let grpc = inputs
        .grpc_routes
        .iter()
        .map(|r| namespace_name(&r.object.metadata).0);
    for (slot, ns) in prior.iter_mut().zip(http.chain(grpc)) {
        if relabelled.contains(ns) {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use api::Sourced;
    use api::k8s_openapi::api::core::v1::Namespace;
    use api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::relabelled;

    fn ns(name: &str, labels: &[(&str, &str)], annotation: &str) -> Sourced<Namespace> {
        Sourced::new(
            api::Source::new("namespaces.yaml", 1),
            Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    labels: (!labels.is_empty()).then(|| {
                        labels
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect()
                    }),
                    annotations: Some([("note".to_string(), annotation.to_string())].into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
    }

    #[test]
    fn only_a_change_of_labels_as_selectors_see_them_counts() {
        let before = [ns("a", &[("team", "x")], "1"), ns("b", &[], "1")];
        // An annotation, and a label the API server sets anyway: nothing.
        let after = [
            ns("a", &[("team", "x")], "2"),
            ns("b", &[("kubernetes.io/metadata.name", "b")], "1"),
        ];
        assert!(relabelled(&before, &after).is_empty());
        // A Namespace added without labels is as if it had no manifest.
        let after = [
            ns("a", &[("team", "x")], "1"),
            ns("b", &[], "1"),
            ns("c", &[], "1"),
        ];
        assert!(relabelled(&before, &after).is_empty());
        // A label changed, a Namespace with labels removed.
        let after = [ns("a", &[("team", "y")], "1")];
        let mut got: Vec<String> = relabelled(&before, &after).into_iter().collect();
        got.sort();
        assert_eq!(got, ["a"]);
        let after = [ns("b", &[], "1")];
        assert_eq!(relabelled(&before, &after), ["a".to_string()].into());
        // Of two manifests for one namespace, the first counts.
        let after = [
            ns("a", &[("team", "x")], "1"),
            ns("b", &[], "1"),
            ns("a", &[("team", "z")], "1"),
        ];
        assert!(relabelled(&before, &after).is_empty());
    }
}
