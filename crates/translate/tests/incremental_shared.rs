//! Incremental translation of snapshots that share their objects, as
//! `serve`'s do (`api::Sourced`: an unchanged object is the same
//! allocation in both snapshots). `tests/incremental.rs` loads every step
//! afresh, so each object there is a new allocation and the translator
//! compares it field by field; here the translator's by-pointer paths are
//! taken: a route at the same position as last time and the same
//! allocation is reused without a look inside (ARCHITECTURE.md §7), and a
//! Gateway whose works are the very same ones reuses its assembly.
//!
//! After every step the incremental output must equal a full translation
//! of the same inputs, and the statistics must show the reuse that step
//! allows — so an edit the by-position path missed (a stale reuse) fails
//! the comparison, and a path that stopped reusing fails the count.

use std::sync::Arc;

use api::Inputs;
use api::gateway_api::experimental::httproutes::HttpRoute;
use testkit::generate::{Shape, manifests, set_first_path};
use translate::Settings;
use translate::incremental::{Full, Translator};

#[path = "support/random_edits.rs"]
mod random_edits;
use random_edits::{Rng, assert_same_output};

fn name(inputs: &Inputs, ri: usize) -> String {
    inputs.http_routes[ri]
        .object
        .metadata
        .name
        .clone()
        .unwrap_or_default()
}

fn rename(inputs: &mut Inputs, ri: usize, to: &str) {
    let route: &mut HttpRoute = Arc::make_mut(&mut inputs.http_routes[ri].object);
    route.metadata.name = Some(to.to_string());
}

struct Run {
    translator: Translator,
    settings: Settings,
    step: usize,
}

impl Run {
    /// On one thread (the pipeline's order is the same on any).
    fn new() -> Self {
        Run {
            translator: Translator::new(),
            settings: Settings {
                parallelism: Some(1),
                ..Default::default()
            },
            step: 0,
        }
    }

    /// Translates `inputs` both ways, compares, and returns the statistics.
    fn step(&mut self, what: &str, inputs: &Inputs) -> translate::incremental::Stats {
        self.step += 1;
        self.settings.transition_time = format!("2026-01-01T00:00:{:02}Z", self.step % 60);
        let full = translate::translate(inputs, &self.settings);
        let inc = self.translator.translate(
            Arc::new(inputs.clone()),
            &self.settings,
            translate::Seams::default(),
        );
        assert_same_output(&format!("step {} ({what})", self.step), &full, &inc);
        self.translator.stats()
    }
}

