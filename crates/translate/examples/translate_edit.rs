//! One route edited at N routes (default 10,000): the time of a full
//! translation and of an incremental one ([`translate::incremental`]) of the
//! same inputs, in the same run, alternating, over K edits (default 30);
//! prints the medians and the incremental translator's reuse counts, and
//! checks that both outputs are equal at every edit.
//!
//! `cargo run --release -p translate --example translate_edit -- 10000 30`
//! (`PORTCULLIS_THREADS=n` as `translate_scale`). A third argument `inc`
//! runs only the incremental translations (for a profiler: `perf record`
//! sees no full translation; the outputs are then not compared). A third
//! argument `copied` times, instead of the full translation, a second
//! incremental translator fed the same inputs with every object copied
//! (each snapshot its own objects, as before they were shared, see
//! `api::Sourced`): the cost of comparing unchanged objects field by
//! field rather than by pointer, alternating with the shared run.
//! A third argument `insert` (or `insert-inc`, only the incremental ones)
//! adds a route per edit instead of editing one ([`insert_route`]: in the
//! middle of the input order).
//!
//! A third argument `add` runs the propagation bench's shape instead
//! (`portcullis/benches/propagation.rs`: one Gateway, one HTTP listener,
//! N one-rule routes each with its own hostname, so one route
//! configuration of N virtual hosts) and each edit ADDS a route (`new<k>`,
//! after the others in input order, as a new file sorts after
//! `existing.yaml`; its host sorts before theirs). `wide` is that shape
//! with one route's hostname-less path edited instead (the route's only
//! rule gets a path match). A fourth argument `inc` with either runs only
//! the incremental translations.
//!
//! A third argument `endpoints` (or `endpoints-inc`) edits one Service's
//! EndpointSlice per edit instead (a new address: pods coming and going),
//! in the default shape; the full translation beside it is what such an
//! edit cost before it stopped being a context change
//! (`translate::incremental` module doc, "EndpointSlice edits").
//!
//! A third argument `service` (or `service-inc`) edits one Service per
//! edit (a new label, as Kubernetes' controllers and users annotate them),
//! in the default shape: the routes that name it are rebuilt
//! (`translate::incremental` module doc, "Services"); the full translation
//! beside it is what such an edit cost while Services were context.
//!
//! A third argument `policy` (or `policy-inc`) moves one TrafficPolicy (a
//! response header) to another route per edit, with a new value, in the
//! default shape: the route it left and the route it reached are rebuilt
//! (`translate::incremental` module doc, "TrafficPolicies").
//!
//! A third argument `gateway` (or `gateway-inc`) edits one Gateway per
//! edit, in the default shape: a listener `extra` on a new port replaces
//! the one it had (a platform team adding a listener to a shared
//! Gateway); the routes naming that Gateway are kept, as they name
//! listeners whose state did not change by sectionName, and the Gateway is
//! assembled again (`translate::incremental` module doc, "Gateways and
//! ListenerSets"); the full translation beside it is what such an edit
//! cost while Gateways were context.
//!
//! `PORTCULLIS_EDIT_POLICIES=n` adds n TrafficPolicies to the inputs, each
//! on a route of its own (one in three unreadable, fencing its route, as
//! a tenant's typo does), that no edit touches: what standing policies
//! cost an edit that is not theirs. Not with `policy`, which replaces them.

/// The allocator of the `portcullis` binary (which runs this library), so
/// the figures are the product's.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::sync::Arc;
use std::time::Instant;

