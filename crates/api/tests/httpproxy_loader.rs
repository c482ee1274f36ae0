//! Loading Contour's HTTPProxy and TLSCertificateDelegation: the typed
//! parse, unknown fields, and a spec that does not parse keeping the proxy.

use api::Severity;
use api::loader::load_str;

const ROOT: &str = "\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: root
  namespace: team
spec:
  virtualhost:
    fqdn: example.com
    tls:
      secretName: certs/wildcard
      minimumProtocolVersion: \"1.3\"
  includes:
  - name: child
    namespace: apps
    conditions:
    - prefix: /foo
    - header:
        name: x-env
        notpresent: true
  routes:
  - conditions:
    - prefix: /
    - queryParameter:
        name: debug
        present: true
    services:
    - name: s1
      port: 8080
      weight: 10
      protocol: h2c
    - name: s2
      port: 8080
      mirror: true
    enableWebsockets: true
    permitInsecure: true
    timeoutPolicy:
      response: 5s
    retryPolicy:
      count: 3
      retryOn: [5xx]
    pathRewritePolicy:
      replacePrefix:
      - prefix: /
        replacement: /app
    requestHeadersPolicy:
      set:
      - name: x-a
        value: b
      remove: [x-c]
---
apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata:
  name: delegate
  namespace: certs
spec:
  delegations:
  - secretName: wildcard
    targetNamespaces: [\"*\"]
";

#[test]
fn http_proxy_and_delegation_load_field_for_field() {
    let loaded = load_str("p.yaml", ROOT);
    assert_eq!(loaded.diagnostics, vec![]);
    let proxy = &loaded.inputs.http_proxies[0].object;
    assert!(proxy.load_errors.is_empty());
    let vh = proxy.spec.virtualhost.as_ref().expect("virtualhost");
    assert_eq!(vh.fqdn, "example.com");
    let tls = vh.tls.as_ref().expect("tls");
    assert_eq!(tls.secret_name, "certs/wildcard");
    assert_eq!(tls.minimum_protocol_version, "1.3");
    let include = &proxy.spec.includes[0];
    assert_eq!(include.namespace.as_deref(), Some("apps"));
    assert_eq!(include.conditions[0].prefix, "/foo");
    assert!(include.conditions[1].header.as_ref().expect("header").not_present);
    let route = &proxy.spec.routes[0];
    assert!(
        route.conditions[1]
            .query_parameter
            .as_ref()
            .expect("query")
            .present
    );
    assert_eq!(route.services[0].protocol.as_deref(), Some("h2c"));
    assert_eq!(route.services[0].weight, 10);
    assert!(route.services[1].mirror);
    assert!(route.enable_websockets && route.permit_insecure);
    assert_eq!(route.retry_policy.as_ref().expect("retry").count, 3);
    assert_eq!(
        route
            .path_rewrite_policy
            .as_ref()
            .expect("rewrite")
            .replace_prefix[0]
            .replacement,
        "/app"
    );
    let delegation = &loaded.inputs.tls_certificate_delegations[0].object;
    assert_eq!(delegation.spec.delegations[0].target_namespaces, vec!["*"]);
}

/// A field portcullis does not implement is an error naming the object,
/// the file and line, and the field; the proxy is still loaded (empty spec,
/// the error kept) so that its status can say why it is invalid.
#[test]
fn unknown_field_keeps_the_proxy_with_its_error() {
    let text = "\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: child
  namespace: apps
spec:
  routes:
  - conditions:
    - prefix: /
    corsPolicy:
      allowOrigin: [\"*\"]
    services:
    - name: s1
      port: 80
";
    let loaded = load_str("c.yaml", text);
    let errors: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{:?}", loaded.diagnostics);
    let e = errors[0];
    assert_eq!(e.object.as_deref(), Some("HTTPProxy apps/child"));
    assert_eq!(
        e.file.as_deref(),
        Some("c.yaml:10"),
        "the line of the unknown field"
    );
    assert!(
        e.message
            .starts_with("spec.routes[0].corsPolicy: unknown field `corsPolicy`"),
        "{}",
        e.message
    );
    assert!(e.message.ends_with("; the HTTPProxy is invalid"), "{}", e.message);
    let proxy = &loaded.inputs.http_proxies[0].object;
    assert_eq!(proxy.metadata.name.as_deref(), Some("child"));
    assert_eq!(proxy.load_errors.len(), 1);
    assert!(proxy.spec.routes.is_empty());
}

#[test]
fn wrong_type_keeps_the_proxy_with_its_error() {
    let text = "\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: root
spec:
  virtualhost:
    fqdn: example.com
  routes:
  - services:
    - name: s1
      port: eighty
";
    let loaded = load_str("r.yaml", text);
    let proxy = &loaded.inputs.http_proxies[0].object;
    assert_eq!(proxy.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(proxy.load_errors.len(), 1);
    assert!(
        proxy.load_errors[0].starts_with("spec.routes[0].services[0].port: "),
        "{:?}",
        proxy.load_errors
    );
    let e = &loaded.diagnostics[0];
    assert_eq!(e.file.as_deref(), Some("r.yaml:11"));
}

/// A root whose spec does not parse is still known as a root (its FQDN
/// kept) so that FQDN conflicts and its status stay right.
#[test]
fn unreadable_root_keeps_its_fqdn() {
    let text = "\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: root
spec:
  virtualhost:
    fqdn: example.com
    corsPolicy: {}
  routes: []
";
    let loaded = load_str("r.yaml", text);
    let proxy = &loaded.inputs.http_proxies[0].object;
    assert_eq!(proxy.load_errors.len(), 1, "{:?}", loaded.diagnostics);
    assert_eq!(
        proxy.spec.virtualhost.as_ref().map(|v| v.fqdn.as_str()),
        Some("example.com")
    );
}

/// A file whose only error is an HTTPProxy spec that does not read still
/// counts as loaded (the proxy is kept and fenced by the translator), so a
/// provider applies it instead of keeping the file's last good version.
#[test]
fn unreadable_proxy_is_not_a_lost_object() {
    let text = "\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: child}
spec:
  routes:
  - services: [{name: s, port: 80}]
    loadBalancerPolicy: {strategy: Cookie}
";
    let loaded = load_str("c.yaml", text);
    assert_eq!(loaded.inputs.http_proxies.len(), 1);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    // A real loss still counts.
    let lost = format!("{text}---\napiVersion: v1\nkind: Service\nmetadata: {{name: 1bad}}\n");
    assert!(load_str("c.yaml", &lost).has_errors());
}