#[test]
fn shared_snapshots_reuse_by_position_and_never_stale() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(120))).inputs;
    let n = inputs.http_routes.len();
    let mut run = Run::new();
    assert_eq!(run.step("initial", &inputs).full, Some(Full::First));

    // Nothing changed: every route and every Gateway reused.
    let s = run.step("no change", &inputs);
    assert_eq!((s.full, s.routes_built, s.routes_reused), (None, 0, n));
    assert_eq!(s.gateways_reused, 4, "{s:?}");
    assert_eq!(s.route_sorts, 0, "{s:?}");
    // Route models build their rules only where read (`route::model`):
    // no route's works or tail were built, so no rules.
    assert_eq!(s.models_read, 0, "{s:?}");

    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for e in 0..12 {
        // In place: the same keys at the same positions, one object new.
        let ri = rng.below(n);
        set_first_path(&mut inputs, ri, &format!("/edited/{e}"));
        let s = run.step(&format!("edit route {ri}"), &inputs);
        assert_eq!(
            (s.full, s.routes_built, s.routes_reused),
            (None, 1, n - 1),
            "{s:?}"
        );
        assert_eq!(s.gateways_reused, 3, "{s:?}");
        assert_eq!(s.models_read, 1, "only the edited route's model: {s:?}");
        // The edited Gateway's hosts (one per route, a quarter of the
        // routes: four Gateways): only the edited route's one hostname is
        // merged into the IR and encoded; the others are spliced without
        // being merged (`incremental::dirty_hosts`).
        assert_eq!(
            inputs.http_routes[ri]
                .object
                .spec
                .hostnames
                .as_ref()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(
            (s.hosts_merged, s.hosts_encoded, s.hosts_spliced),
            (1, 1, n / 4 - 1),
            "{s:?}"
        );
        // The edited route keeps its backends: its work is the only one
        // merged; the other works of its Gateway (naming no dirty host)
        // are left out (`dirty_hosts::Partial::clean_skippable`).
        assert_eq!(s.works_merged, 1, "{s:?}");
        // Last call's orders checked only next to the edited route: at
        // most two neighbours in each of the two orders.
        assert!(s.order_compares <= 4, "{s:?}");
    }

    // A route that drops its backends: last call's clusters may hold one
    // no route names any more, so every work of its Gateway is merged
    // (one route per host, a quarter of the routes); put back, only its
    // own work is.
    let kept = inputs.http_routes[11].object.clone();
    let route: &mut HttpRoute = Arc::make_mut(&mut inputs.http_routes[11].object);
    for rule in route.spec.rules.iter_mut().flatten() {
        rule.backend_refs = None;
    }
    let s = run.step("route 11 without backends", &inputs);
    assert_eq!((s.routes_built, s.gateways_reused), (1, 3), "{s:?}");
    assert_eq!(s.works_merged, n / 4, "every work of the Gateway: {s:?}");
    inputs.http_routes[11].object = Arc::new(HttpRoute::clone(&kept));
    let s = run.step("route 11 with its backends again", &inputs);
    assert_eq!(s.works_merged, 1, "{s:?}");

    // An edit back to what a route was two steps ago: a new allocation
    // again, equal to an object the translator no longer holds.
    set_first_path(&mut inputs, 7, "/a");
    run.step("route 7 to /a", &inputs);
    set_first_path(&mut inputs, 7, "/b");
    run.step("route 7 to /b", &inputs);
    set_first_path(&mut inputs, 7, "/a");
    let s = run.step("route 7 back to /a", &inputs);
    assert_eq!(s.routes_built, 1, "{s:?}");

    // A new allocation equal to the old object (a re-decoded document):
    // compared field by field, reused.
    let copy = HttpRoute::clone(&inputs.http_routes[9].object);
    inputs.http_routes[9].object = Arc::new(copy);
    let s = run.step("route 9 re-decoded, unchanged", &inputs);
    assert_eq!((s.routes_built, s.gateways_reused), (0, 4), "{s:?}");

    // Renamed: its key changes at its position (matched by key).
    let old = name(&inputs, 11);
    rename(&mut inputs, 11, "renamed");
    let s = run.step("rename route 11", &inputs);
    assert_eq!((s.full, s.routes_built), (None, 1), "{s:?}");
    // Last call's orders, the renamed route inserted anew: not sorted.
    assert_eq!(s.route_sorts, 0, "{s:?}");

    // Two routes swap positions: every key elsewhere, nothing changed.
    inputs.http_routes.swap(3, 40);
    let s = run.step("swap routes 3 and 40", &inputs);
    assert_eq!((s.routes_built, s.routes_reused), (0, n), "{s:?}");

    // Two routes swap names: the same keys at the same positions would
    // be a stale reuse of each other's works.
    let (a, b) = (name(&inputs, 20), name(&inputs, 21));
    rename(&mut inputs, 20, &b);
    rename(&mut inputs, 21, &a);
    let s = run.step("swap the names of routes 20 and 21", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");

    // A route removed, then added back elsewhere.
    let removed = inputs.http_routes.remove(50);
    let s = run.step("remove route 50", &inputs);
    assert_eq!((s.routes_built, s.routes_reused), (0, n - 1), "{s:?}");
    assert_eq!(s.models_read, 0, "{s:?}");
    // Last call's orders renumbered (every route after 50 moved up).
    assert_eq!(s.route_sorts, 0, "{s:?}");
    inputs.http_routes.insert(5, removed);
    let s = run.step("add it back at 5", &inputs);
    assert_eq!((s.routes_built, s.routes_reused), (1, n - 1), "{s:?}");
    assert_eq!(s.models_read, 1, "{s:?}");
    // Renumbered, and the added route inserted by binary search.
    assert_eq!(s.route_sorts, 0, "{s:?}");
    assert!(s.order_compares <= 4, "{s:?}");

    // A second route of one key (ambiguous: never reused), edited in
    // place while ambiguous, then removed.
    let twin = inputs.http_routes[30].clone();
    inputs.http_routes.push(twin);
    // Route 30 is paired by pointer with itself, but its key is now held
    // twice: neither is reused.
    let s = run.step("duplicate route 30", &inputs);
    assert_eq!((s.routes_built, s.routes_reused), (2, n - 1), "{s:?}");
    set_first_path(&mut inputs, n, "/twin");
    let s = run.step("edit the duplicate", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");
    set_first_path(&mut inputs, 30, "/original");
    let s = run.step("edit the original", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");
    inputs.http_routes.pop();
    // Unique again, route 30 has no works kept (ambiguous last call).
    let s = run.step("remove the duplicate", &inputs);
    assert_eq!((s.routes_built, s.routes_reused), (1, n - 1), "{s:?}");
    let s = run.step("no change", &inputs);
    assert_eq!((s.routes_built, s.gateways_reused), (0, 4), "{s:?}");

    // Renamed onto another route's key, in place (the same number of
    // routes): both become ambiguous, and stay so while edited.
    let (r12, r32) = (name(&inputs, 12), name(&inputs, 32));
    assert_eq!(
        inputs.http_routes[12].object.metadata.namespace,
        inputs.http_routes[32].object.metadata.namespace
    );
    rename(&mut inputs, 12, &r32);
    let s = run.step("rename route 12 onto route 32's key", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");
    set_first_path(&mut inputs, 32, "/clash");
    let s = run.step("edit route 32 while its key is ambiguous", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");
    rename(&mut inputs, 12, &r12);
    let s = run.step("rename route 12 back", &inputs);
    assert_eq!(s.routes_built, 2, "{s:?}");

    // The renamed route gets its name back: its old works are gone.
    rename(&mut inputs, 11, &old);
    let s = run.step("rename route 11 back", &inputs);
    assert_eq!(s.routes_built, 1, "{s:?}");
}

/// A reused route's status is the very same allocation as last call's
/// although the call's transition time changed: conditions hold no time,
/// the output holds the call's (`Output::transition_time`), and the status
/// written carries it. Only the edited route's status is a new value.
#[test]
fn a_reused_routes_status_is_last_calls_and_is_written_with_this_calls_time() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(40))).inputs;
    let mut translator = Translator::new();
    let mut settings = Settings {
        parallelism: Some(1),
        transition_time: "2026-01-01T00:00:01Z".into(),
        ..Default::default()
    };
    let before = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    set_first_path(&mut inputs, 3, "/edited");
    settings.transition_time = "2026-01-01T00:00:02Z".into();
    let after = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    assert_eq!(translator.stats().routes_reused, inputs.http_routes.len() - 1);

    let route_status = |out: &translate::Output, name: &str| {
        out.status
            .iter()
            .find(|s| s.kind == "HTTPRoute" && s.metadata.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no status for HTTPRoute {name}"))
    };
    let (mut shared, mut rebuilt) = (0, 0);
    for ri in 0..inputs.http_routes.len() {
        let route = name(&inputs, ri);
        let (a, b) = (route_status(&before, &route), route_status(&after, &route));
        if ri == 3 {
            assert!(!Arc::ptr_eq(&a, &b), "the edited route's status is rebuilt");
            rebuilt += 1;
        } else {
            assert!(
                Arc::ptr_eq(&a, &b),
                "HTTPRoute {route}: status copied, not shared"
            );
            shared += 1;
        }
    }
    assert_eq!((shared, rebuilt), (inputs.http_routes.len() - 1, 1));

    // Written, every condition of every status carries this call's time.
    let written = serde_json::to_value(after.timed_status()).expect("status serializes");
    let times: Vec<&str> = condition_times(&written);
    assert!(
        times.len() > inputs.http_routes.len(),
        "{} conditions",
        times.len()
    );
    assert!(
        times.iter().all(|t| *t == "2026-01-01T00:00:02Z"),
        "{:?}",
        times.iter().find(|t| **t != "2026-01-01T00:00:02Z")
    );
}

/// Every `lastTransitionTime` of every object under a `conditions` list.
fn condition_times(v: &serde_json::Value) -> Vec<&str> {
    let mut out = Vec::new();
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                if k == "conditions" {
                    for c in v.as_array().into_iter().flatten() {
                        out.push(c["lastTransitionTime"].as_str().unwrap_or("<missing>"));
                    }
                } else {
                    out.extend(condition_times(v));
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| out.extend(condition_times(v))),
        _ => {}
    }
    out
}

/// An edit of one Service's EndpointSlice alone (pods coming and going)
/// is not a context change: every route and every Gateway is reused, and
/// only the ClusterLoadAssignments of that Service's clusters are built
/// again (`incremental/endpoints.rs`). A Gateway with none of them keeps
/// its very assembly; the output equals a full translation.
#[test]
fn an_endpointslice_edit_rebuilds_no_route_and_only_its_services_assignments() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    let settings = Settings {
        parallelism: Some(1),
        ..Default::default()
    };
    let mut translator = Translator::new();
    let before = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let gateways = before.gateways.len();
    assert!(gateways > 1, "{gateways} Gateways");

    let slice = Arc::make_mut(&mut inputs.endpoint_slices[0].object);
    let service = slice.metadata.labels.as_ref().expect("labelled")["kubernetes.io/service-name"].clone();
    let namespace = slice.metadata.namespace.clone().expect("namespaced");
    slice.endpoints.as_mut().expect("endpoints")[0].addresses = vec!["127.9.9.9".into()];
    // Translated incrementally, and equal to a full translation.
    let step = |translator: &mut Translator, inputs: &Inputs, what: &str| {
        let out = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
        assert_same_output(what, &translate::translate(inputs, &settings), &out);
        out
    };
    let after = step(&mut translator, &inputs, "EndpointSlice edit");

    let stats = translator.stats();
    assert_eq!(stats.full, None, "{stats:?}");
    assert_eq!(stats.routes_built, 0, "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways, "{stats:?}");
    // The Service's clusters, in whichever Gateways use it: the only
    // assignments built again, now holding the new address.
    let prefix = format!("{namespace}/{service}/");
    let ours = |gw: &translate::GatewayXds| {
        gw.endpoints
            .iter()
            .filter(|e| e.cluster_name.starts_with(&prefix))
            .count()
    };
    let rebuilt: usize = after.gateways.values().map(|gw| ours(gw)).sum();
    assert!(rebuilt > 0, "no cluster of {prefix}");
    assert_eq!(stats.assignments_rebuilt, rebuilt, "{stats:?}");
    let mut untouched = 0;
    for (key, gw) in &after.gateways {
        let was = &before.gateways[key];
        if ours(gw) == 0 {
            assert!(Arc::ptr_eq(was, gw), "Gateway {key}: assembly not kept");
            untouched += 1;
        } else {
            assert_ne!(was.endpoints, gw.endpoints, "Gateway {key}");
            assert_eq!(was.clusters, gw.clusters, "Gateway {key}: clusters are unchanged");
            assert_eq!(was.routes, gw.routes, "Gateway {key}: routes are unchanged");
        }
    }
    assert!(untouched > 0, "every Gateway uses {prefix}");

    // A route and the EndpointSlice of its own backend, in one call (as
    // `serve` batches saves): its Gateway is assembled again, and the
    // cluster of that Service must not keep last call's assignment.
    let (namespace, backend) = first_backend(&inputs);
    let slice = inputs
        .endpoint_slices
        .iter_mut()
        .find(|s| {
            translate::index::service_of_slice(&s.object) == Some((namespace.as_str(), backend.as_str()))
        })
        .expect("the backend's slice");
    Arc::make_mut(&mut slice.object)
        .endpoints
        .as_mut()
        .expect("endpoints")[0]
        .addresses = vec!["127.8.8.8".into()];
    set_first_path(&mut inputs, 0, "/both");
    step(&mut translator, &inputs, "route and EndpointSlice edit");
    let stats = translator.stats();
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");
}

/// The namespace and name of the first route's first backend.
fn first_backend(inputs: &Inputs) -> (String, String) {
    let route = &inputs.http_routes[0].object;
    let backend = route.spec.rules.as_ref().expect("rules")[0]
        .backend_refs
        .as_ref()
        .expect("backendRefs")[0]
        .name
        .clone();
    (route.metadata.namespace.clone().expect("namespaced"), backend)
}

/// An edit of Services alone rebuilds the routes that looked them up and
/// reuses every other (`incremental/services.rs`), merging only their works
/// into their Gateways; one a GatewayExtension looked up (outside any
/// route) makes a full translation. The output
/// equals a full translation at every step.
#[test]
fn a_service_edit_rebuilds_only_the_routes_that_read_it() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    let mut run = Run::new();
    let total = inputs.http_routes.len() + inputs.grpc_routes.len();
    run.step("initial", &inputs);

    // The backend of the first route: some routes name it, not all.
    let (ns, backend) = first_backend(&inputs);
    let readers = testkit::generate::routes_naming(&inputs, &ns, &backend);
    assert!(
        readers > 0 && readers < total,
        "{readers} of {total} routes name {ns}/{backend}"
    );
    let at = inputs
        .services
        .iter()
        .position(|s| {
            s.object.metadata.name.as_deref() == Some(backend.as_str())
                && s.object.metadata.namespace.as_deref() == Some(ns.as_str())
        })
        .expect("the backend's Service");
    let service = inputs.services[at].clone();

    // A label: nothing in the output changes, its readers are rebuilt.
    Arc::make_mut(&mut inputs.services[at].object).metadata.labels =
        Some([("edited".to_string(), "yes".to_string())].into());
    let stats = run.step("Service label", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, readers), "{stats:?}");
    assert_eq!(stats.routes_reused, total - readers, "{stats:?}");
    // Spread over the route order, each of its readers' works is changed
    // in place: only those are merged (`dirty_hosts`), one per reader
    // (each route attaches to one listener).
    assert_eq!(stats.works_merged, readers, "{stats:?}");

    // Its port renumbered: its readers lose their backend (status and
    // fenced rules change), the others are reused.
    renumber_ports(&mut inputs.services[at], |p| p + 1000);
    let stats = run.step("Service port", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, readers), "{stats:?}");

    // Removed, then put back as it was.
    inputs.services.remove(at);
    let stats = run.step("Service removed", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, readers), "{stats:?}");
    inputs.services.insert(at, service);
    let stats = run.step("Service back", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, readers), "{stats:?}");

    // A Service no one looks up: nothing is rebuilt, every Gateway reused.
    let other = api::loader::load_str(
        "other.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: unread, namespace: infra}\nspec:\n  ports: [{port: 80}]\n",
    );
    inputs.extend(other.inputs);
    let stats = run.step("unread Service added", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, inputs.gateways.len(), "{stats:?}");

    // An ext_auth provider (a GatewayExtension, used by gw-0's policy)
    // and its Service: judged as a policy edit (gw-0's routes rebuilt,
    // every Gateway assembled again); the provider's lookup of its
    // Service is noted outside any route.
    let auth = api::loader::load_str(
        "auth.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: authz, namespace: infra}\nspec:\n  ports: [{name: http, port: 9000}]\n---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: GatewayExtension\nmetadata: {name: auth, namespace: infra}\nspec:\n  type: ExtAuth\n  extAuth:\n    httpService:\n      backendRef: {name: authz, port: 9000}\n---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {name: auth, namespace: infra}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw-0}]\n  extAuth: {extensionRef: {name: auth}}\n",
    );
    assert!(auth.diagnostics.is_empty(), "{:?}", auth.diagnostics);
    inputs.extend(auth.inputs);
    let stats = run.step("ext_auth added", &inputs);
    assert_eq!((stats.full, stats.gateways_reused), (None, 0), "{stats:?}");
    // The ext_auth Service, looked up by the GatewayExtension (outside any
    // route): a full translation, which sees its port gone.
    let before = translate::translate(&inputs, &run.settings);
    let authz = inputs
        .services
        .iter_mut()
        .find(|s| s.object.metadata.name.as_deref() == Some("authz"))
        .expect("authz");
    renumber_ports(authz, |_| 9001);
    let full = translate::translate(&inputs, &run.settings);
    assert_ne!(
        before.gateways, full.gateways,
        "the ext_auth Service's port matters to gw-0"
    );
    let stats = run.step("ext_auth Service", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
    // And after it, a route's backend Service is judged per route again.
    Arc::make_mut(&mut inputs.services[at].object).metadata.labels =
        Some([("edited".to_string(), "again".to_string())].into());
    let stats = run.step("Service label again", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, readers), "{stats:?}");
}