use testkit::generate::{Shape, manifests};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let edits: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let mode = args.next();
    let insert_mode = matches!(mode.as_deref(), Some("insert" | "insert-inc"));
    let endpoints_mode = matches!(mode.as_deref(), Some("endpoints" | "endpoints-inc"));
    let service_mode = matches!(mode.as_deref(), Some("service" | "service-inc"));
    let policy_mode = matches!(mode.as_deref(), Some("policy" | "policy-inc"));
    let gateway_mode = matches!(mode.as_deref(), Some("gateway" | "gateway-inc"));
    let add_mode = mode.as_deref() == Some("add");
    let wide = add_mode || mode.as_deref() == Some("wide");
    let only_incremental = matches!(
        mode.as_deref(),
        Some("inc" | "insert-inc" | "endpoints-inc" | "service-inc" | "policy-inc" | "gateway-inc")
    ) || (wide && args.next().as_deref() == Some("inc"));
    let copied_mode = mode.as_deref() == Some("copied");
    let text = if wide {
        wide_manifests(n)
    } else {
        manifests(Shape::with_routes(n))
    };
    let loaded = api::loader::load_str("scale.yaml", &text);
    let mut settings = translate::Settings {
        parallelism: std::env::var("PORTCULLIS_THREADS")
            .ok()
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    };
    let mut inputs = loaded.inputs;
    let standing: usize = std::env::var("PORTCULLIS_EDIT_POLICIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if standing > 0 {
        inputs.traffic_policies = standing_policies(&inputs, standing);
    }
    let mut translator = translate::incremental::Translator::new();
    let t = Instant::now();
    let first = translator.translate(Arc::new(inputs.clone()), &settings, translate::Seams::default());
    let mut copied_translator = translate::incremental::Translator::new();
    if copied_mode {
        drop(copied_translator.translate(Arc::new(copied(&inputs)), &settings, translate::Seams::default()));
    }
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(first);
    let (mut full, mut inc) = (Vec::new(), Vec::new());
    let mut expected_built = usize::from(!endpoints_mode);
    for e in 0..edits {
        if add_mode {
            let name = format!("new{e}");
            let added = api::loader::load_str(&format!("{name}.yaml"), &wide_route(&name, None));
            inputs.http_routes.extend(added.inputs.http_routes);
        } else if wide {
            let ri = (e * 7919) % inputs.http_routes.len();
            let name = format!("r{ri}");
            let edited =
                api::loader::load_str("existing.yaml", &wide_route(&name, Some(&format!("/edited/{e}"))));
            if let Some(r) = edited.inputs.http_routes.into_iter().next() {
                inputs.http_routes[ri].object = r.object;
            }
        } else if insert_mode {
            let ri = (e * 7919) % inputs.http_routes.len();
            insert_route(&mut inputs, ri, e);
        } else if policy_mode {
            let meta = &inputs.http_routes[(e * 7919) % inputs.http_routes.len()]
                .object
                .metadata;
            let (ns, name) = (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            let policy = api::loader::load_str(
                "policy.yaml",
                &format!(
                    "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: moving, namespace: {ns}}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {name}}}]\n  headerModifiers: {{response: {{set: [{{name: x-edit, value: \"{e}\"}}]}}}}\n"
                ),
            );
            inputs.traffic_policies = policy.inputs.traffic_policies;
            // The route it reached last edit and the one it reaches now.
            expected_built = if e == 0 { 1 } else { 2 };
        } else if gateway_mode {
            let gi = e % inputs.gateways.len();
            let gw = Arc::make_mut(&mut inputs.gateways[gi].object);
            gw.spec.listeners.retain(|l| l.name != "extra");
            let mut extra = gw.spec.listeners[0].clone();
            extra.name = "extra".into();
            extra.port = 9000 + i32::try_from(e).unwrap_or(0);
            gw.spec.listeners.push(extra);
            // Every generated route names a listener of its Gateway by
            // sectionName, and the listener added on its own port changes
            // no other listener's state: none is rebuilt, the Gateway is
            // assembled again.
            expected_built = 0;
        } else if service_mode {
            let si = (e * 7919) % inputs.services.len();
            let meta = &mut Arc::make_mut(&mut inputs.services[si].object).metadata;
            meta.labels = Some([("edit".to_string(), e.to_string())].into());
            let (ns, name) = (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            expected_built = testkit::generate::routes_naming(&inputs, &ns, &name);
        } else if endpoints_mode {
            // Copy on write, as a route edit: the held snapshot keeps the old slice.
            let si = (e * 7919) % inputs.endpoint_slices.len();
            let slice = Arc::make_mut(&mut inputs.endpoint_slices[si].object);
            if let Some(first) = slice.endpoints.as_mut().and_then(|e| e.first_mut()) {
                first.addresses = vec![format!("127.1.{}.{}", e / 250, 1 + e % 250)];
            }
        } else {
            // One route's first path match gets a new value.
            let ri = (e * 7919) % inputs.http_routes.len();
            // Copy on write: the snapshot the translator holds keeps the old
            // route; every other route stays shared between the two.
            testkit::generate::set_first_path(&mut inputs, ri, &format!("/edited/{e}"));
        }
        // A new transition time per edit, as `serve` stamps each
        // translation with its own.
        settings.transition_time = format!(
            "2026-01-01T{:02}:{:02}:{:02}Z",
            e / 3600 % 24,
            e / 60 % 60,
            e % 60
        );
        let held = Arc::new(inputs.clone());
        let a = (copied_mode).then(|| {
            let held = Arc::new(copied(&inputs));
            let t = Instant::now();
            let a = copied_translator.translate(held, &settings, translate::Seams::default());
            full.push(t.elapsed().as_secs_f64() * 1e3);
            drop(copied_translator.retire());
            a
        });
        let a = a.or_else(|| {
            (!only_incremental).then(|| {
                let t = Instant::now();
                let a = translate::translate(&inputs, &settings);
                full.push(t.elapsed().as_secs_f64() * 1e3);
                a
            })
        });
        let t = Instant::now();
        let b = translator.translate(held, &settings, translate::Seams::default());
        inc.push(t.elapsed().as_secs_f64() * 1e3);
        // As `serve` may: the previous snapshot freed after the output is
        // published, not inside the timed translation.
        drop(translator.retire());
        if let Some(a) = a {
            assert!(
                a == b,
                "edit {e}: the incremental output differs from the full one"
            );
        }
        let s = translator.stats();
        assert!(
            s.full.is_none() && s.routes_built == expected_built,
            "edit {e}: expected {expected_built} route(s) rebuilt, got {s:?}"
        );
    }
    let s = translator.stats();
    println!(
        "routes={n} edits={edits} first_ms={first_ms:.1} {}_median_ms={:.1} incremental_median_ms={:.1} routes_built={} routes_reused={} models_read={} gateways_reused={} hosts_spliced={} hosts_encoded={} hosts_merged={} works_merged={} assignments_rebuilt={}",
        if copied_mode { "copied" } else { "full" },
        median(&mut full),
        median(&mut inc),
        s.routes_built,
        s.routes_reused,
        s.models_read,
        s.gateways_reused,
        s.hosts_spliced,
        s.hosts_encoded,
        s.hosts_merged,
        s.works_merged,
        s.assignments_rebuilt
    );
}

/// `n` TrafficPolicies on routes spread over the inputs (route `k * 7907`
/// for policy `k`, away from the edited ones, `e * 7919`), one in three
/// with a misspelt field: it fences the route it targets.
fn standing_policies(inputs: &api::Inputs, n: usize) -> Vec<api::Sourced<api::policy::TrafficPolicy>> {
    let mut text = String::new();
    for k in 0..n {
        let meta = &inputs.http_routes[(k * 7907 + 1) % inputs.http_routes.len()]
            .object
            .metadata;
        let (ns, name) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let field = if k % 3 == 2 {
            "headerModifierz"
        } else {
            "headerModifiers"
        };
        text.push_str(&format!(
            "---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: standing-{k}, namespace: {ns}}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {name}}}]\n  {field}: {{response: {{set: [{{name: x-standing, value: \"{k}\"}}]}}}}\n"
        ));
    }
    api::loader::load_str("standing-policies.yaml", &text)
        .inputs
        .traffic_policies
}

/// Adds a copy of HTTPRoute `ri` named `added-{e}`, with its own first
/// path, before it (every other route stays shared with the previous
/// snapshot).
fn insert_route(inputs: &mut api::Inputs, ri: usize, e: usize) {
    let mut route = inputs.http_routes[ri].clone();
    Arc::make_mut(&mut route.object).metadata.name = Some(format!("added-{e}"));
    inputs.http_routes.insert(ri, route);
    testkit::generate::set_first_path(inputs, ri, &format!("/added/{e}"));
}

/// The propagation bench's inputs: one Gateway with one HTTP listener,
/// one Service, `n` routes `r<i>` each with its own hostname.
fn wide_manifests(n: usize) -> String {
    let mut s = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: c}\nspec: {controllerName: portcullis.dev/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\nspec:\n  gatewayClassName: c\n  listeners: [{name: http, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: echo, namespace: app}\nspec:\n  ports: [{name: http, port: 80, targetPort: 9000}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: echo-1, namespace: app, labels: {kubernetes.io/service-name: echo}}\naddressType: IPv4\nports: [{name: http, port: 9000}]\nendpoints: [{addresses: [\"127.0.0.1\"]}]\n",
    );
    for i in 0..n {
        s.push_str("---\n");
        s.push_str(&wide_route(&format!("r{i}"), None));
    }
    s
}

/// One route of [`wide_manifests`], as the propagation bench writes it;
/// with `path`, its rule matches that path prefix.
fn wide_route(name: &str, path: Option<&str>) -> String {
    let matches = path
        .map(|p| format!("    matches: [{{path: {{type: PathPrefix, value: \"{p}\"}}}}]\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [\"{name}.example.com\"]\n  rules:\n  - backendRefs: [{{name: echo, port: 80}}]\n{matches}"
    )
}

/// `inputs` with every object copied into an allocation of its own.
fn copied(inputs: &api::Inputs) -> api::Inputs {
    fn each<T: Clone>(v: &[api::Sourced<T>]) -> Vec<api::Sourced<T>> {
        v.iter()
            .map(|s| api::Sourced {
                object: Arc::new(T::clone(&s.object)),
                ..s.clone()
            })
            .collect()
    }
    let api::Inputs {
        gateway_classes,
        gateways,
        listener_sets,
        http_routes,
        grpc_routes,
        reference_grants,
        namespaces,
        services,
        endpoint_slices,
        secrets,
        traffic_policies,
        gateway_extensions,
        gateway_parameters,
        http_proxies,
        tls_certificate_delegations,
        extension_resources,
        provisioned_addresses,
    } = inputs;
    api::Inputs {
        gateway_classes: each(gateway_classes),
        gateways: each(gateways),
        listener_sets: each(listener_sets),
        http_routes: each(http_routes),
        grpc_routes: each(grpc_routes),
        reference_grants: each(reference_grants),
        namespaces: each(namespaces),
        services: each(services),
        endpoint_slices: each(endpoint_slices),
        secrets: each(secrets),
        traffic_policies: each(traffic_policies),
        gateway_extensions: each(gateway_extensions),
        gateway_parameters: each(gateway_parameters),
        http_proxies: each(http_proxies),
        tls_certificate_delegations: each(tls_certificate_delegations),
        extension_resources: each(extension_resources),
        provisioned_addresses: provisioned_addresses.clone(),
    }
}
