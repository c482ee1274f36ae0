//! One route edited, translated incrementally (`translate::incremental`):
//! only the route configuration holding it gets a new content hash, so the
//! snapshot cache publishes nothing for the other Gateways' nodes, the
//! edited node's other types keep their versions (state-of-the-world pushes
//! only RDS), and delta, which diffs per resource hash, sends that one
//! route configuration. Translations of the same workload from scratch give
//! the same entries (versions do not depend on how the output was made).

use std::sync::Arc;

use testkit::generate::{Shape, manifests};
use translate::incremental::Translator;
use xds::{Snapshot, SnapshotCache, types};

fn edit_first_path(inputs: &mut api::Inputs, route: usize, value: &str) {
    let path = inputs.http_routes[route]
        .object
        .spec
        .rules
        .as_mut()
        .and_then(|r| r.first_mut())
        .and_then(|r| r.matches.as_mut())
        .and_then(|m| m.first_mut())
        .and_then(|m| m.path.as_mut())
        .expect("generated routes match on a path");
    path.value = Some(value.into());
}

#[test]
fn an_edit_changes_only_its_route_configuration() {
    let loaded = api::loader::load_str("workload.yaml", &manifests(Shape::with_routes(200)));
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics.first());
    let mut inputs = loaded.inputs;
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

    let edited = 17;
    edit_first_path(&mut inputs, edited, "/edited");
    let after = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let stats = translator.stats();
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(
        after,
        translate::translate(&inputs, &settings),
        "incremental output equals the full one"
    );

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
    // The generated route 17 is on Gateway gw-1 (17 % 4), listener l0
    // ((17 / 4) % 4), which shares port 80 with the Gateway's other HTTP
    // listeners: one route configuration.
    assert_eq!(
        changed_nodes,
        ["infra/gw-1"],
        "only the edited Gateway's node is published"
    );
    assert_eq!(
        changed_routes,
        ["infra/gw-1/80"],
        "only its route configuration changed"
    );
}
