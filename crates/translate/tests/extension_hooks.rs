//! Extension hooks in the pipeline (ARCHITECTURE.md §3, `extension/`):
//! an in-process [`Hooks`] implementation stands in for the extension
//! server. Each case checks the xDS, the status, and that the real Envoy
//! accepts the whole output (`envoy --mode validate` on the static
//! bootstrap, as the fixture test does).

#[allow(dead_code)] // `calls` is for the fixture test
#[path = "support/real_envoy.rs"]
mod real_envoy;

use std::collections::BTreeSet;
use std::sync::Mutex;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, VirtualHost, route, route_action, route_match,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use serde_json::Value;
use translate::error::ErrorClass;
use translate::extension::{
    ClusterCall, EndpointsCall, GroupKind, Hook, HookError, HookFailure, Hooks, ListenerCall, Registration,
    Reply, RouteCall, TranslateCall, TranslateReply, VirtualHostCall,
};
use translate::output::bootstrap;

const INPUT: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ext, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [ext.example.com]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /ext}
    - path: {type: Exact, value: /other}
    filters:
    - type: ExtensionRef
      extensionRef: {group: example.io, kind: HeaderFilter, name: hf}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: plain, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [plain.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /plain}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mixed, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [mixed.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /b}}]
    filters:
    - type: ExtensionRef
      extensionRef: {group: example.io, kind: HeaderFilter, name: hf}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: pol, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [pol.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /pol}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: example.io/v1alpha1
kind: HeaderFilter
metadata: {name: hf, namespace: app}
spec: {header: x-ext}
---
apiVersion: example.io/v1alpha1
kind: ExtPolicy
metadata: {name: on-route, namespace: app}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: pol}]
---
apiVersion: example.io/v1alpha1
kind: ExtPolicy
metadata: {name: on-gateway, namespace: infra}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: http}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: app
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [127.0.0.1]}]
"#;

const GW: &str = "infra/gw";
const EXT_ROUTE: &str = "httproute/app/ext/rule/0/match/0";
const PLAIN_ROUTE: &str = "httproute/app/plain/rule/0/match/0";
const EXT_HOST: &str = "infra/gw/80/ext.example.com";

type F<C, T> = Box<dyn Fn(&C) -> Reply<T> + Sync>;

/// An extension server in-process: one closure per hook, every call
/// recorded.
struct TestHooks {
    registration: Registration,
    route: F<RouteCall, Route>,
    virtual_host: F<VirtualHostCall, VirtualHost>,
    listener: F<ListenerCall, Listener>,
    translate: F<TranslateCall, TranslateReply>,
    cluster: F<ClusterCall, Cluster>,
    endpoints: F<EndpointsCall, ClusterLoadAssignment>,
    cluster_calls: Mutex<Vec<ClusterCall>>,
    route_calls: Mutex<Vec<RouteCall>>,
    listener_calls: Mutex<Vec<ListenerCall>>,
    batches: Mutex<Vec<(Hook, usize)>>,
}

fn registration(hooks: &[Hook]) -> Registration {
    let gk = |kind: &str| GroupKind {
        group: "example.io".into(),
        kind: kind.into(),
    };
    Registration {
        resources: [gk("HeaderFilter")].into(),
        policy_resources: [gk("ExtPolicy")].into(),
        backend_resources: [gk("Backend")].into(),
        hooks: hooks.iter().copied().collect(),
        ..Default::default()
    }
}

impl TestHooks {
    fn new(hooks: &[Hook]) -> Self {
        Self {
            registration: registration(hooks),
            route: Box::new(|_| Ok(None)),
            virtual_host: Box::new(|_| Ok(None)),
            listener: Box::new(|_| Ok(None)),
            translate: Box::new(|_| Ok(None)),
            cluster: Box::new(|_| Ok(None)),
            endpoints: Box::new(|_| Ok(None)),
            cluster_calls: Mutex::default(),
            route_calls: Mutex::default(),
            listener_calls: Mutex::default(),
            batches: Mutex::default(),
        }
    }

    fn batch(&self, hook: Hook, n: usize) {
        self.batches.lock().expect("lock").push((hook, n));
    }
}

impl Hooks for TestHooks {
    fn registration(&self) -> &Registration {
        &self.registration
    }
    fn post_route_modify(&self, calls: Vec<RouteCall>) -> Vec<Reply<Route>> {
        self.batch(Hook::Route, calls.len());
        let out = calls.iter().map(|c| (self.route)(c)).collect();
        self.route_calls.lock().expect("lock").extend(calls);
        out
    }
    fn post_virtual_host_modify(&self, calls: Vec<VirtualHostCall>) -> Vec<Reply<VirtualHost>> {
        self.batch(Hook::VirtualHost, calls.len());
        calls.iter().map(|c| (self.virtual_host)(c)).collect()
    }
    fn post_http_listener_modify(&self, calls: Vec<ListenerCall>) -> Vec<Reply<Listener>> {
        self.batch(Hook::HttpListener, calls.len());
        let out = calls.iter().map(|c| (self.listener)(c)).collect();
        self.listener_calls.lock().expect("lock").extend(calls);
        out
    }
    fn post_cluster_modify(&self, calls: Vec<ClusterCall>) -> Vec<Reply<Cluster>> {
        self.batch(Hook::Cluster, calls.len());
        let out = calls.iter().map(|c| (self.cluster)(c)).collect();
        self.cluster_calls.lock().expect("lock").extend(calls);
        out
    }
    fn post_endpoints_modify(&self, calls: Vec<EndpointsCall>) -> Vec<Reply<ClusterLoadAssignment>> {
        self.batch(Hook::Endpoints, calls.len());
        calls.iter().map(|c| (self.endpoints)(c)).collect()
    }
    fn post_translate_modify(&self, call: TranslateCall) -> Reply<TranslateReply> {
        self.batch(Hook::Translation, 1);
        (self.translate)(&call)
    }
}

