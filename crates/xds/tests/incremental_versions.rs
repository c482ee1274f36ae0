//! One route edited, translated incrementally (`translate::incremental`):
//! only the route configuration holding it gets a new content hash, so the
//! snapshot cache publishes nothing for the other Gateways' nodes, the
//! edited node's other types keep their versions (state-of-the-world pushes
//! only RDS), and delta, which diffs per resource hash, sends that one
//! route configuration. Translations of the same workload from scratch give
//! the same entries (versions do not depend on how the output was made).

use std::sync::Arc;

use testkit::generate::{Shape, manifests, set_first_path};
use translate::incremental::Translator;
use xds::{Snapshot, SnapshotCache, types};

/// 200 generated routes on Gateways whose listeners l1 and l3 are moved to
/// port 81: every Gateway has two route configurations, so "only the
/// edited one changes" is a real claim within a node too.
fn two_configurations_per_gateway() -> api::Inputs {
    let loaded = api::loader::load_str("workload.yaml", &manifests(Shape::with_routes(200)));
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics.first());
    let mut inputs = loaded.inputs;
    for g in &mut inputs.gateways {
        for (i, l) in Arc::make_mut(&mut g.object).spec.listeners.iter_mut().enumerate() {
            if i % 2 == 1 {
                l.port = 81;
            }
        }
    }
    inputs
}

#[test]
fn an_edit_changes_only_its_route_configuration() {
    let mut inputs = two_configurations_per_gateway();
    let settings = translate::Settings::default();
    let mut translator = Translator::new();
    let before = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let cache = SnapshotCache::new();
    for (node, gw) in &before.gateways {
        assert!(
            cache.set(node, Snapshot::from_gateway(gw)),
            "first snapshot of {node}"
        );
    }

    // Twice: the second edit assembles from the memo the first (itself
    // incremental) left.
    for (edited, value, expected_routes) in
        [(17, "/edited", "infra/gw-1/80"), (22, "/again", "infra/gw-2/81")]
    {
        set_first_path(&mut inputs, edited, value);
        let after = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
        let stats = translator.stats();
        assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
        assert!(
            stats.hosts_spliced > 0,
            "unchanged virtual hosts are spliced: {stats:?}"
        );
        assert_eq!(
            after,
            translate::translate(&inputs, &settings),
            "incremental output equals the full one"
        );
        assert_only(&cache, &after, expected_routes);
    }
}

/// Publishes `after` into `cache`, asserting that only `expected` (a route
/// configuration) changed: its node alone is published, its other types
/// keep their versions.
fn assert_only(cache: &SnapshotCache, after: &translate::Output, expected: &str) {
    let mut changed_nodes = Vec::new();
    let mut changed_routes = Vec::new();
    for (node, gw) in &after.gateways {
        let old = cache.get(node).expect("published before");
        let new = Snapshot::from_gateway(gw);
        for t in [types::CLUSTER, types::ENDPOINT, types::SECRET, types::LISTENER] {
            assert_eq!(
                old.version(t, None),
                new.version(t, None),
                "{node}: {t} keeps its version (SotW does not push it)"
            );
        }
        for (name, entry) in &new.types[types::ROUTE] {
            let previous = &old.types[types::ROUTE][name];
            if previous.hash != entry.hash {
                changed_routes.push(name.clone());
            } else {
                // What SotW and delta compare: an unchanged configuration's
                // version, alone, is unchanged.
                let names = [name.clone()];
                assert_eq!(
                    old.version(types::ROUTE, Some(&names)),
                    new.version(types::ROUTE, Some(&names))
                );
            }
        }
        if cache.set(node, new) {
            changed_nodes.push(node.clone());
        }
    }
    // A generated route r is on Gateway gw-(r % 4), listener l((r / 4) % 4):
    // route 17 on gw-1's l0 (port 80, shared with l2: one configuration),
    // route 22 on gw-2's l1 (port 81, shared with l3).
    let node = expected.rsplit_once('/').map_or(expected, |(n, _)| n);
    assert_eq!(
        changed_nodes,
        [node],
        "only the edited Gateway's node is published"
    );
    assert_eq!(changed_routes, [expected], "only its route configuration changed");
}