/// Every port of a Service renumbered (copy on write, as an edit).
fn renumber_ports(svc: &mut api::Sourced<api::k8s_openapi::api::core::v1::Service>, to: impl Fn(i32) -> i32) {
    let spec = Arc::make_mut(&mut svc.object).spec.as_mut().expect("spec");
    for p in spec.ports.iter_mut().flatten() {
        p.port = to(p.port);
    }
}

/// A TrafficPolicy targeting `kind` `name` (in `ns`), setting a response
/// header to `value`.
fn header_policy(name: &str, ns: &str, target: &str, value: &str) -> api::Inputs {
    let (kind, target_name) = target.split_once('/').expect("Kind/name");
    api::loader::load_str(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: {kind}, name: {target_name}}}]\n  headerModifiers: {{response: {{set: [{{name: x-policy, value: {value}}}]}}}}\n"
        ),
    )
    .inputs
}

/// An edit of TrafficPolicies alone rebuilds the routes whose effective
/// policies changed and the routes and assembly of a Gateway whose scopes
/// changed (`incremental/policies.rs`); every other route and Gateway is
/// reused. A Gateway with no route whose policy changes is assembled
/// again (its route configuration carries its scope).
#[test]
fn a_policy_edit_rebuilds_only_what_it_reaches() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    add_gateway(&mut inputs, "lonely", "{name: http, protocol: HTTP, port: 8081}");
    let mut run = Run::new();
    let total = inputs.http_routes.len();
    let gateways = inputs.gateways.len();
    run.step("initial", &inputs);
    let route = &inputs.http_routes[0].object.metadata;
    let (ns, name) = (
        route.namespace.clone().expect("namespaced"),
        route.name.clone().expect("named"),
    );

    // A policy on one route: that route alone, its Gateway assembled again.
    inputs.extend(header_policy("p-route", &ns, &format!("HTTPRoute/{name}"), "v1"));
    let stats = run.step("route policy added", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");
    let at = inputs.traffic_policies.len() - 1;
    inputs.traffic_policies[at] = header_policy("p-route", &ns, &format!("HTTPRoute/{name}"), "v2")
        .traffic_policies
        .remove(0);
    let stats = run.step("route policy edited", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");

    // A policy on the Gateway with no route: no route rebuilt, and that
    // Gateway alone assembled again.
    inputs.extend(header_policy("p-lonely", "infra", "Gateway/lonely", "v1"));
    let stats = run.step("policy on a Gateway with no route", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");

    // A policy on gw-1: the routes bound to it, none other.
    let on_gw1 = naming(&inputs, "gw-1", None);
    assert!(on_gw1 > 0 && on_gw1 < total, "{on_gw1} of {total} routes on gw-1");
    let first_on_gw1 = inputs.http_routes[0]
        .object
        .spec
        .parent_refs
        .iter()
        .flatten()
        .any(|p| p.name == "gw-1");
    assert!(
        !first_on_gw1,
        "the first route (its own policy) is on another Gateway"
    );
    inputs.extend(header_policy("p-gw1", "infra", "Gateway/gw-1", "v1"));
    let stats = run.step("Gateway policy added", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, on_gw1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");

    // Every policy removed: each route they reached, once more.
    inputs.traffic_policies.clear();
    let stats = run.step("policies removed", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, on_gw1 + 1), "{stats:?}");
}

/// An edit of Secrets none of which was looked up rebuilds nothing; one a
/// listener names makes a full translation (`incremental/secrets.rs`).
#[test]
fn a_secret_edit_rebuilds_nothing_unless_one_was_looked_up() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    let (crt, key) = random_edits::tls_pair();
    let secret = |name: &str, crt: &str| {
        api::loader::load_str(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: infra}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {key}\n"
            ),
        )
        .inputs
        .secrets
    };
    inputs.secrets.extend(secret("named", &crt));
    inputs.secrets.extend(secret("unnamed", &crt));
    add_gateway(
        &mut inputs,
        "tls",
        "{name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: named}]}}",
    );
    let mut run = Run::new();
    run.step("initial", &inputs);
    let gateways = inputs.gateways.len();

    // A certificate no listener names, rotated (here: made invalid).
    inputs.secrets[1] = secret("unnamed", "bm90IGEgY2VydA==").remove(0);
    let stats = run.step("unnamed Secret", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways, "{stats:?}");

    // The listener's: a full translation, which finds it invalid.
    let before = translate::translate(&inputs, &run.settings);
    inputs.secrets[0] = secret("named", "bm90IGEgY2VydA==").remove(0);
    assert_ne!(
        before.status,
        translate::translate(&inputs, &run.settings).status,
        "the listener's certificate matters"
    );
    let stats = run.step("named Secret", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
}