fn options() -> api::loader::Options {
    // What the edge does with the configured registration.
    translate::extension::resources::loader_options(&registration(&[]))
}

fn inputs() -> api::Inputs {
    let loaded = api::loader::load_str_with("ext.yaml", INPUT, &options());
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    loaded.inputs
}

fn run(hooks: &TestHooks) -> translate::Output {
    translate::translate_seams(
        &inputs(),
        &translate::Settings::default(),
        translate::Seams {
            validator: None,
            hooks: Some(hooks),
        },
    )
}

fn failure(hook: Hook, fail_open: bool) -> HookError {
    HookError {
        manager: "ext.example:9443".into(),
        failure: HookFailure::Status {
            hook,
            code: "Unavailable".into(),
            message: "boom".into(),
        },
        fail_open,
    }
}

fn configs(out: &translate::Output) -> Vec<RouteConfiguration> {
    out.gateways[GW].route_configurations()
}

fn host(out: &translate::Output, name: &str) -> VirtualHost {
    configs(out)
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .find(|vh| vh.name == name)
        .unwrap_or_else(|| panic!("no virtual host {name}"))
}

fn envoy_route(out: &translate::Output, name: &str) -> Route {
    configs(out)
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .flat_map(|vh| vh.routes)
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route {name}"))
}

fn is_500(r: &Route) -> bool {
    matches!(&r.action, Some(route::Action::DirectResponse(d)) if d.status == 500)
}

fn forwards(r: &Route) -> bool {
    matches!(&r.action, Some(route::Action::Route(_)))
}

fn route_status(out: &translate::Output, name: &str) -> Value {
    let s = out
        .status
        .iter()
        .find(|s| s.kind == "HTTPRoute" && s.metadata.name == name)
        .expect("route status");
    translate::status::Timed::new(&s.status, &out.transition_time).to_json()
}

fn condition(status: &Value, type_: &str) -> Value {
    status["parents"][0]["conditions"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null)
}

/// What the route's status says of replaced rules: `PartiallyInvalid`
/// when other rules serve, `Accepted=False` when every rule is replaced.
fn replaced_message(out: &translate::Output, name: &str) -> String {
    let st = route_status(out, name);
    let pi = condition(&st, "PartiallyInvalid");
    let c = if pi.is_null() {
        condition(&st, "Accepted")
    } else {
        pi
    };
    assert_eq!(
        c["status"],
        if c["type"] == "Accepted" { "False" } else { "True" },
        "{c}"
    );
    let m = c["message"].as_str().unwrap_or_default().to_string();
    assert!(m.contains("Replaced Rule (0)"), "{m}");
    m
}

fn listener_condition(out: &translate::Output, listener: &str, type_: &str) -> Value {
    let s = out
        .status
        .iter()
        .find(|s| s.kind == "Gateway")
        .expect("gateway status");
    let v = translate::status::Timed::new(&s.status, &out.transition_time).to_json();
    v["listeners"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|l| l["name"] == listener)
        .and_then(|l| {
            l["conditions"]
                .as_array()
                .expect("a list")
                .iter()
                .find(|c| c["type"] == type_)
                .cloned()
        })
        .unwrap_or(Value::Null)
}

/// The real Envoy accepts every Gateway's resources.
fn envoy_accepts(out: &translate::Output) {
    for (key, gw) in &out.gateways {
        let b = bootstrap::static_bootstrap(gw, key, &Default::default());
        if let Err(e) = testkit::envoy::validate(&b) {
            panic!("Envoy rejected the xDS of Gateway {key}: {e}");
        }
    }
}

fn header(route: &Route, key: &str) -> Option<String> {
    route
        .response_headers_to_add
        .iter()
        .filter_map(|h| h.header.as_ref())
        .find(|h| h.key == key)
        .map(|h| h.value.clone())
}

