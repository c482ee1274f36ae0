//! Service edits: which routes they rebuild, and when they rebuild all.
//!
//! Every Service lookup is noted (`crate::service_reads`): per route, what
//! building its works and its report looked up (kept in its slot); for the
//! rest of the call, unscoped (today the ext_auth providers and the
//! HTTPProxy trees), kept by the translator as the union over the calls
//! since its last full translation (a part reused from an earlier call
//! does not look its Services up again). An edit whose context changed in
//! its Services alone is then translated as a route edit ([`super`]), when
//! no changed Service was looked up unscoped: the routes whose reads touch
//! a changed Service are rebuilt as if edited, every other route is reused.
//!
//! Sound because a lookup is noted whether it finds the Service or not,
//! under the key it asked for, and the translation is deterministic: a
//! route none of whose lookups changed looks up, and builds, the same
//! again (its object and every other input unchanged), so its works, its
//! bindings and its tail are what a full translation would build. The two
//! readers left out of the notes are rebuilt by their own rule: the
//! ClusterLoadAssignments of a changed Service's clusters, in every
//! Gateway, as after an edit of its EndpointSlices (the changed Services
//! join [`super::endpoints::Services`]); and the endpoint guard's
//! diagnostics, made again.

use api::Sourced;
use api::k8s_openapi::api::core::v1::Service;

use super::endpoints;
use crate::service_reads::Reads;

/// The Services an edit changed: by key (for the read sets) and by
/// namespace and name (for the ClusterLoadAssignments).
pub(crate) struct Changed {
    pub(crate) keys: Reads,
    pub(crate) names: endpoints::Services,
}

/// The Services that differ between `before` and `after` (object or
/// unreadable values; not a source alone, which the index does not keep): position by position when none was added or
/// removed, else the ones between the common prefix and suffix of the very
/// same objects (`super::aligned`).
pub(crate) fn changed(before: &[Sourced<Service>], after: &[Sourced<Service>]) -> Changed {
    let mut names = endpoints::Services::new();
    let keys = super::changed_keys(
        before,
        after,
        |s| &s.metadata,
        |ns, name| {
            names.entry(ns).or_default().insert(name);
        },
    );
    Changed { keys, names }
}

impl Changed {
    /// Whether a changed Service was looked up outside the routes since the
    /// last full translation (`unscoped`): then everything is rebuilt.
    pub(crate) fn forces_full(&self, unscoped: &Reads) -> bool {
        unscoped.touches(&self.keys)
    }

    /// Withdraws the slots of the routes that looked a changed Service up
    /// (they are rebuilt as if edited), and adds the changed Services to
    /// those whose ClusterLoadAssignments are built again.
    pub(crate) fn rebuild_readers(
        &self,
        prior: &mut [Option<super::Slot>],
        endpoints_changed: &mut Option<endpoints::Services>,
    ) {
        for slot in prior.iter_mut() {
            if slot.as_ref().is_some_and(|s| s.service_reads.touches(&self.keys)) {
                *slot = None;
            }
        }
        if self.names.is_empty() {
            return;
        }
        let names = endpoints_changed.get_or_insert_with(Default::default);
        for (ns, changed) in &self.names {
            names
                .entry(ns.clone())
                .or_default()
                .extend(changed.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn svc(ns: &str, name: &str, port: i32) -> Sourced<Service> {
        let object = serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": port}]},
        });
        Sourced {
            object: Arc::new(serde_json::from_value(object).expect("a Service")),
            source: api::Source::new("services.yaml", 1),
            unreadable: Default::default(),
        }
    }

    fn names(c: &Changed) -> Vec<String> {
        let mut out: Vec<String> = c
            .names
            .iter()
            .flat_map(|(ns, names)| names.iter().map(move |n| format!("{ns}/{n}")))
            .collect();
        out.sort();
        assert_eq!(c.keys.keys().len(), out.len());
        out
    }

    #[test]
    fn only_the_services_that_differ() {
        let old = vec![svc("a", "x", 80), svc("a", "y", 80), svc("b", "x", 80)];
        assert!(names(&changed(&old, &old.clone())).is_empty());
        // Equal but not the same allocation: still unchanged.
        let copy = vec![svc("a", "x", 80), svc("a", "y", 80), svc("b", "x", 80)];
        assert!(names(&changed(&old, &copy)).is_empty());
        let mut edited = old.clone();
        edited[1] = svc("a", "y", 81);
        assert_eq!(names(&changed(&old, &edited)), ["a/y"]);
        let mut added = old.clone();
        added.insert(1, svc("c", "z", 80));
        assert_eq!(names(&changed(&old, &added)), ["c/z"]);
        let mut removed = old.clone();
        removed.remove(2);
        assert_eq!(names(&changed(&old, &removed)), ["b/x"]);
        let mut renamed = old.clone();
        renamed[0] = svc("a", "w", 80);
        assert_eq!(names(&changed(&old, &renamed)), ["a/w", "a/x"]);
        // Moved in its file: the same to every reader (the index keeps no
        // source).
        let mut moved_in_file = old.clone();
        moved_in_file[2].source = api::Source::new("services.yaml", 40);
        assert!(names(&changed(&old, &moved_in_file)).is_empty());
    }
}