/// A translator that has translated `inputs`, and a cache holding its
/// snapshots (built with `set_gateway`, as `serve` does).
fn published(inputs: &api::Inputs, settings: &translate::Settings) -> (Translator, SnapshotCache) {
    let mut translator = Translator::new();
    let before = translator.translate(Arc::new(inputs.clone()), settings, translate::Seams::default());
    let cache = SnapshotCache::new();
    for (node, gw) in &before.gateways {
        assert!(cache.set_gateway(node, gw));
    }
    (translator, cache)
}

/// An edit publishes new entries only for what it changed: the other route
/// configurations of the node keep their very entries (`Arc`), neither
/// copied nor hashed again (megabytes per configuration at 10,000 routes),
/// and the snapshot equals one built from scratch.
#[test]
fn unchanged_route_configurations_keep_their_entries() {
    let mut inputs = two_configurations_per_gateway();
    let settings = translate::Settings::default();
    let (mut translator, cache) = published(&inputs, &settings);
    let old = cache.get("infra/gw-1").expect("published");
    // Route 17: gw-1's configuration for port 80 (see above).
    set_first_path(&mut inputs, 17, "/edited");
    let after = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    for (node, gw) in &after.gateways {
        assert_eq!(cache.set_gateway(node, gw), node == "infra/gw-1", "{node}");
    }
    let new = cache.get("infra/gw-1").expect("published");
    let (old_routes, new_routes) = (&old.types[types::ROUTE], &new.types[types::ROUTE]);
    assert_eq!(old_routes.len(), 2);
    for (name, entry) in new_routes {
        let shared = Arc::ptr_eq(entry, &old_routes[name]);
        assert_eq!(
            shared,
            name != "infra/gw-1/80",
            "{name}: only the edited configuration is a new entry"
        );
    }
    assert_eq!(
        *new,
        Snapshot::from_gateway(&after.gateways["infra/gw-1"]),
        "the same snapshot as one built from scratch"
    );
}

/// Clusters and their endpoints likewise: an edit that leaves a cluster as
/// it was keeps its very entry (the translator shares the cluster, the
/// snapshot recognises it by address), and an EndpointSlice edit makes a
/// new entry for the one assignment it changed and no other.
#[test]
fn unchanged_clusters_keep_their_entries() {
    let mut inputs = two_configurations_per_gateway();
    let settings = translate::Settings::default();
    let (mut translator, cache) = published(&inputs, &settings);
    let entries = |node: &str, t: &str| cache.get(node).expect("published").types[t].clone();
    let old_clusters = entries("infra/gw-1", types::CLUSTER);
    let old_endpoints = entries("infra/gw-1", types::ENDPOINT);
    assert!(
        old_clusters.len() > 10 && old_endpoints.len() > 10,
        "a real claim"
    );

    // A route edit: no cluster changes.
    set_first_path(&mut inputs, 17, "/edited");
    let after = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    assert!(cache.set_gateway("infra/gw-1", &after.gateways["infra/gw-1"]));
    for (t, old) in [(types::CLUSTER, &old_clusters), (types::ENDPOINT, &old_endpoints)] {
        let new = entries("infra/gw-1", t);
        assert_eq!(new.len(), old.len());
        for (name, entry) in &new {
            assert!(Arc::ptr_eq(entry, &old[name]), "{t} {name}: kept");
        }
    }

    // An EndpointSlice edit: its Service's assignment alone is new.
    let slice = Arc::make_mut(&mut inputs.endpoint_slices[0].object);
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/service-name"))
        .map(|name| {
            format!(
                "{}/{name}/",
                slice.metadata.namespace.as_deref().unwrap_or("default")
            )
        })
        .expect("a generated slice names its Service");
    let first = slice
        .endpoints
        .as_mut()
        .and_then(|e| e.first_mut())
        .expect("an endpoint");
    first.addresses = vec!["127.9.9.9".into()];
    let edited = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let mut changed = Vec::new();
    for (node, gw) in &edited.gateways {
        let old = entries(node, types::ENDPOINT);
        cache.set_gateway(node, gw);
        let new = entries(node, types::ENDPOINT);
        for (name, entry) in &new {
            if !Arc::ptr_eq(entry, &old[name]) {
                changed.push(name.clone());
            }
        }
        assert_eq!(
            *cache.get(node).expect("published"),
            Snapshot::from_gateway(gw),
            "{node}: the same snapshot as one built from scratch"
        );
    }
    assert!(!changed.is_empty(), "the edited slice's assignment is new");
    assert!(
        changed.iter().all(|name| name.starts_with(&service)),
        "only {service}'s assignments are new: {changed:?}"
    );
}