fn add_header(mut r: Route, key: &str, value: &str) -> Route {
    r.response_headers_to_add.push(HeaderValueOption {
        header: Some(HeaderValue {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    r
}

#[test]
fn registered_kinds_load_as_json_and_unregistered_stay_unknown() {
    let loaded = api::loader::load_str_with("ext.yaml", INPUT, &options());
    let names: Vec<(String, String, String)> = loaded
        .inputs
        .extension_resources
        .iter()
        .map(|r| {
            (
                r.object.kind.clone(),
                r.object.namespace.clone(),
                r.object.name.clone(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("HeaderFilter".into(), "app".into(), "hf".into()),
            ("ExtPolicy".into(), "app".into(), "on-route".into()),
            ("ExtPolicy".into(), "infra".into(), "on-gateway".into()),
        ]
    );
    let json: Value =
        serde_json::from_slice(&loaded.inputs.extension_resources[0].object.json).expect("JSON");
    assert_eq!(json["spec"]["header"], "x-ext");
    assert_eq!(json["metadata"]["namespace"], "app");
    // Without registered kinds: today's behaviour.
    let plain = api::loader::load_str("ext.yaml", INPUT);
    assert!(plain.inputs.extension_resources.is_empty());
    let unknown = plain
        .diagnostics
        .iter()
        .filter(|d| d.message.starts_with("unknown kind example.io/v1alpha1/"))
        .count();
    assert_eq!(unknown, 3, "{:#?}", plain.diagnostics);
}

#[test]
fn route_hook_adds_a_header_only_where_extension_resources_are_used() {
    let mut hooks = TestHooks::new(&[Hook::Route]);
    hooks.route = Box::new(|c| Ok(Some(add_header(c.route.clone(), "x-ext", &c.route.name))));
    let out = run(&hooks);
    let ext = envoy_route(&out, EXT_ROUTE);
    assert!(forwards(&ext), "{ext:?}");
    assert_eq!(header(&ext, "x-ext").as_deref(), Some(EXT_ROUTE));
    assert_eq!(header(&envoy_route(&out, PLAIN_ROUTE), "x-ext"), None);
    // Rule 0 of `mixed` uses no extension resource: untouched.
    assert_eq!(
        header(&envoy_route(&out, "httproute/app/mixed/rule/0/match/0"), "x-ext"),
        None
    );
    assert!(header(&envoy_route(&out, "httproute/app/mixed/rule/1/match/0"), "x-ext").is_some());
    assert_eq!(
        condition(&route_status(&out, "ext"), "Accepted")["status"],
        "True"
    );
    assert!(out.replacements.is_empty(), "{:?}", out.replacements);
    envoy_accepts(&out);
}

#[test]
fn route_hook_is_called_once_per_gateway_only_for_routes_using_extension_resources_or_policies() {
    let hooks = TestHooks::new(&[Hook::Route]);
    let out = run(&hooks);
    assert!(!out.gateways.is_empty());
    let calls = hooks.route_calls.lock().expect("lock");
    let names: BTreeSet<&str> = calls.iter().map(|c| c.route.name.as_str()).collect();
    assert_eq!(
        names,
        [
            EXT_ROUTE,
            "httproute/app/ext/rule/0/match/1",
            "httproute/app/mixed/rule/1/match/0",
            "httproute/app/pol/rule/0/match/0",
        ]
        .into()
    );
    assert_eq!(calls.len(), 4, "one call per Envoy route");
    // One batch for the one Gateway.
    assert_eq!(*hooks.batches.lock().expect("lock"), [(Hook::Route, 4)]);
    let ext = calls
        .iter()
        .find(|c| c.route.name == EXT_ROUTE)
        .expect("a call for the route");
    assert_eq!(ext.hostnames, ["ext.example.com"]);
    assert_eq!(ext.extension_resources.len(), 1);
    let res: Value = serde_json::from_slice(&ext.extension_resources[0].unstructured_bytes).expect("JSON");
    assert_eq!(
        (res["kind"].as_str(), res["metadata"]["name"].as_str()),
        (Some("HeaderFilter"), Some("hf"))
    );
    assert!(ext.extension_policies.is_empty());
    let pol = calls
        .iter()
        .find(|c| c.route.name.starts_with("httproute/app/pol/"))
        .expect("a call for the policy-targeted route");
    assert!(pol.extension_resources.is_empty());
    assert_eq!(pol.extension_policies.len(), 1);
    let p: Value = serde_json::from_slice(&pol.extension_policies[0].unstructured_bytes).expect("JSON");
    assert_eq!(p["metadata"]["name"], "on-route");
}

#[test]
fn nil_reply_keeps_the_route_as_generated() {
    let hooks = TestHooks::new(&[Hook::Route]);
    let out = run(&hooks);
    let ext = envoy_route(&out, EXT_ROUTE);
    assert!(forwards(&ext), "{ext:?}");
    assert!(ext.response_headers_to_add.is_empty());
    envoy_accepts(&out);
}

#[test]
fn failed_route_hook_replaces_that_route_with_the_500_keeping_its_match() {
    let mut hooks = TestHooks::new(&[Hook::Route]);
    hooks.route = Box::new(|c| {
        if c.route.name == EXT_ROUTE {
            Err(failure(Hook::Route, false))
        } else {
            Ok(None)
        }
    });
    let out = run(&hooks);
    let ext = envoy_route(&out, EXT_ROUTE);
    assert!(is_500(&ext), "{ext:?}");
    assert_eq!(
        ext.r#match.as_ref().and_then(|m| m.path_specifier.clone()),
        Some(route_match::PathSpecifier::PathSeparatedPrefix("/ext".into()))
    );
    // The other match of the same rule, and every other route, serve.
    assert!(forwards(&envoy_route(&out, "httproute/app/ext/rule/0/match/1")));
    assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)));
    let message = replaced_message(&out, "ext");
    assert!(
        message.contains("PostRouteModify") && message.contains("ext.example:9443"),
        "{message}"
    );
    assert_eq!(out.replacements.len(), 1, "{:?}", out.replacements);
    assert_eq!(out.replacements[0].class, ErrorClass::Extension);
    assert_eq!(out.replacements[0].route_name, "ext");
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.message.contains("PostRouteModify") && d.message.contains("[extension]")),
        "{:#?}",
        out.diagnostics
    );
    envoy_accepts(&out);
}

#[test]
fn fail_open_route_hook_keeps_the_unmodified_route_and_warns() {
    let mut hooks = TestHooks::new(&[Hook::Route]);
    hooks.route = Box::new(|_| Err(failure(Hook::Route, true)));
    let out = run(&hooks);
    assert!(forwards(&envoy_route(&out, EXT_ROUTE)));
    assert!(out.replacements.is_empty());
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.severity == api::Severity::Warning
                && d.message.contains("PostRouteModify")
                && d.message.contains("failOpen")),
        "{:#?}",
        out.diagnostics
    );
    envoy_accepts(&out);
}