/// Adds Gateway `infra/name` of class `portcullis` with one listener.
fn add_gateway(inputs: &mut Inputs, name: &str, listener: &str) {
    inputs.extend(
        api::loader::load_str(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: infra}}\nspec:\n  gatewayClassName: portcullis\n  listeners: [{listener}]\n"
            ),
        )
        .inputs,
    );
}

/// Routes naming `infra/gateway` (as a Gateway) among `inputs`', by
/// sectionName `section` when given.
fn naming(inputs: &Inputs, gateway: &str, section: Option<&str>) -> usize {
    inputs
        .http_routes
        .iter()
        .filter(|r| {
            r.object
                .spec
                .parent_refs
                .iter()
                .flatten()
                .any(|p| p.name == gateway && section.is_none_or(|s| p.section_name.as_deref() == Some(s)))
        })
        .count()
}

/// An edit of a Gateway or a ListenerSet in place rebuilds the routes
/// naming the Gateway (directly or through a ListenerSet attached to it)
/// and assembles it again; every other route and Gateway is reused
/// (`incremental/gateway_edits.rs`). A Gateway added, or given another
/// class or the default scope, is a full translation.
#[test]
fn a_gateway_edit_rebuilds_only_the_routes_naming_it() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    inputs.extend(
        api::loader::load_str(
            "listener-set.yaml",
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: parent, namespace: infra}
spec:
  gatewayClassName: portcullis
  allowedListeners: {namespaces: {from: All}}
  listeners:
  - {name: http, protocol: HTTP, port: 8082, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: infra}
spec:
  parentRef: {name: parent}
  listeners:
  - {name: foo, protocol: HTTP, port: 8082, hostname: \"*.foo.example.com\", allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-ls, namespace: infra}
spec:
  parentRefs: [{kind: ListenerSet, name: ls}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ls}}]
