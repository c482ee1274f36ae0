//! STRICT at scope: a Gateway- or listener-scope policy whose projection
//! only Envoy rejects (STANDARD cannot see it) is replaced at that scope —
//! the virtual host becomes a catch-all 500 keeping its name and domains,
//! the route configuration one catch-all 500 host — and reported as the
//! policy's failure (policy `Accepted=False` `Invalid` with Envoy's
//! message, `GatewayReplaced` / `ListenerReplaced` naming the policy, a
//! scope replacement for the metric). No route is bisected.
//!
//! Most cases use an in-process validator: it stands for an Envoy that
//! refuses one response header name (`x-envoy-refuses`) wherever it is
//! configured, and records every candidate's label; the final output is
//! then given to the real Envoy, which must accept it. One case asks the
//! real Envoy throughout, with what only it rejects today (a CEL
//! `matches()` pattern too large in UTF-8 mode, `rejections/strict-only/`).

#[path = "support/real_envoy.rs"]
mod real_envoy;
#[path = "support/refuses_header.rs"]
mod refuses_header;

use prost::Message as _;

use refuses_header::{MESSAGE, REFUSED, RefusesOneHeader};
use serde_json::Value;
use translate::strict::{Candidate, Validator, Verdict};

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
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
endpoints: [{addresses: ["127.0.0.1"]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  allowedListeners:
    namespaces: {from: Same}
  listeners:
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com, allowedRoutes: {namespaces: {from: All}}}
  - {name: b, protocol: HTTP, port: 80, hostname: b.example.com, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: infra}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: c, protocol: HTTP, port: 80, hostname: c.example.com, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: a, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: a}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /one}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /two}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: b, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: b}]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: c, namespace: app}
spec:
  parentRefs: [{kind: ListenerSet, name: ls, namespace: infra, sectionName: c}]
  rules:
  - backendRefs: [{name: web, port: 80}]
"#;

fn policy(name: &str, target: &str) -> String {
    format!(
        r#"
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}, namespace: infra}}
spec:
  targetRefs: [{target}]
  headerModifiers:
    response:
      set: [{{name: {REFUSED}, value: "1"}}]
"#
    )
}

fn run(extra: &str) -> (translate::Output, Vec<String>) {
    let text = format!("{BASE}{extra}");
    let inputs = api::loader::load_str("strict-scope.yaml", &text).inputs;
    let settings = translate::Settings::default();
    // STANDARD sees nothing wrong: the header name is valid.
    let standard = translate::translate(&inputs, &settings);
    assert!(
        standard.scope_replacements.is_empty(),
        "{:?}",
        standard.scope_replacements
    );
    let validator = RefusesOneHeader::default();
    let out = translate::translate_with(&inputs, &settings, Some(&validator));
    let labels = validator.labels.into_inner().unwrap_or_else(|e| e.into_inner());
    // What reaches Envoy is accepted by the real one and by the fake.
    for (key, gw) in &out.gateways {
        let bootstrap = translate::output::bootstrap::static_bootstrap(
            gw,
            "strict-scope",
            &translate::output::bootstrap::BootstrapOptions::default(),
        );
        testkit::envoy::validate(&bootstrap).unwrap_or_else(|e| panic!("{key}: Envoy rejects: {e}"));
        let fake = RefusesOneHeader::default().validate(&[Candidate {
            label: "final".into(),
            bootstrap: Value::Null,
            xds: Some(std::sync::Arc::clone(gw)),
        }]);
        assert_eq!(fake, vec![Verdict::Accepted], "{key}");
    }
    (out, labels)
}