#[test]
fn a_reply_envoy_would_reject_is_a_failed_hook_for_that_route() {
    let unmodified = run(&TestHooks::new(&[Hook::Route]));
    for (what, bad) in [
        (
            "regex",
            Box::new(|mut r: Route| {
                if let Some(m) = r.r#match.as_mut() {
                    m.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                        regex: "/ext(".into(),
                        ..Default::default()
                    }));
                }
                r
            }) as Box<dyn Fn(Route) -> Route + Sync>,
        ),
        (
            "unknown type URL",
            Box::new(|mut r: Route| {
                r.typed_per_filter_config.insert(
                    "example.filter".into(),
                    Any {
                        type_url: "type.googleapis.com/example.NotAnEnvoyType".into(),
                        value: Vec::new(),
                    },
                );
                r
            }),
        ),
        (
            "header name",
            Box::new(|r: Route| add_header(r, "bad\nheader", "v")),
        ),
        (
            "format string",
            Box::new(|r: Route| add_header(r, "x-f", "%NOT_A_COMMAND%")),
        ),
        (
            "no action",
            Box::new(|mut r: Route| {
                r.action = None;
                r
            }),
        ),
        (
            "empty cluster name (PGV)",
            Box::new(|mut r: Route| {
                if let Some(route::Action::Route(a)) = r.action.as_mut() {
                    a.cluster_specifier = Some(route_action::ClusterSpecifier::Cluster(String::new()));
                }
                r
            }),
        ),
        (
            "undefined enum value (PGV)",
            Box::new(|mut r: Route| {
                if let Some(route::Action::Route(a)) = r.action.as_mut() {
                    a.priority = 7;
                }
                r
            }),
        ),
    ] {
        // The real Envoy does reject the reply as the extension sent it.
        let mut raw = translate::GatewayXds::clone(&unmodified.gateways[GW]);
        for rc in &mut raw.routes {
            rc.edit(|rc| {
                for r in rc.virtual_hosts.iter_mut().flat_map(|vh| &mut vh.routes) {
                    if r.name == EXT_ROUTE {
                        *r = bad(r.clone());
                    }
                }
            });
        }
        let b = bootstrap::static_bootstrap(&raw, GW, &Default::default());
        assert!(
            testkit::envoy::validate(&b).is_err(),
            "{what}: Envoy accepts it after all"
        );

        let mut hooks = TestHooks::new(&[Hook::Route]);
        hooks.route = Box::new(move |c| Ok(Some(bad(c.route.clone()))));
        let out = run(&hooks);
        let ext = envoy_route(&out, EXT_ROUTE);
        assert!(is_500(&ext), "{what}: {ext:?}");
        assert!(ext.typed_per_filter_config.is_empty(), "{what}");
        let m = replaced_message(&out, "ext");
        assert!(m.contains("Envoy would reject it"), "{what}: {m}");
        assert!(out.replacements.iter().all(|r| r.class == ErrorClass::Extension));
        assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)), "{what}");
        envoy_accepts(&out);
    }
}

#[test]
fn extension_refs_that_do_not_resolve_are_the_500() {
    // Registered kind, no such object: the spec's 500.
    let missing = INPUT.replace("name: hf}", "name: nope}");
    let loaded = api::loader::load_str_with("ext.yaml", &missing, &options());
    let hooks = TestHooks::new(&[Hook::Route]);
    let out = translate::translate_seams(
        &loaded.inputs,
        &translate::Settings::default(),
        translate::Seams {
            validator: None,
            hooks: Some(&hooks),
        },
    );
    assert!(is_500(&envoy_route(&out, EXT_ROUTE)));
    let m = replaced_message(&out, "ext");
    assert!(m.contains("not found in namespace app"), "{m}");
    // Unregistered kind (no hooks at all): today's 500.
    let out = translate::translate(&loaded.inputs, &translate::Settings::default());
    assert!(is_500(&envoy_route(&out, EXT_ROUTE)));
    // Registered, but the Route hook is not enabled: nothing would apply
    // the filter, so it is not skipped silently.
    let hooks = TestHooks::new(&[Hook::VirtualHost]);
    let out = run(&hooks);
    assert!(is_500(&envoy_route(&out, EXT_ROUTE)));
    assert!(hooks.route_calls.lock().expect("lock").is_empty());
    envoy_accepts(&out);
}

#[test]
fn virtual_host_hook_modifies_or_fences_its_host() {
    let mut hooks = TestHooks::new(&[Hook::VirtualHost]);
    hooks.virtual_host = Box::new(|c| {
        let mut vh = c.virtual_host.clone();
        vh.response_headers_to_add.push(HeaderValueOption {
            header: Some(HeaderValue {
                key: "x-vhost".into(),
                value: vh.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        });
        Ok(Some(vh))
    });
    let out = run(&hooks);
    let vh = host(&out, EXT_HOST);
    assert_eq!(vh.response_headers_to_add.len(), 1);
    assert_eq!(*hooks.batches.lock().expect("lock"), [(Hook::VirtualHost, 4)]);
    envoy_accepts(&out);

    let mut hooks = TestHooks::new(&[Hook::VirtualHost]);
    hooks.virtual_host = Box::new(|c| {
        if c.virtual_host.name == EXT_HOST {
            Err(failure(Hook::VirtualHost, false))
        } else {
            Ok(None)
        }
    });
    let out = run(&hooks);
    let vh = host(&out, EXT_HOST);
    assert_eq!(vh.domains, ["ext.example.com"]);
    assert_eq!(vh.routes.len(), 1);
    assert!(is_500(&vh.routes[0]));
    assert_eq!(
        vh.routes[0]
            .r#match
            .as_ref()
            .and_then(|m| m.path_specifier.clone()),
        Some(route_match::PathSpecifier::Prefix("/".into()))
    );
    assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)));
    let accepted = listener_condition(&out, "http", "Accepted");
    assert_eq!(
        (accepted["status"].as_str(), accepted["reason"].as_str()),
        (Some("False"), Some("ListenerReplaced"))
    );
    assert!(
        accepted["message"]
            .as_str()
            .expect("a string")
            .contains("PostVirtualHostModify"),
        "{accepted}"
    );
    assert_eq!(out.scope_replacements.len(), 1, "{:?}", out.scope_replacements);
    assert_eq!(out.scope_replacements[0].class, ErrorClass::Extension);
    assert_eq!(out.scope_replacements[0].names, [EXT_HOST]);
    envoy_accepts(&out);
}

#[test]
fn virtual_host_reply_with_an_invalid_route_is_fenced() {
    let mut hooks = TestHooks::new(&[Hook::VirtualHost]);
    hooks.virtual_host = Box::new(|c| {
        let mut vh = c.virtual_host.clone();
        if let Some(r) = vh.routes.first_mut()
            && let Some(m) = r.r#match.as_mut()
        {
            m.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: "a{1001}".into(),
                ..Default::default()
            }));
        }
        Ok(Some(vh))
    });
    let out = run(&hooks);
    for rc in configs(&out) {
        for vh in rc.virtual_hosts {
            assert!(vh.routes.len() == 1 && is_500(&vh.routes[0]), "{vh:?}");
        }
    }
    assert!(
        out.scope_replacements
            .iter()
            .all(|s| s.message.contains("Envoy would reject it"))
    );
    envoy_accepts(&out);
}