",
        )
        .inputs,
    );
    let mut run = Run::new();
    let gateways = inputs.gateways.len();
    run.step("initial", &inputs);
    let on_gw1 = naming(&inputs, "gw-1", None);
    assert!(
        on_gw1 > 0 && on_gw1 < inputs.http_routes.len(),
        "{on_gw1} routes on gw-1"
    );
    let at = |inputs: &Inputs, name: &str| {
        inputs
            .gateways
            .iter()
            .position(|g| g.object.metadata.name.as_deref() == Some(name))
            .expect("the Gateway")
    };

    // gw-1's first listener given a hostname none of its routes has (they
    // are refused: the comparison with a full translation sees a stale
    // route), and a listener added: the routes bound to the first
    // listener by sectionName (the generated routes all name one), gw-1
    // assembled again; the routes on its other listeners, whose computed
    // state did not change, are reused.
    let gw1 = at(&inputs, "gw-1");
    let (on_l0, on_l1) = (
        naming(&inputs, "gw-1", Some("l0")),
        naming(&inputs, "gw-1", Some("l1")),
    );
    assert!(
        on_l0 > 0 && on_l1 > 0 && on_l0 + on_l1 < on_gw1,
        "{on_l0} + {on_l1} of {on_gw1}"
    );
    let gw = Arc::make_mut(&mut inputs.gateways[gw1].object);
    let mut extra = gw.spec.listeners[0].clone();
    extra.name = "extra".into();
    extra.port = 8099;
    // Refused, so gw-1 has a diagnostic stamped with its source.
    extra.protocol = "UDP".into();
    gw.spec.listeners.push(extra);
    gw.spec.listeners[0].hostname = Some("*.elsewhere.example.com".into());
    let stats = run.step("gw-1's listeners edited", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, on_l0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");

    // The first listener given the second's hostname: the second, later on
    // the same port, is now Conflicted though its spec did not change, so
    // the routes on both are rebuilt (the comparison with a full
    // translation sees the second's routes refused).
    let gw = Arc::make_mut(&mut inputs.gateways[gw1].object);
    gw.spec.listeners[0].hostname = gw.spec.listeners[1].hostname.clone();
    let stats = run.step("gw-1's second listener made Conflicted", &inputs);
    assert_eq!(
        (stats.full, stats.routes_built),
        (None, on_l0 + on_l1),
        "{stats:?}"
    );

    // A listener inserted first: every listener's index moved, so every
    // route bound to one is rebuilt.
    let gw = Arc::make_mut(&mut inputs.gateways[gw1].object);
    gw.spec.listeners[0].hostname = Some("*.l0.example.com".into());
    let mut first = gw.spec.listeners[0].clone();
    first.name = "first".into();
    first.hostname = Some("*.first.example.com".into());
    gw.spec.listeners.insert(0, first);
    let stats = run.step("a listener inserted first on gw-1", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, on_gw1), "{stats:?}");

    // The ListenerSet's listener edited: the route on it, none other.
    let ls = Arc::make_mut(&mut inputs.listener_sets[0].object);
    ls.spec.listeners[0].hostname = Some("*.bar.example.com".into());
    let stats = run.step("ListenerSet's listener edited", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");

    // The ListenerSet's parent stops admitting it: the route on the
    // ListenerSet (found refused by the comparison with a full
    // translation), none other.
    let parent = at(&inputs, "parent");
    Arc::make_mut(&mut inputs.gateways[parent].object)
        .spec
        .allowed_listeners = None;
    let stats = run.step("parent admits no ListenerSet", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");

    // Only a Gateway's file line moved (a listener added above it in the
    // same file): nothing rebuilt, its diagnostics restamped (the
    // comparison with a full translation sees them).
    inputs.gateways[gw1].source = api::Source::new("scale.yaml", 9999);
    let stats = run.step("gw-1 moved in its file", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways, "{stats:?}");
    // So is a Service that only moved in its file (the index keeps no
    // Service's source).
    inputs.services[0].source = api::Source::new("scale.yaml", 9998);
    let stats = run.step("a Service moved in its file", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways, "{stats:?}");

    // Another class, the default scope, a Gateway added: full translations.
    let gw0 = at(&inputs, "gw-0");
    Arc::make_mut(&mut inputs.gateways[gw0].object)
        .spec
        .gateway_class_name = "other".into();
    let stats = run.step("gw-0 given another class", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
    Arc::make_mut(&mut inputs.gateways[gw0].object)
        .spec
        .gateway_class_name = "portcullis".into();
    run.step("gw-0 back to its class", &inputs);
    Arc::make_mut(&mut inputs.gateways[gw1].object).spec.default_scope =
        Some(api::gateway_api::experimental::gateways::GatewayDefaultScope::All);
    let stats = run.step("gw-1 made a default Gateway", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
    add_gateway(&mut inputs, "new", "{name: http, protocol: HTTP, port: 8083}");
    let stats = run.step("Gateway added", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
}

fn grant(name: &str, ns: &str, from_ns: &str, to_kind: &str) -> Inputs {
    api::loader::load_str(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: {name}, namespace: {ns}}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: {from}, namespace: {from_ns}}}]
  to: [{{group: \"\", kind: {to_kind}}}]
",
            from = if to_kind == "Secret" {
                "Gateway"
            } else {
                "HTTPRoute"
            },
        ),
    )
    .inputs
}

/// An edit of ReferenceGrants rebuilds the routes that looked into a
/// changed grant's namespace, and no other
/// (`incremental/reference_grants.rs`); a namespace a listener's
/// certificateRef looked into makes a full translation.
#[test]
fn a_reference_grant_edit_rebuilds_only_the_routes_that_looked_into_its_namespace() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    inputs.extend(
        api::loader::load_str(
            "crossing.yaml",
            "apiVersion: v1
kind: Service
metadata: {name: far, namespace: far}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: crossing, namespace: ns-0}
spec:
  parentRefs: [{name: gw-0, namespace: infra, sectionName: l0}]
  hostnames: [crossing.l0.example.com]
  rules:
  - backendRefs: [{name: far, namespace: far, port: 80}]
",
        )
        .inputs,
    );
    inputs.extend(grant("let-in", "far", "ns-0", "Service"));
    add_gateway(
        &mut inputs,
        "tls",
        "{name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert, namespace: certs}]}}",
    );
    let mut run = Run::new();
    run.step("initial", &inputs);

    // A grant in a namespace nothing looked into: nothing rebuilt.
    inputs.extend(grant("idle", "elsewhere", "ns-0", "Service"));
    let stats = run.step("grant nobody looks into", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");

    // The crossing route's grant removed: that route alone (its backend
    // now refused, which the comparison with a full translation sees).
    let at = inputs
        .reference_grants
        .iter()
        .position(|g| g.object.metadata.name.as_deref() == Some("let-in"))
        .expect("the grant");
    inputs.reference_grants.remove(at);
    let stats = run.step("the crossing route's grant removed", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");

    // A grant where the listener's certificate lives: a full translation.
    inputs.extend(grant("certs", "certs", "infra", "Secret"));
    let stats = run.step("grant for the listener's certificate", &inputs);
    assert_eq!(stats.full, Some(Full::Context), "{stats:?}");
}

/// Whether HTTPRoute `name` is accepted by some parent in a full
/// translation of `inputs`.
fn route_accepted(inputs: &Inputs, name: &str) -> bool {
    let out = translate::translate(inputs, &Settings::default());
    out.status.iter().any(|s| {
        s.kind == "HTTPRoute"
            && s.metadata.name == name
            && match &s.status {
                translate::status::StatusBody::Route { parents } => parents.iter().any(|p| {
                    p.conditions
                        .iter()
                        .any(|c| c.type_ == "Accepted" && c.status == "True")
                }),
                _ => false,
            }
    })
}

/// A Namespace's labels are read only for the routes and ListenerSets in
/// it (`incremental/namespaces.rs`): relabelling one rebuilds its routes,
/// and counts as an edit of its ListenerSets' parent Gateways; any other
/// edit of a Namespace, or one added without labels, rebuilds nothing.
#[test]
fn a_namespace_relabel_rebuilds_only_what_lives_in_it() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    let selects = "allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}";
    add_gateway(
        &mut inputs,
        "picky",
        &format!("{{name: http, protocol: HTTP, port: 8090, {selects}}}"),
    );
    inputs.extend(
        api::loader::load_str(
            "tenants.yaml",
            "apiVersion: v1
kind: Namespace
metadata: {name: ns-3, labels: {team: b}}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenant}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: picked, namespace: ns-3}
spec:
  parentRefs: [{name: picky, namespace: infra}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /picked}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: parent, namespace: infra}
spec:
  gatewayClassName: portcullis
  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}
  listeners:
  - {name: http, protocol: HTTP, port: 8091, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: tenant}