fn status_of(out: &translate::Output, kind: &str, name: &str) -> Value {
    let found = out
        .status
        .iter()
        .find(|s| s.kind == kind && s.metadata.name == name)
        .unwrap_or_else(|| panic!("no status for {kind} {name}"));
    translate::status::Timed::new(&found.status, &out.transition_time).to_json()
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

fn hosts(out: &translate::Output) -> Vec<envoy_types::pb::envoy::config::route::v3::VirtualHost> {
    out.gateways["infra/gw"]
        .route_configurations()
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .collect()
}

fn is_fenced(vh: &envoy_types::pb::envoy::config::route::v3::VirtualHost) -> bool {
    use envoy_types::pb::envoy::config::route::v3::route::Action;
    vh.routes.len() == 1
        && matches!(&vh.routes[0].action, Some(Action::DirectResponse(d)) if d.status == 500)
        && vh.response_headers_to_add.is_empty()
}

/// Every route stays as it was: nothing bisected, no rule replaced.
fn no_route_blamed(out: &translate::Output, labels: &[String]) {
    assert!(out.replacements.is_empty(), "{:?}", out.replacements);
    assert!(
        labels.iter().all(|l| !l.contains(" routes ")),
        "routes were bisected: {labels:?}"
    );
    assert!(
        out.diagnostics
            .iter()
            .all(|d| !d.message.contains("Replaced Rule")),
        "{:?}",
        out.diagnostics
    );
}

fn policy_rejected(out: &translate::Output, name: &str) {
    let s = status_of(out, "TrafficPolicy", name);
    let c = condition(&s["ancestors"][0]["conditions"], "Accepted");
    assert_eq!(c["status"], "False", "{s}");
    assert_eq!(c["reason"], "Invalid", "{s}");
    assert!(c["message"].as_str().is_some_and(|m| m.contains(MESSAGE)), "{s}");
}

#[test]
fn a_listener_policy_only_envoy_rejects_fences_its_virtual_host() {
    let (out, labels) = run(&policy(
        "on-a",
        "{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}",
    ));
    let hosts = hosts(&out);
    let a = hosts
        .iter()
        .find(|vh| vh.name == "infra/gw/80/a.example.com")
        .expect("host a");
    assert!(is_fenced(a), "{a:?}");
    assert_eq!(a.domains, vec!["a.example.com"]);
    for other in ["infra/gw/80/b.example.com", "infra/gw/80/c.example.com"] {
        let vh = hosts.iter().find(|vh| vh.name == other).expect("neighbour");
        assert!(!is_fenced(vh), "{vh:?}");
    }
    no_route_blamed(&out, &labels);
    policy_rejected(&out, "on-a");
    let gw = status_of(&out, "Gateway", "gw");
    let listener = gw["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == "a"))
        .expect("listener a");
    let c = condition(&listener["conditions"], "Accepted");
    assert_eq!(c["reason"], "ListenerReplaced", "{gw}");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("TrafficPolicy infra/on-a")),
        "{gw}"
    );
    assert_eq!(out.scope_replacements.len(), 1, "{:?}", out.scope_replacements);
    let r = &out.scope_replacements[0];
    assert_eq!((r.scope.as_str(), r.listener.as_str()), ("virtual_host", "a"));
    assert_eq!(r.names, vec!["infra/gw/80/a.example.com"]);
}

#[test]
fn a_listener_set_listener_policy_only_envoy_rejects_is_reported_on_the_listener_set() {
    let (out, labels) = run(&policy(
        "on-c",
        "{group: gateway.networking.k8s.io, kind: ListenerSet, name: ls, sectionName: c}",
    ));
    let hosts = hosts(&out);
    let c = hosts
        .iter()
        .find(|vh| vh.name == "infra/gw/80/c.example.com")
        .expect("host c");
    assert!(is_fenced(c), "{c:?}");
    assert!(
        hosts
            .iter()
            .filter(|vh| vh.name != c.name)
            .all(|vh| !is_fenced(vh))
    );
    no_route_blamed(&out, &labels);
    policy_rejected(&out, "on-c");
    let set = status_of(&out, "ListenerSet", "ls");
    let cond = condition(&set["listeners"][0]["conditions"], "Accepted");
    assert_eq!(cond["reason"], "ListenerReplaced", "{set}");
    let r = &out.scope_replacements[0];
    assert_eq!(r.listener, "infra/ls/c");
}

#[test]
fn a_gateway_policy_only_envoy_rejects_replaces_the_route_configuration() {
    let (out, labels) = run(&policy(
        "gateway-wide",
        "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}",
    ));
    let rcs = out.gateways["infra/gw"].route_configurations();
    assert_eq!(rcs.len(), 1);
    assert_eq!(rcs[0].virtual_hosts.len(), 1, "{:?}", rcs[0]);
    assert_eq!(rcs[0].virtual_hosts[0].domains, vec!["*"]);
    assert!(is_fenced(&rcs[0].virtual_hosts[0]));
    assert!(rcs[0].response_headers_to_add.is_empty());
    no_route_blamed(&out, &labels);
    policy_rejected(&out, "gateway-wide");
    let gw = status_of(&out, "Gateway", "gw");
    let c = condition(&gw["conditions"], "Accepted");
    assert_eq!(c["reason"], "GatewayReplaced", "{gw}");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("TrafficPolicy infra/gateway-wide") && m.contains(MESSAGE)),
        "{gw}"
    );
    let r = &out.scope_replacements[0];
    assert_eq!(
        (r.scope.as_str(), r.listener.as_str()),
        ("route_configuration", "")
    );
}