#[test]
fn listener_hook_modifies_the_listener_or_fences_its_traffic() {
    let mut hooks = TestHooks::new(&[Hook::HttpListener]);
    hooks.listener = Box::new(|c| {
        let mut l = c.listener.clone();
        l.per_connection_buffer_limit_bytes = Some(UInt32Value { value: 12345 });
        Ok(Some(l))
    });
    let out = run(&hooks);
    let l = &out.gateways[GW].listeners[0];
    assert_eq!(
        l.per_connection_buffer_limit_bytes,
        Some(UInt32Value { value: 12345 })
    );
    // The listener context carries the policy that targets its Gateway listener.
    let calls = hooks.listener_calls.lock().expect("lock");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].extension_resources.len(), 1);
    let p: Value = serde_json::from_slice(&calls[0].extension_resources[0].unstructured_bytes).expect("JSON");
    assert_eq!(p["metadata"]["name"], "on-gateway");
    drop(calls);
    envoy_accepts(&out);

    let mut hooks = TestHooks::new(&[Hook::HttpListener]);
    hooks.listener = Box::new(|_| Err(failure(Hook::HttpListener, false)));
    let out = run(&hooks);
    let l = &out.gateways[GW].listeners[0];
    assert_eq!(l.name, "infra/gw/80", "the listener keeps listening");
    assert_eq!(l.per_connection_buffer_limit_bytes, None);
    let rcs = configs(&out);
    assert_eq!(rcs.len(), 1);
    assert_eq!(rcs[0].virtual_hosts.len(), 1);
    assert_eq!(rcs[0].virtual_hosts[0].domains, ["*"]);
    assert!(is_500(&rcs[0].virtual_hosts[0].routes[0]));
    let accepted = listener_condition(&out, "http", "Accepted");
    assert_eq!(accepted["reason"], "ListenerReplaced");
    assert!(
        accepted["message"]
            .as_str()
            .expect("a string")
            .contains("PostHTTPListenerModify"),
        "{accepted}"
    );
    envoy_accepts(&out);

    // A reply that renames the listener is refused as a failed hook.
    let mut hooks = TestHooks::new(&[Hook::HttpListener]);
    hooks.listener = Box::new(|c| {
        let mut l = c.listener.clone();
        l.name = "elsewhere".into();
        Ok(Some(l))
    });
    let out = run(&hooks);
    assert_eq!(out.gateways[GW].listeners[0].name, "infra/gw/80");
    assert!(is_500(&configs(&out)[0].virtual_hosts[0].routes[0]));
    envoy_accepts(&out);
}

fn static_cluster(name: &str) -> Cluster {
    use envoy_types::pb::envoy::config::cluster::v3::cluster;
    use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
    use envoy_types::pb::envoy::config::endpoint::v3::{
        Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
    };
    Cluster {
        name: name.into(),
        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration { seconds: 1, nanos: 0 }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(Address {
                            address: Some(address::Address::SocketAddress(SocketAddress {
                                address: "127.0.0.1".into(),
                                port_specifier: Some(socket_address::PortSpecifier::PortValue(9999)),
                                ..Default::default()
                            })),
                        }),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn translate_hook_replaces_clusters_or_keeps_ours_when_it_fails() {
    let mut hooks = TestHooks::new(&[Hook::Translation]);
    hooks.translate = Box::new(|c| {
        let mut clusters = c.clusters.clone();
        clusters.push(static_cluster("ext/authz"));
        Ok(Some(TranslateReply {
            clusters,
            secrets: c.secrets.clone(),
            ..Default::default()
        }))
    });
    let out = run(&hooks);
    let names: Vec<&str> = out.gateways[GW]
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert!(names.contains(&"ext/authz"), "{names:?}");
    assert!(names.len() >= 2, "ours are kept: {names:?}");
    envoy_accepts(&out);

    let ours = translate::translate(&inputs(), &translate::Settings::default());
    let mut hooks = TestHooks::new(&[Hook::Translation]);
    hooks.translate = Box::new(|_| Err(failure(Hook::Translation, false)));
    let out = run(&hooks);
    assert_eq!(out.gateways[GW].clusters, ours.gateways[GW].clusters);
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.severity == api::Severity::Error && d.message.contains("PostTranslateModify"))
    );
    assert_eq!(out.scope_replacements.len(), 1);
    assert_eq!(out.scope_replacements[0].scope, "translation");
    envoy_accepts(&out);

    // A duplicate cluster name would be a NACK: the reply is refused.
    let mut hooks = TestHooks::new(&[Hook::Translation]);
    hooks.translate = Box::new(|c| {
        let mut clusters = c.clusters.clone();
        clusters.push(static_cluster("x"));
        clusters.push(static_cluster("x"));
        Ok(Some(TranslateReply {
            clusters,
            ..Default::default()
        }))
    });
    let out = run(&hooks);
    assert_eq!(out.gateways[GW].clusters, ours.gateways[GW].clusters);
    envoy_accepts(&out);
}

/// What the in-process checks cannot see, STRICT's real Envoy does; the
/// rejection is attributed to the hook (class `extension`).
#[test]
fn strict_attributes_an_envoy_rejection_of_a_hook_reply_to_the_hook() {
    let mut hooks = TestHooks::new(&[Hook::Route]);
    hooks.route = Box::new(|c| {
        let mut r = c.route.clone();
        if c.route.name == EXT_ROUTE
            && let Some(route::Action::Route(a)) = r.action.as_mut()
        {
            // Envoy refuses both rewrites on one route (not a PGV rule:
            // beyond the in-process checks).
            a.prefix_rewrite = "/x".into();
            a.regex_rewrite = Some(
                envoy_types::pb::envoy::r#type::matcher::v3::RegexMatchAndSubstitute {
                    pattern: Some(RegexMatcher {
                        regex: "^/ext".into(),
                        ..Default::default()
                    }),
                    substitution: "/y".into(),
                },
            );
        }
        Ok(Some(r))
    });
    let envoy = real_envoy::RealEnvoy::default();
    let out = translate::translate_seams(
        &inputs(),
        &translate::Settings::default(),
        translate::Seams {
            validator: Some(&envoy),
            hooks: Some(&hooks),
        },
    );
    assert!(is_500(&envoy_route(&out, EXT_ROUTE)));
    assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)));
    let r = out
        .replacements
        .iter()
        .find(|r| r.route_name == "ext")
        .expect("the rule is reported replaced");
    assert_eq!(r.class, ErrorClass::Extension, "{r:?}");
    assert!(
        r.message.contains("PostRouteModify reply was rejected by Envoy"),
        "{}",
        r.message
    );
    envoy_accepts(&out);
}