spec:
  parentRef: {name: parent, namespace: infra}
  listeners:
  - {name: foo, protocol: HTTP, port: 8091, hostname: \"*.foo.example.com\", allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-ls, namespace: infra}
spec:
  parentRefs: [{kind: ListenerSet, name: ls, namespace: tenant}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ls}}]
",
        )
        .inputs,
    );
    let in_ns3 = inputs
        .http_routes
        .iter()
        .filter(|r| r.object.metadata.namespace.as_deref() == Some("ns-3"))
        .count();
    assert!(
        in_ns3 > 1 && in_ns3 < inputs.http_routes.len() / 4,
        "{in_ns3} routes in ns-3"
    );
    let gateways = inputs.gateways.len();
    // Edits Namespace `name`'s metadata in place.
    let edit =
        |inputs: &mut Inputs,
         name: &str,
         f: &dyn Fn(&mut api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta)| {
            let ns = inputs
                .namespaces
                .iter_mut()
                .find(|n| n.object.metadata.name.as_deref() == Some(name))
                .expect("the Namespace");
            f(&mut Arc::make_mut(&mut ns.object).metadata);
        };
    let team_a = |m: &mut api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.labels = Some([("team".to_string(), "a".to_string())].into());
    };
    let mut run = Run::new();
    run.step("initial", &inputs);
    assert!(!route_accepted(&inputs, "picked") && !route_accepted(&inputs, "on-ls"));

    // ns-3 now selected by picky's listener: its routes, no other; no
    // Gateway assembled again but the ones its routes are on.
    edit(&mut inputs, "ns-3", &team_a);
    let stats = run.step("ns-3 relabelled", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, in_ns3), "{stats:?}");
    assert!(
        route_accepted(&inputs, "picked"),
        "the selector's verdict changed"
    );

    // An annotation: nothing read it.
    edit(&mut inputs, "ns-3", &|m| {
        m.annotations = Some([("note".to_string(), "x".to_string())].into());
    });
    let stats = run.step("ns-3 annotated", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways, "{stats:?}");

    // A Namespace added without labels: as if it had no manifest.
    inputs.extend(
        api::loader::load_str(
            "ns-5.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns-5}\n",
        )
        .inputs,
    );
    let stats = run.step("ns-5 given a manifest", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");

    // tenant now admitted by parent's allowedListeners: the ListenerSet
    // counts as edited, so the route on it is rebuilt, and parent is
    // assembled again; no other.
    edit(&mut inputs, "tenant", &team_a);
    let stats = run.step("tenant relabelled", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
    assert_eq!(stats.gateways_reused, gateways - 1, "{stats:?}");
    assert!(route_accepted(&inputs, "on-ls"), "the ListenerSet was admitted");
}

/// A GatewayExtension edit is judged as a policy edit (`incremental/mod.rs`):
/// a provider that stays usable changes no route's effective policy, so no
/// route is rebuilt, but every Gateway is assembled again (an assembly
/// installs the ext_authz filter configs of the providers it uses: one
/// reused whole would keep the old auth server); one that becomes unusable
/// rebuilds the routes using it (they answer 500).
#[test]
fn a_gateway_extension_edit_reassembles_gateways_and_rebuilds_only_its_users() {
    let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(200))).inputs;
    let route = &inputs.http_routes[0].object.metadata;
    let (ns, name) = (
        route.namespace.clone().expect("namespaced"),
        route.name.clone().expect("named"),
    );
    let extension = |backend: &str| {
        api::loader::load_str(
            "auth.yaml",
            &format!(
                "apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: auth, namespace: {ns}}}
spec:
  type: ExtAuth
  extAuth:
    httpService:
      backendRef: {{name: {backend}, port: 80}}
"
            ),
        )
        .inputs
    };
    inputs.extend(
        api::loader::load_str(
            "auth-services.yaml",
            &format!(
                "apiVersion: v1
kind: Service
metadata: {{name: auth-a, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80, targetPort: 9001}}]
---
apiVersion: v1
kind: Service
metadata: {{name: auth-b, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80, targetPort: 9002}}]
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: authn, namespace: {ns}}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {name}}}]
  extAuth: {{extensionRef: {{name: auth}}}}
"
            ),
        )
        .inputs,
    );
    inputs.extend(extension("auth-a"));
    let mut run = Run::new();
    run.step("initial", &inputs);

    // Another auth server: no route's policy changed, every Gateway
    // assembled again (the comparison with a full translation sees a
    // Gateway that kept the old filter config).
    inputs.gateway_extensions[0] = extension("auth-b").gateway_extensions.remove(0);
    let stats = run.step("the extension's auth server changed", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 0), "{stats:?}");
    assert_eq!(stats.gateways_reused, 0, "{stats:?}");

    // An auth server that does not exist: the route using it answers 500.
    inputs.gateway_extensions[0] = extension("missing").gateway_extensions.remove(0);
    let stats = run.step("the extension's auth server missing", &inputs);
    assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
}