#[test]
fn a_listener_policy_the_real_envoy_rejects_fences_its_virtual_host() {
    let text = format!(
        r#"{BASE}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: unicode, namespace: infra}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}}]
  rbac:
    action: Deny
    matchExpressions: ["request.path.matches('\\\\pL')"]
"#
    );
    let inputs = api::loader::load_str("strict-scope-real.yaml", &text).inputs;
    let settings = translate::Settings::default();
    let standard = translate::translate(&inputs, &settings);
    assert!(
        standard.scope_replacements.is_empty(),
        "STANDARD sees it now: update this test"
    );
    let envoy = real_envoy::RealEnvoy::default();
    let out = translate::translate_with(&inputs, &settings, Some(&envoy));
    let hosts = hosts(&out);
    let a = hosts
        .iter()
        .find(|vh| vh.name == "infra/gw/80/a.example.com")
        .expect("host a");
    assert!(is_fenced(a), "{a:?}");
    assert!(a.typed_per_filter_config.is_empty(), "{a:?}");
    assert!(
        hosts
            .iter()
            .filter(|vh| vh.name != a.name)
            .all(|vh| !is_fenced(vh))
    );
    assert!(out.replacements.is_empty(), "{:?}", out.replacements);
    let s = status_of(&out, "TrafficPolicy", "unicode");
    let c = condition(&s["ancestors"][0]["conditions"], "Accepted");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("Invalid")),
        "{s}"
    );
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("rejected by Envoy") && m.contains("regular expression")),
        "{s}"
    );
    assert_eq!(out.scope_replacements.len(), 1, "{:?}", out.scope_replacements);
    // Skeleton, the configuration, the scope probes (one per distinct host
    // configuration), the re-check: no bisection.
    assert_eq!(envoy.calls(), 4);
    for (key, gw) in &out.gateways {
        let bootstrap = translate::output::bootstrap::static_bootstrap(
            gw,
            "strict-scope",
            &translate::output::bootstrap::BootstrapOptions::default(),
        );
        testkit::envoy::validate(&bootstrap).unwrap_or_else(|e| panic!("{key}: Envoy rejects: {e}"));
    }
}

/// A route STRICT replaces under a valid Gateway policy switches that
/// policy's filters off, so it answers the 500 rather than the policy's
/// 403 (`replacement::disable_filters`); the Gateway policy itself is not
/// blamed.
#[test]
fn a_route_strict_replaces_under_a_gateway_policy_switches_its_filters_off() {
    let extra = format!(
        r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: bad, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: b}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /bad}}}}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {{set: [{{name: {REFUSED}, value: "1"}}]}}
    backendRefs: [{{name: web, port: 80}}]
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: gateway-auth, namespace: infra}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  rbac:
    action: Allow
    matchExpressions: ["request.headers['x-user'] == 'admin'"]
"#
    );
    let (out, _) = run(&extra);
    let routes: Vec<_> = hosts(&out).into_iter().flat_map(|vh| vh.routes).collect();
    let bad = routes
        .iter()
        .find(|r| r.name.starts_with("httproute/app/bad/"))
        .expect("route bad");
    use envoy_types::pb::envoy::config::route::v3::route::Action;
    assert!(
        matches!(&bad.action, Some(Action::DirectResponse(d)) if d.status == 500),
        "{bad:?}"
    );
    let off = bad
        .typed_per_filter_config
        .get("envoy.filters.http.rbac")
        .and_then(|any| {
            envoy_types::pb::envoy::config::route::v3::FilterConfig::decode(any.value.as_slice()).ok()
        });
    assert!(off.is_some_and(|f| f.disabled), "{bad:?}");
    assert_eq!(out.replacements.len(), 1, "{:?}", out.replacements);
    assert!(out.scope_replacements.is_empty(), "{:?}", out.scope_replacements);
    let s = status_of(&out, "TrafficPolicy", "gateway-auth");
    assert_eq!(
        condition(&s["ancestors"][0]["conditions"], "Accepted")["status"],
        "True",
        "{s}"
    );
}