/// A scope a policy fenced is never handed to the extension: a reply
/// could serve its traffic again.
#[test]
fn fenced_virtual_hosts_are_not_handed_to_the_extension() {
    let path = format!(
        "{}/tests/fixtures/policy-listener-http-invalid.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let input = text.split("\n# ---- expected output").next().expect("input");
    let mut hooks = TestHooks::new(&[Hook::VirtualHost]);
    // An extension that would serve everything from the first route.
    hooks.virtual_host = Box::new(|c| {
        let mut vh = c.virtual_host.clone();
        for r in &mut vh.routes {
            r.action = Some(route::Action::DirectResponse(
                envoy_types::pb::envoy::config::route::v3::DirectResponseAction {
                    status: 200,
                    ..Default::default()
                },
            ));
        }
        Ok(Some(vh))
    });
    let out = translate::translate_seams(
        &api::loader::load_str("policy.yaml", input).inputs,
        &translate::Settings::default(),
        translate::Seams {
            validator: None,
            hooks: Some(&hooks),
        },
    );
    assert_eq!(*hooks.batches.lock().expect("lock"), [(Hook::VirtualHost, 1)]);
    let a = host(&out, "infra/gw/80/a.example.com");
    assert!(a.routes.len() == 1 && is_500(&a.routes[0]), "{a:?}");
    let b = host(&out, "infra/gw/80/b.example.com");
    assert!(matches!(&b.routes[0].action, Some(route::Action::DirectResponse(d)) if d.status == 200));
    envoy_accepts(&out);
}

/// A route to an extension backend (a `backendResources` kind).
const BACKEND_INPUT: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: be, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [be.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /llm}}]
    backendRefs: [{group: example.io, kind: Backend, name: llm}]
---
apiVersion: example.io/v1alpha1
kind: Backend
metadata: {name: llm, namespace: app}
spec: {endpoint: 127.0.0.1:9999}
"#;

const BACKEND_CLUSTER: &str = "extension/app/example.io/Backend/llm";

fn run_backend(hooks: &TestHooks) -> translate::Output {
    let text = format!("{INPUT}{BACKEND_INPUT}");
    let loaded = api::loader::load_str_with("ext.yaml", &text, &options());
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    translate::translate_seams(
        &loaded.inputs,
        &translate::Settings::default(),
        translate::Seams {
            validator: None,
            hooks: Some(hooks),
        },
    )
}

fn cluster_of(r: &Route) -> Option<String> {
    match &r.action {
        Some(route::Action::Route(a)) => match &a.cluster_specifier {
            Some(route_action::ClusterSpecifier::Cluster(c)) => Some(c.clone()),
            Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                w.clusters.first().map(|c| c.name.clone())
            }
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn cluster_hook_completes_an_extension_backend_cluster_or_leaves_it_out() {
    const BE_ROUTE: &str = "httproute/app/be/rule/0/match/0";
    let mut hooks = TestHooks::new(&[Hook::Cluster, Hook::Endpoints]);
    hooks.cluster = Box::new(|c| Ok(Some(static_cluster(&c.cluster.name))));
    let out = run_backend(&hooks);
    assert_eq!(
        cluster_of(&envoy_route(&out, BE_ROUTE)).as_deref(),
        Some(BACKEND_CLUSTER)
    );
    let c = out.gateways[GW]
        .clusters
        .iter()
        .find(|c| c.name == BACKEND_CLUSTER)
        .expect("the extension's cluster");
    assert!(c.load_assignment.is_some(), "{c:?}");
    let calls = hooks.cluster_calls.lock().expect("lock");
    assert_eq!(calls.len(), 1, "only the extension backend's cluster");
    let r: Value =
        serde_json::from_slice(&calls[0].backend_extension_resources[0].unstructured_bytes).expect("JSON");
    assert_eq!(r["spec"]["endpoint"], "127.0.0.1:9999");
    drop(calls);
    assert_eq!(
        *hooks.batches.lock().expect("lock"),
        [(Hook::Cluster, 1), (Hook::Endpoints, 1)]
    );
    envoy_accepts(&out);

    // Endpoints from PostEndpointsModify.
    let mut hooks = TestHooks::new(&[Hook::Cluster, Hook::Endpoints]);
    hooks.endpoints = Box::new(|c| {
        let mut cla = static_cluster(&c.load_assignment.cluster_name)
            .load_assignment
            .expect("a load assignment");
        cla.cluster_name = c.load_assignment.cluster_name.clone();
        Ok(Some(cla))
    });
    let out = run_backend(&hooks);
    let cla = out.gateways[GW]
        .endpoints
        .iter()
        .find(|e| e.cluster_name == BACKEND_CLUSTER)
        .expect("its load assignment");
    assert_eq!(cla.endpoints[0].lb_endpoints.len(), 1);
    envoy_accepts(&out);

    // A failed hook leaves the cluster out: the route's share answers 500
    // (`cluster_not_found_response_code`), everything else serves.
    let mut hooks = TestHooks::new(&[Hook::Cluster]);
    hooks.cluster = Box::new(|_| Err(failure(Hook::Cluster, false)));
    let out = run_backend(&hooks);
    assert!(
        out.gateways[GW]
            .clusters
            .iter()
            .all(|c| c.name != BACKEND_CLUSTER)
    );
    assert!(
        out.gateways[GW]
            .endpoints
            .iter()
            .all(|c| c.cluster_name != BACKEND_CLUSTER)
    );
    let be = envoy_route(&out, BE_ROUTE);
    match &be.action {
        Some(route::Action::Route(a)) => assert_eq!(
            a.cluster_not_found_response_code,
            route_action::ClusterNotFoundResponseCode::InternalServerError as i32
        ),
        other => panic!("{other:?}"),
    }
    assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)));
    let s = out
        .scope_replacements
        .iter()
        .find(|s| s.scope == "cluster")
        .expect("a cluster scope replacement");
    assert_eq!(
        (s.names.as_slice(), s.class),
        ([BACKEND_CLUSTER.to_string()].as_slice(), ErrorClass::Extension)
    );
    let accepted = listener_condition(&out, "http", "Accepted");
    assert_eq!(
        accepted["status"], "True",
        "the Gateway keeps serving: {accepted}"
    );
    envoy_accepts(&out);

    // Without the Cluster hook nothing would make the cluster: the backend
    // is invalid (its share answers 500), not silently empty.
    let hooks = TestHooks::new(&[Hook::Route]);
    let out = run_backend(&hooks);
    assert!(
        out.gateways[GW]
            .clusters
            .iter()
            .all(|c| c.name != BACKEND_CLUSTER)
    );
    let rr = condition(&route_status(&out, "be"), "ResolvedRefs");
    assert_eq!(rr["status"], "False", "{rr}");
    assert!(
        rr["message"]
            .as_str()
            .expect("a string")
            .contains("Cluster hook is not enabled"),
        "{rr}"
    );
    envoy_accepts(&out);
}

