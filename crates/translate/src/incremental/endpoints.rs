//! EndpointSlice edits: which ClusterLoadAssignments they rebuild.
//!
//! A route's works hold no endpoints (a cluster names its Service port,
//! `crate::endpoints`), so when an edit changes EndpointSlices and no other
//! context, every route's works, bindings and tail are reused as after a
//! route edit, and a Gateway whose works are the very same keeps its
//! assembly: only the ClusterLoadAssignments of its clusters whose Service
//! had its slices changed are built again ([`refresh`]). Sound because a
//! ClusterLoadAssignment is a function of its cluster (the same: the works
//! are), its Service (context: the same) and that Service's slices; a
//! Gateway assembled again resolves every cluster's endpoints afresh.
//! Kubernetes' most frequent event (pods coming and going) thus costs what
//! a route edit costs, not a full translation.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use api::Sourced;
use api::k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::GatewayXds;
use crate::backend::ClusterSpec;
use crate::endpoints::Resolver;
use crate::xds::{Clusters, cluster};

/// Services (namespace → names) whose EndpointSlices changed.
pub(crate) type Services = HashMap<String, HashSet<String>>;

/// The Services whose slices differ between `before` and `after`, a slice
/// belonging to the Service its `kubernetes.io/service-name` label names
/// (as `Index` groups them; a slice with no label serves none). A Service
/// is left out only if each of its slices, in both lists, lies where the
/// other list holds the same object: position by position when no slice
/// was added or removed, else in the common prefix or suffix (of the very
/// same objects, `super::aligned`).
pub(crate) fn changed_services(
    before: &[Sourced<EndpointSlice>],
    after: &[Sourced<EndpointSlice>],
) -> Services {
    let mut out = Services::new();
    super::each_changed(before, after, Sourced::same, |s| {
        if let Some((ns, name)) = crate::index::service_of_slice(&s.object) {
            out.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    });
    out
}

/// Whether `spec` serves one of the `changed` Services.
pub(crate) fn touches(changed: &Services, spec: &ClusterSpec) -> bool {
    spec.service.as_ref().is_some_and(|s| {
        changed
            .get(&s.namespace)
            .is_some_and(|names| names.contains(&s.name))
    })
}

/// `built` with the ClusterLoadAssignment of every cluster of a changed
/// Service built again (the very same `Arc` when none differs), and how
/// many were built. `None` when `clusters` is not what `built` was
/// assembled from (the caller then assembles the Gateway again).
pub(crate) fn refresh(
    built: &Arc<GatewayXds>,
    clusters: &Clusters,
    changed: &Services,
    endpoints: &Resolver<'_, '_>,
) -> Option<(Arc<GatewayXds>, usize)> {
    if clusters.len() != built.endpoints.len() {
        return None;
    }
    let mut next: Option<GatewayXds> = None;
    let mut rebuilt = 0;
    for (i, spec) in clusters.values().enumerate() {
        if built.endpoints[i].cluster_name != spec.name {
            return None;
        }
        if !touches(changed, spec) {
            continue;
        }
        rebuilt += 1;
        let assignment = cluster::assignment(spec, &endpoints.of(spec));
        if assignment != *built.endpoints[i] {
            next.get_or_insert_with(|| (**built).clone()).endpoints[i] = Arc::new(assignment);
        }
    }
    Some((next.map_or_else(|| Arc::clone(built), Arc::new), rebuilt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::Source;
    use serde_json::json;

    fn slice(name: &str, service: &str, address: &str) -> Sourced<EndpointSlice> {
        let labels = if service.is_empty() {
            json!({})
        } else {
            json!({"kubernetes.io/service-name": service})
        };
        Sourced::new(
            Source::new("t.yaml", 1),
            serde_json::from_value(json!({
                "metadata": {"namespace": "ns", "name": name, "labels": labels},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address]}],
            }))
            .expect("an EndpointSlice"),
        )
    }

    fn names(services: &Services) -> Vec<String> {
        let mut out: Vec<String> = services
            .iter()
            .flat_map(|(ns, names)| names.iter().map(move |n| format!("{ns}/{n}")))
            .collect();
        out.sort();
        out
    }

    /// Four Services' slices, as last call's list.
    fn before() -> Vec<Sourced<EndpointSlice>> {
        ["a", "b", "c", "d"]
            .iter()
            .map(|s| slice(&format!("{s}-0"), s, "10.0.0.1"))
            .collect()
    }

    #[test]
    fn only_the_services_whose_slices_differ_are_changed() {
        let old = before();
        // Nothing changed: the same objects, or equal copies.
        assert!(changed_services(&old, &old.clone()).is_empty());
        assert!(changed_services(&old, &before()).is_empty());

        // Edited in place: that Service only (two far apart: both).
        let mut edited = old.clone();
        edited[1] = slice("b-0", "b", "10.0.0.2");
        assert_eq!(names(&changed_services(&old, &edited)), ["ns/b"]);
        edited[3] = slice("d-0", "d", "10.0.0.2");
        assert_eq!(names(&changed_services(&old, &edited)), ["ns/b", "ns/d"]);

        // Relabelled to another Service: both lose or gain a slice.
        let mut moved = old.clone();
        moved[0] = slice("a-0", "c", "10.0.0.1");
        assert_eq!(names(&changed_services(&old, &moved)), ["ns/a", "ns/c"]);

        // Added in the middle, at the start, at the end; removed.
        let mut added = old.clone();
        added.insert(2, slice("b-1", "b", "10.0.0.3"));
        assert_eq!(names(&changed_services(&old, &added)), ["ns/b"]);
        let mut first = old.clone();
        first.insert(0, slice("x-0", "x", "10.0.0.3"));
        assert_eq!(names(&changed_services(&old, &first)), ["ns/x"]);
        let mut last = old.clone();
        last.push(slice("a-1", "a", "10.0.0.3"));
        assert_eq!(names(&changed_services(&old, &last)), ["ns/a"]);
        assert_eq!(names(&changed_services(&last, &old)), ["ns/a"]);
        let mut removed = old.clone();
        removed.remove(1);
        assert_eq!(names(&changed_services(&old, &removed)), ["ns/b"]);
        // A slice added that equals its neighbour: prefix and suffix
        // must not overlap (either copy may be the new one).
        let mut twin = old.clone();
        twin.insert(1, old[1].clone());
        assert_eq!(names(&changed_services(&old, &twin)), ["ns/b"]);

        // A slice with no Service label serves none.
        let mut unlabelled = old.clone();
        unlabelled.push(slice("z-0", "", "10.0.0.9"));
        assert!(changed_services(&old, &unlabelled).is_empty());
    }
}
