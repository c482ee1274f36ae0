//! STRICT on HTTPProxy routes: a route only the real Envoy rejects (STANDARD
//! sees nothing wrong) is replaced with its 500 and reported on the proxy
//! that holds it, in Contour's status shape — not only as a Gateway
//! diagnostic. Its neighbours keep serving. The fake Envoy refuses one
//! response header name (`support/refuses_header.rs`); the final output is
//! given to the real Envoy, which must accept it.

#[path = "support/refuses_header.rs"]
mod refuses_header;

use envoy_types::pb::envoy::config::route::v3::route::Action;
use refuses_header::{MESSAGE, REFUSED, RefusesOneHeader};
use serde_json::Value;

fn input() -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: portcullis}}
spec: {{controllerName: portcullis.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: http, protocol: HTTP, port: 80, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: s1, namespace: app}}
spec:
  ports: [{{name: http, port: 80, targetPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: s1-1, namespace: app, labels: {{kubernetes.io/service-name: s1}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: root, namespace: app}}
spec:
  virtualhost: {{fqdn: strict.example.com}}
  includes:
  - {{name: child, conditions: [{{prefix: /child}}]}}
  routes:
  - conditions: [{{prefix: /}}]
    services: [{{name: s1, port: 80}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: child, namespace: app}}
spec:
  routes:
  - conditions: [{{prefix: /ok}}]
    services: [{{name: s1, port: 80}}]
  - conditions: [{{prefix: /refused}}]
    responseHeadersPolicy:
      set: [{{name: {REFUSED}, value: "1"}}]
    services: [{{name: s1, port: 80}}]
"#
    )
}

fn settings() -> translate::Settings {
    let mut settings = translate::Settings::default();
    settings.http_proxy.gateway = Some(("infra".into(), "edge".into()));
    settings
}

fn proxy_status(out: &translate::Output, name: &str) -> Value {
    let found = out
        .status
        .iter()
        .find(|s| s.kind == "HTTPProxy" && s.metadata.name == name)
        .unwrap_or_else(|| panic!("no status for HTTPProxy {name}"));
    translate::status::Timed::new(&found.status, &out.transition_time).to_json()
}

fn route_named(
    out: &translate::Output,
    name: &str,
) -> Option<envoy_types::pb::envoy::config::route::v3::Route> {
    out.gateways["infra/edge"]
        .route_configurations()
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .flat_map(|vh| vh.routes)
        .find(|r| r.name == name)
}

#[test]
fn a_route_envoy_rejects_is_an_error_on_its_proxy() {
    let text = input();
    let inputs = api::loader::load_str("httpproxy-strict.yaml", &text).inputs;
    let standard = translate::translate(&inputs, &settings());
    assert_eq!(
        proxy_status(&standard, "child")["currentStatus"],
        "valid",
        "STANDARD must see nothing wrong, or this case does not show STRICT"
    );

    let out = translate::translate_with(&inputs, &settings(), Some(&RefusesOneHeader::default()));
    let child = proxy_status(&out, "child");
    assert_eq!(child["currentStatus"], "invalid", "{child}");
    let valid = &child["conditions"][0];
    assert_eq!(valid["type"], "Valid");
    assert_eq!(valid["status"], "False");
    let errors = valid["errors"].as_array().cloned().unwrap_or_default();
    assert!(
        errors.iter().any(|e| e["type"] == "RouteError"
            && e["reason"] == "RouteNotProgrammable"
            && e["message"].as_str().is_some_and(|m| m.contains(MESSAGE))),
        "{child}"
    );
    // The root holds no rejected route: it stays valid.
    assert_eq!(proxy_status(&out, "root")["currentStatus"], "valid");
    // The diagnostic names the proxy and the field.
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.object.as_deref() == Some("HTTPProxy app/child")
                && d.message.contains("spec.routes[1]")
                && d.message.contains(MESSAGE)),
        "{:#?}",
        out.diagnostics
    );

    // The rejected route answers 500; its neighbour still routes.
    let refused =
        route_named(&out, "httpproxy/app/child/routes/1").expect("the rejected route keeps its match");
    assert!(
        matches!(&refused.action, Some(Action::DirectResponse(d)) if d.status == 500),
        "{refused:?}"
    );
    let ok = route_named(&out, "httpproxy/app/child/routes/0").expect("the neighbour");
    assert!(matches!(ok.action, Some(Action::Route(_))), "{ok:?}");

    // And the real Envoy accepts what is served.
    let bootstrap = translate::output::bootstrap::static_bootstrap(
        &out.gateways["infra/edge"],
        "httpproxy-strict",
        &translate::output::bootstrap::BootstrapOptions::default(),
    );
    testkit::envoy::validate(&bootstrap).unwrap_or_else(|e| panic!("Envoy rejects: {e}"));
}