/// STRICT: a listener reply, or clusters, that the in-process checks pass
/// but the real Envoy rejects go back to what portcullis made; the
/// listener's traffic is fenced and the rejection reported as the hook's.
#[test]
fn strict_checks_hook_modified_listeners_and_clusters_with_the_real_envoy() {
    let strict = |hooks: &TestHooks| {
        let envoy = real_envoy::RealEnvoy::default();
        translate::translate_seams(
            &inputs(),
            &translate::Settings::default(),
            translate::Seams {
                validator: Some(&envoy),
                hooks: Some(hooks),
            },
        )
    };
    let mut hooks = TestHooks::new(&[Hook::HttpListener]);
    hooks.listener = Box::new(|c| {
        let mut l = c.listener.clone();
        l.per_connection_buffer_limit_bytes = Some(UInt32Value { value: 12345 });
        // Envoy refuses an HTTP/3 codec on a TCP listener: a semantic
        // check, beyond the in-process ones.
        use envoy_types::pb::envoy::config::listener::v3::filter;
        use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager,
        };
        use prost::Message;
        if let Some(filter::ConfigType::TypedConfig(any)) = l
            .filter_chains
            .first_mut()
            .and_then(|fc| fc.filters.first_mut())
            .and_then(|f| f.config_type.as_mut())
        {
            let mut hcm = HttpConnectionManager::decode(any.value.as_slice()).expect("an HCM");
            hcm.codec_type = http_connection_manager::CodecType::Http3 as i32;
            any.value = hcm.encode_to_vec();
        }
        Ok(Some(l))
    });
    let out = strict(&hooks);
    let l = &out.gateways[GW].listeners[0];
    assert_eq!(l.per_connection_buffer_limit_bytes, None, "ours is back");
    let rcs = configs(&out);
    assert!(
        rcs.iter()
            .all(|rc| rc.virtual_hosts.len() == 1 && is_500(&rc.virtual_hosts[0].routes[0]))
    );
    let accepted = listener_condition(&out, "http", "Accepted");
    assert_eq!(accepted["reason"], "ListenerReplaced");
    assert!(
        accepted["message"]
            .as_str()
            .expect("message")
            .contains("rejected by Envoy"),
        "{accepted}"
    );
    envoy_accepts(&out);

    let ours = translate::translate(&inputs(), &translate::Settings::default());
    let mut hooks = TestHooks::new(&[Hook::Translation]);
    hooks.translate = Box::new(|c| {
        let mut bad = static_cluster("ext/authz");
        // Envoy refuses CLUSTER_PROVIDED on a STATIC cluster: a semantic
        // check, beyond the in-process ones.
        bad.lb_policy =
            envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy::ClusterProvided as i32;
        let mut clusters = c.clusters.clone();
        clusters.push(bad);
        Ok(Some(TranslateReply {
            clusters,
            secrets: c.secrets.clone(),
            ..Default::default()
        }))
    });
    let out = strict(&hooks);
    assert_eq!(out.gateways[GW].clusters, ours.gateways[GW].clusters);
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.severity == api::Severity::Error && d.message.contains("rejected by Envoy")),
        "{:#?}",
        out.diagnostics
    );
    assert!(forwards(&envoy_route(&out, PLAIN_ROUTE)));
    envoy_accepts(&out);
}

#[test]
fn grpc_routes_use_extension_refs_too() {
    let text = format!(
        "{INPUT}{}",
        r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [grpc.example.com]
  rules:
  - matches: [{method: {service: echo.Echo, method: Ping}}]
    filters:
    - type: ExtensionRef
      extensionRef: {group: example.io, kind: HeaderFilter, name: hf}
    backendRefs: [{name: web, port: 80}]
"#
    );
    let loaded = api::loader::load_str_with("ext.yaml", &text, &options());
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let mut hooks = TestHooks::new(&[Hook::Route]);
    hooks.route = Box::new(|c| Ok(Some(add_header(c.route.clone(), "x-ext", "grpc"))));
    let out = translate::translate_seams(
        &loaded.inputs,
        &translate::Settings::default(),
        translate::Seams {
            validator: None,
            hooks: Some(&hooks),
        },
    );
    let g = envoy_route(&out, "grpcroute/app/g/rule/0/match/0");
    assert!(forwards(&g), "{g:?}");
    assert_eq!(header(&g, "x-ext").as_deref(), Some("grpc"));
    let calls = hooks.route_calls.lock().expect("lock");
    let call = calls
        .iter()
        .find(|c| c.route.name.starts_with("grpcroute/"))
        .expect("a call for the GRPCRoute");
    assert_eq!(call.hostnames, ["grpc.example.com"]);
    assert_eq!(call.extension_resources.len(), 1);
    drop(calls);
    envoy_accepts(&out);
}

/// STANDARD catches listener replies Envoy would refuse: an HTTP filter
/// after the router, two filter chains with one match.
#[test]
fn listener_replies_envoy_would_reject_are_fenced_in_standard() {
    use envoy_types::pb::envoy::config::listener::v3::filter;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, HttpFilter, http_filter,
    };
    use prost::Message;
    let after_router = |mut l: Listener| {
        for fc in &mut l.filter_chains {
            for f in &mut fc.filters {
                if let Some(filter::ConfigType::TypedConfig(any)) = f.config_type.as_mut() {
                    let mut hcm = HttpConnectionManager::decode(any.value.as_slice()).expect("an HCM");
                    hcm.http_filters.push(HttpFilter {
                        name: "late".into(),
                        config_type: Some(http_filter::ConfigType::TypedConfig(envoy_types::util::pack_any(
                            envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors::default(),
                        ))),
                        ..Default::default()
                    });
                    any.value = hcm.encode_to_vec();
                }
            }
        }
        l
    };
    let duplicate_chain = |mut l: Listener| {
        let c = l.filter_chains[0].clone();
        l.filter_chains.push(c);
        l
    };
    for (what, bad) in [
        (
            "filter after the router",
            std::sync::Arc::new(after_router) as std::sync::Arc<dyn Fn(Listener) -> Listener + Sync + Send>,
        ),
        ("duplicate filter chain", std::sync::Arc::new(duplicate_chain)),
    ] {
        let mut hooks = TestHooks::new(&[Hook::HttpListener]);
        let reply = bad.clone();
        hooks.listener = Box::new(move |c| Ok(Some(reply(c.listener.clone()))));
        let out = run(&hooks);
        let l = &out.gateways[GW].listeners[0];
        assert_eq!(l.filter_chains.len(), 1, "{what}: ours is kept");
        assert!(is_500(&configs(&out)[0].virtual_hosts[0].routes[0]), "{what}");
        let accepted = listener_condition(&out, "http", "Accepted");
        assert!(
            accepted["message"]
                .as_str()
                .expect("message")
                .contains("Envoy would reject it"),
            "{what}: {accepted}"
        );
        envoy_accepts(&out);
        // And the real Envoy does reject the reply as the extension sent it.
        let mut raw = translate::GatewayXds::clone(&out.gateways[GW]);
        raw.listeners[0] = bad(raw.listeners[0].clone());
        let b = bootstrap::static_bootstrap(&raw, GW, &Default::default());
        assert!(
            testkit::envoy::validate(&b).is_err(),
            "{what}: Envoy accepts it after all"
        );
    }
}

/// The in-process checks never refuse what portcullis itself generates
/// (which the real Envoy accepts, `tests/fixtures.rs`): every resource of
/// every fixture passes them.
#[test]
fn every_fixture_output_passes_the_reply_checks() {
    use translate::extension::check::check;
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    names.sort();
    assert!(names.len() > 20);
    let mut failures = Vec::new();
    for path in names {
        let text = std::fs::read_to_string(&path).expect("fixture");
        let input = text.split("\n# ---- expected output").next().expect("input");
        let out = translate::translate(
            &api::loader::load_str("f.yaml", input).inputs,
            &translate::Settings::default(),
        );
        for (key, gw) in &out.gateways {
            let mut results = Vec::new();
            results.extend(gw.listeners.iter().map(|l| (l.name.clone(), check(l))));
            results.extend(
                gw.route_configurations()
                    .iter()
                    .map(|r| (r.name.clone(), check(r))),
            );
            results.extend(gw.clusters.iter().map(|c| (c.name.clone(), check(&**c))));
            results.extend(gw.endpoints.iter().map(|e| (e.cluster_name.clone(), check(&**e))));
            results.extend(gw.secrets.iter().map(|s| (s.name.clone(), check(s))));
            for (name, r) in results {
                if let Err(e) = r {
                    failures.push(format!("{}: {key}: {name}: {e}", path.display()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// failOpen on the scope hooks: the unmodified resources, a warning, no
/// fence.
#[test]
fn fail_open_scope_hooks_keep_the_unmodified_resources() {
    let ours = translate::translate(&inputs(), &translate::Settings::default());
    for hook in [Hook::VirtualHost, Hook::HttpListener, Hook::Translation] {
        let mut hooks = TestHooks::new(&[hook]);
        hooks.virtual_host = Box::new(|_| Err(failure(Hook::VirtualHost, true)));
        hooks.listener = Box::new(|_| Err(failure(Hook::HttpListener, true)));
        hooks.translate = Box::new(|_| Err(failure(Hook::Translation, true)));
        let out = run(&hooks);
        // The ExtensionRef routes differ (no Route hook: they are the 500
        // in both); everything else is the same xDS.
        assert_eq!(out.gateways[GW], ours.gateways[GW], "{hook}");
        assert!(
            out.scope_replacements.is_empty(),
            "{hook}: {:?}",
            out.scope_replacements
        );
        assert!(
            out.diagnostics
                .iter()
                .any(|d| d.severity == api::Severity::Warning
                    && d.message.contains(hook.rpc())
                    && d.message.contains("failOpen")),
            "{hook}: {:#?}",
            out.diagnostics
        );
        assert_eq!(
            listener_condition(&out, "http", "Accepted")["status"],
            "True",
            "{hook}"
        );
        envoy_accepts(&out);
    }
}
