//! Loader behaviour: documents, lines, dispatch, typed errors, files and
//! directories.

mod common;

use api::gateway_api::experimental::httproutes::HttpRouteUseDefaultGateways;
use api::loader::{LoadError, Loaded, is_manifest_file, load_path, load_str, merge};
use api::{Diagnostic, FieldStep, Severity, Source, Unreadable};
use common::{TempDir, VALID_MANIFESTS};

fn errors(loaded: &Loaded) -> Vec<&Diagnostic> {
    loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

fn warnings(loaded: &Loaded) -> Vec<&Diagnostic> {
    loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .collect()
}

fn diag(severity: Severity, object: Option<&str>, file: &str, message: &str) -> Diagnostic {
    Diagnostic {
        severity,
        object: object.map(str::to_string),
        file: Some(file.to_string()),
        message: message.to_string(),
    }
}

/// `(line, name)` of every Service, in load order.
fn services(loaded: &Loaded) -> Vec<(usize, String)> {
    loaded
        .inputs
        .services
        .iter()
        .map(|s| (s.source.line, s.object.metadata.name.clone().unwrap_or_default()))
        .collect()
}

fn service(name: &str) -> String {
    format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  ports:\n  - port: 80\n")
}

#[test]
fn every_valid_manifest_loads_without_diagnostics() {
    for (name, text) in VALID_MANIFESTS {
        let loaded = load_str(name, text);
        assert_eq!(loaded.diagnostics, vec![], "{name}");
        assert!(!loaded.inputs.is_empty(), "{name}");
    }
    let loaded = merge(VALID_MANIFESTS.iter().map(|(name, text)| load_str(name, text)));
    assert_eq!(loaded.diagnostics, vec![]);
    let inputs = &loaded.inputs;
    assert_eq!(inputs.gateway_classes.len(), 1);
    assert_eq!(inputs.gateways.len(), 1);
    assert_eq!(inputs.http_routes.len(), 2);
    assert_eq!(inputs.grpc_routes.len(), 1);
    assert_eq!(inputs.reference_grants.len(), 1);
    assert_eq!(inputs.namespaces.len(), 1);
    assert_eq!(inputs.services.len(), 2);
    assert_eq!(inputs.endpoint_slices.len(), 1);
    assert_eq!(inputs.secrets.len(), 1);
    assert_eq!(inputs.len(), 11);
}

#[test]
fn multi_document_stream_records_exact_lines() {
    let text = "\
# leading comment

---
apiVersion: v1
kind: Service
metadata:
  name: one
---
---   # an empty document, then comments only
# nothing here
---

  # indented comment
apiVersion: v1
kind: Service
metadata: {name: two}
--- # trailing comment on the marker
apiVersion: v1
kind: Service
metadata:
  name: three
...
---
~
";
    let loaded = load_str("stream.yaml", text);
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(
        services(&loaded),
        vec![(4, "one".into()), (14, "two".into()), (18, "three".into())]
    );
    assert!(
        loaded
            .inputs
            .services
            .iter()
            .all(|s| s.source.file == "stream.yaml")
    );
}

#[test]
fn marker_with_content_and_directives() {
    let text = "\
%YAML 1.2
---
apiVersion: v1
kind: Namespace
metadata: {name: a}
--- {apiVersion: v1, kind: Namespace, metadata: {name: b}}
";
    let loaded = load_str("m.yaml", text);
    assert_eq!(loaded.diagnostics, vec![]);
    let lines: Vec<(usize, Option<String>)> = loaded
        .inputs
        .namespaces
        .iter()
        .map(|n| (n.source.line, n.object.metadata.name.clone()))
        .collect();
    assert_eq!(lines, vec![(3, Some("a".into())), (6, Some("b".into()))]);
    // Cluster-scoped: no namespace.
    assert!(
        loaded
            .inputs
            .namespaces
            .iter()
            .all(|n| n.object.metadata.namespace.is_none())
    );
}

#[test]
fn crlf_and_byte_order_mark() {
    let text = "\u{feff}# c\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: a\r\n---\r\n\
                apiVersion: v1\r\nkind: Service\r\nmetadata: {name: b}\r\n";
    let loaded = load_str("crlf.yaml", text);
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(services(&loaded), vec![(3, "a".into()), (8, "b".into())]);
}

#[test]
fn broken_document_in_the_middle_keeps_the_others() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: broken\n  labels: [unclosed\n---\n{}",
        service("before"),
        service("after")
    );
    // Lines: "before" is 1-7, marker 8, broken document 9-13, marker 14, "after" 15-.
    let loaded = load_str("b.yaml", &text);
    assert_eq!(
        services(&loaded),
        vec![(1, "before".into()), (15, "after".into())]
    );
    let errors = errors(&loaded);
    assert_eq!(errors.len(), 1, "{:?}", loaded.diagnostics);
    let error = errors[0];
    assert_eq!(error.object, None);
    // The parser reports where it noticed the problem: inside the broken
    // document, never in a neighbour.
    let line: usize = error
        .file
        .as_deref()
        .and_then(|f| f.strip_prefix("b.yaml:"))
        .and_then(|l| l.parse().ok())
        .expect("file:line");
    assert!((9..=14).contains(&line), "line {line}");
    assert!(error.message.starts_with("invalid YAML: "), "{}", error.message);
}

#[test]
fn syntax_error_line_is_the_parsers() {
    let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  labels: {a: b\n  other: c\n";
    let loaded = load_str("s.yaml", text);
    assert!(loaded.inputs.is_empty());
    assert_eq!(loaded.diagnostics.len(), 1);
    assert_eq!(loaded.diagnostics[0].severity, Severity::Error);
    assert!(loaded.diagnostics[0].message.starts_with("invalid YAML: "));
    // Second document: lines are file lines, not document lines.
    let text = format!("{}---\nkind: x\n  bad: indentation\n", service("ok"));
    let loaded = load_str("s.yaml", &text);
    assert_eq!(services(&loaded), vec![(1, "ok".into())]);
    assert_eq!(loaded.diagnostics.len(), 1);
    assert_eq!(loaded.diagnostics[0].file.as_deref(), Some("s.yaml:10"));
}

#[test]
fn unknown_kinds_are_warnings() {
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\n---\n\
         apiVersion: gateway.portcullis.dev/v1alpha1\nkind: BackendPolicy\nmetadata: {{name: tp}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: TLSRoute\nmetadata: {{name: tls}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v9\nkind: HTTPRoute\nmetadata: {{name: future}}\n---\n{}",
        service("kept")
    );
    let loaded = load_str("u.yaml", &text);
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Warning,
                Some("ConfigMap apps/settings"),
                "u.yaml:1",
                "unknown kind v1/ConfigMap; ignored"
            ),
            diag(
                Severity::Warning,
                Some("BackendPolicy tp"),
                "u.yaml:7",
                "unknown kind gateway.portcullis.dev/v1alpha1/BackendPolicy; ignored"
            ),
            diag(
                Severity::Warning,
                Some("TLSRoute tls"),
                "u.yaml:11",
                "unknown kind gateway.networking.k8s.io/v1/TLSRoute; ignored"
            ),
            diag(
                Severity::Warning,
                Some("HTTPRoute future"),
                "u.yaml:15",
                "unknown kind gateway.networking.k8s.io/v9/HTTPRoute; ignored"
            ),
        ]
    );
    assert_eq!(services(&loaded), vec![(19, "kept".into())]);
}

#[test]
fn every_gateway_api_version_shares_one_schema() {
    let route = |version: &str, name: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/{version}\nkind: HTTPRoute\nmetadata: {{name: {name}}}\n\
             spec:\n  rules:\n  - backendRefs:\n    - {{name: s, port: 80}}\n"
        )
    };
    let text = [route("v1", "a"), route("v1beta1", "b"), route("v1alpha2", "c")].join("---\n");
    let loaded = load_str("v.yaml", &text);
    assert_eq!(loaded.diagnostics, vec![]);
    let names: Vec<_> = loaded
        .inputs
        .http_routes
        .iter()
        .map(|r| r.object.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, vec!["a", "b", "c"]);
}

#[test]
fn missing_header_fields_are_errors() {
    let text = "\
kind: Service
metadata: {name: no-version}
---
apiVersion: v1
metadata: {name: no-kind}
---
apiVersion: v1
kind: Service
metadata:
  namespace: apps
spec: {}
---
apiVersion: v1
kind: Secret
---
apiVersion: v1
kind: Service
metadata: {name: \"\"}
---
apiVersion: [v1]
kind: Service
metadata: {name: list-version}
";
    let loaded = load_str("h.yaml", text);
    assert!(loaded.inputs.is_empty());
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Error,
                Some("Service no-version"),
                "h.yaml:1",
                "apiVersion: missing required field"
            ),
            diag(Severity::Error, None, "h.yaml:4", "kind: missing required field"),
            diag(
                Severity::Error,
                None,
                "h.yaml:9",
                "metadata.name: missing required field"
            ),
            diag(
                Severity::Error,
                None,
                "h.yaml:13",
                "metadata.name: missing required field"
            ),
            diag(
                Severity::Error,
                None,
                "h.yaml:18",
                "metadata.name: must not be empty"
            ),
            diag(
                Severity::Error,
                Some("Service list-version"),
                "h.yaml:20",
                "apiVersion: expected a string, found a list"
            ),
        ]
    );
}

#[test]
fn a_document_must_be_a_mapping() {
    let loaded = load_str("l.yaml", "- a\n- b\n---\njust text\n");
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Error,
                None,
                "l.yaml:1",
                "expected a Kubernetes object (a mapping with apiVersion and kind), found a list"
            ),
            diag(
                Severity::Error,
                None,
                "l.yaml:4",
                "expected a Kubernetes object (a mapping with apiVersion and kind), found a string"
            ),
        ]
    );
}

#[test]
fn bad_enum_value_names_the_field_path_and_its_line() {
    let text = format!(
        "{}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: shop
  namespace: team-a
spec:
  rules:
  - backendRefs:
    - name: ok
      port: 80
  - matches:
    - path:
        type: PathPrefix
        value: /a
    - path:
        type: Foo
        value: /b
---
{}",
        service("before"),
        service("after")
    );
    let loaded = load_str("routes.yaml", &text);
    assert_eq!(
        loaded.diagnostics,
        vec![diag(
            Severity::Error,
            Some("HTTPRoute team-a/shop"),
            "routes.yaml:24",
            "spec.rules[1].matches[1].path.type: unknown value \"Foo\", expected one of \
             Exact, PathPrefix, RegularExpression; rule 1 is replaced with a 500 \
             (Accepted=False, UnsupportedValue)"
        )]
    );
    // The route is kept (bound, its bad rule fenced), not dropped: dropping
    // it would let its traffic fall to a broader route.
    let [route] = loaded.inputs.http_routes.as_slice() else {
        panic!("the route is kept: {:?}", loaded.inputs.http_routes)
    };
    assert_eq!(
        route.unreadable,
        vec![Unreadable {
            rule: 1,
            path: steps("spec.rules[1].matches[1].path.type"),
            message: "unknown value \"Foo\", expected one of Exact, PathPrefix, RegularExpression".into(),
        }]
    );
    // The path value stays for the guard; the unknown type is removed.
    let path = route.object.spec.rules.as_ref().expect("present")[1]
        .matches
        .as_ref()
        .expect("present")[1]
        .path
        .clone()
        .expect("present");
    assert_eq!((path.r#type, path.value.as_deref()), (None, Some("/b")));
    assert_eq!(
        services(&loaded),
        vec![(1, "before".into()), (27, "after".into())]
    );
}

/// Parses `spec.rules[1].filters[0].type` into steps.
fn steps(path: &str) -> Vec<FieldStep> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        out.push(FieldStep::Key(key.to_string()));
        for index in rest.split('[').filter(|s| !s.is_empty()) {
            out.push(FieldStep::Index(
                index.trim_end_matches(']').parse().expect("present"),
            ));
        }
    }
    out
}

#[test]
fn every_unreadable_value_of_every_rule_is_found_and_the_route_is_kept() {
    // Rule 0 reads; rule 1 has an unknown filter type, a redirect scheme of
    // the wrong kind and a backendRef without its name; rule 2 an unknown
    // method, a header match type and an unknown query type; rule 3 is not a
    // mapping; the GRPCRoute an unknown method match type.
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ok}}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: Exact, value: /secret}}]
    filters:
    - type: Foo
    - type: RequestRedirect
      requestRedirect: {scheme: gopher}
    backendRefs:
    - {port: 80}
    - {name: echo, port: 80, weight: heavy}
  - matches:
    - path: {value: /m}
      method: BREW
      headers: [{name: a, value: b, type: Prefix}, {name: c, value: d}]
      queryParams: [{name: q, value: v, type: Glob}]
  - not a rule
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: app}
spec:
  rules:
  - matches: [{method: {type: Prefix, service: pkg.Svc, method: Get}}]
  - backendRefs: [{name: echo, port: 80}]
";
    let loaded = load_str("u.yaml", text);
    let [route] = loaded.inputs.http_routes.as_slice() else {
        panic!("the HTTPRoute is kept: {:#?}", loaded.diagnostics)
    };
    let found: Vec<(usize, String)> = route.unreadable.iter().map(|u| (u.rule, u.field())).collect();
    assert_eq!(
        found,
        vec![
            (1, "spec.rules[1].filters[0].type".to_string()),
            (1, "spec.rules[1].filters[1].requestRedirect.scheme".to_string()),
            (1, "spec.rules[1].backendRefs[0].name".to_string()),
            (1, "spec.rules[1].backendRefs[1].weight".to_string()),
            (2, "spec.rules[2].matches[0].method".to_string()),
            (2, "spec.rules[2].matches[0].headers[0].type".to_string()),
            (2, "spec.rules[2].matches[0].queryParams[0].type".to_string()),
            (3, "spec.rules[3]".to_string()),
        ]
    );
    // One error diagnostic per value, on the line of the value, naming the
    // object and the field.
    let lines: Vec<(&str, String)> = errors(&loaded)
        .iter()
        .filter(|d| d.object.as_deref() == Some("HTTPRoute app/r"))
        .map(|d| {
            (
                d.file.as_deref().unwrap_or(""),
                d.message.split(':').next().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            ("u.yaml:11", "spec.rules[1].filters[0].type".to_string()),
            (
                "u.yaml:13",
                "spec.rules[1].filters[1].requestRedirect.scheme".to_string()
            ),
            ("u.yaml:15", "spec.rules[1].backendRefs[0].name".to_string()),
            ("u.yaml:16", "spec.rules[1].backendRefs[1].weight".to_string()),
            ("u.yaml:19", "spec.rules[2].matches[0].method".to_string()),
            (
                "u.yaml:20",
                "spec.rules[2].matches[0].headers[0].type".to_string()
            ),
            (
                "u.yaml:21",
                "spec.rules[2].matches[0].queryParams[0].type".to_string()
            ),
            ("u.yaml:22", "spec.rules[3]".to_string()),
        ]
    );
    // Rule 0 is read as written; rule 2's match keeps its path and its
    // readable header, and every header/query element keeps its place.
    let rules = route.object.spec.rules.as_ref().expect("present");
    assert_eq!(rules.len(), 4);
    assert_eq!(rules[0].backend_refs.as_ref().expect("present")[0].name, "echo");
    let m = &rules[2].matches.as_ref().expect("present")[0];
    assert_eq!(m.path.as_ref().expect("present").value.as_deref(), Some("/m"));
    assert!(m.method.is_none());
    assert_eq!(m.headers.as_ref().expect("present").len(), 2);
    assert_eq!(m.query_params.as_ref().expect("present").len(), 1);
    // Rule 1's matches survive untouched.
    let m = &rules[1].matches.as_ref().expect("present")[0];
    assert_eq!(
        m.path.as_ref().expect("present").value.as_deref(),
        Some("/secret")
    );

    let [grpc] = loaded.inputs.grpc_routes.as_slice() else {
        panic!("the GRPCRoute is kept: {:#?}", loaded.diagnostics)
    };
    let found: Vec<(usize, String)> = grpc.unreadable.iter().map(|u| (u.rule, u.field())).collect();
    assert_eq!(
        found,
        vec![(0, "spec.rules[0].matches[0].method.type".to_string())]
    );
}

#[test]
fn an_unreadable_parent_ref_is_ignored_and_the_route_kept_with_a_diagnostic() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  rules:
  - filters: [{type: Foo}]
  parentRefs:
  - {name: gw, kind: [Gateway]}
  - {name: other}
";
    let loaded = load_str("p.yaml", text);
    let [route] = loaded.inputs.http_routes.as_slice() else {
        panic!("the route is kept: {:#?}", loaded.diagnostics)
    };
    // Only the readable parent is left: never the bad one with its `kind`
    // dropped (that would attach where the route did not ask).
    let parents: Vec<&str> = route
        .object
        .spec
        .parent_refs
        .iter()
        .flatten()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(parents, ["other"]);
    let messages: Vec<(Option<&str>, Option<&str>, &str)> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.object.as_deref(), d.file.as_deref(), d.message.as_str()))
        .collect();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(messages.iter().any(|m| {
        m.2.starts_with("spec.rules[0].filters[0].type: unknown value \"Foo\"")
    }));
    let parent = messages
        .iter()
        .find(|m| m.2.starts_with("spec.parentRefs[0].kind: invalid type"))
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert_eq!((parent.0, parent.1), (Some("HTTPRoute app/r"), Some("p.yaml:8")));
    assert!(parent.2.contains("parentRefs[0] is ignored"), "{parent:?}");
    // The file is applied: every error is about something kept.
    assert!(!loaded.has_errors(), "{messages:#?}");
}

#[test]
fn an_unreadable_value_outside_the_rules_lists_still_drops_the_route_with_a_diagnostic() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  hostnames: 5
  parentRefs: [{name: gw}]
";
    let loaded = load_str("p.yaml", text);
    assert!(loaded.inputs.http_routes.is_empty());
    assert!(loaded.has_errors());
    assert!(
        loaded.diagnostics[0]
            .message
            .starts_with("spec.hostnames: invalid type"),
        "{:#?}",
        loaded.diagnostics
    );
}

#[test]
fn type_errors_and_missing_fields_name_path_and_line() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: portcullis
  listeners:
  - name: http
    protocol: HTTP
    port: \"80\"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs:
  - namespace: infra
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g}
";
    let loaded = load_str("t.yaml", text);
    // The Gateway is kept (its listener refused), the route too (without
    // the parent it cannot name); the GRPCRoute without a spec is not.
    assert_eq!(loaded.inputs.gateways.len(), 1);
    assert_eq!(loaded.inputs.http_routes.len(), 1);
    assert!(loaded.inputs.grpc_routes.is_empty());
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Error,
                Some("Gateway default/gw"),
                "t.yaml:9",
                "spec.listeners[0].port: invalid type: string \"80\", expected i32; listener \"http\" is not accepted (Accepted=False, Invalid), the other listeners are"
            ),
            diag(
                Severity::Error,
                Some("HTTPRoute default/r"),
                "t.yaml:16",
                "spec.parentRefs[0].name: missing required field; parentRefs[0] is ignored: the route does not attach through it (its other parentRefs keep it)"
            ),
            diag(
                Severity::Error,
                Some("GRPCRoute default/g"),
                "t.yaml:18",
                "spec: missing required field"
            ),
        ]
    );
}

#[test]
fn unknown_fields_are_warnings_and_the_object_still_loads() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: typo
  namespace: apps
spec:
  rules:
  - matchs:
    - path: {type: PathPrefix, value: /}
    backendRefs:
    - name: svc
      port: 80
      wieght: 5
  nothing: ~
status:
  parents: not even a list
";
    let loaded = load_str("f.yaml", text);
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Warning,
                Some("HTTPRoute apps/typo"),
                "f.yaml:8",
                "spec.rules[0].matchs: unknown field; ignored"
            ),
            diag(
                Severity::Warning,
                Some("HTTPRoute apps/typo"),
                "f.yaml:13",
                "spec.rules[0].backendRefs[0].wieght: unknown field; ignored"
            ),
        ]
    );
    let route = &loaded.inputs.http_routes[0];
    assert_eq!(route.source, Source::new("f.yaml", 1));
    // `status` is never read from input.
    assert!(route.object.status.is_none());
}

#[test]
fn singular_use_default_gateway_is_read_with_a_warning() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: a}
spec:
  useDefaultGateway: All
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: b}
spec:
  useDefaultGateways: None
  useDefaultGateway: All
";
    let loaded = load_str("d.yaml", text);
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Warning,
                Some("HTTPRoute default/a"),
                "d.yaml:5",
                "spec.useDefaultGateway: deprecated spelling, read as spec.useDefaultGateways"
            ),
            diag(
                Severity::Warning,
                Some("HTTPRoute default/b"),
                "d.yaml:12",
                "spec.useDefaultGateway: ignored because spec.useDefaultGateways is set"
            ),
        ]
    );
    let scopes: Vec<_> = loaded
        .inputs
        .http_routes
        .iter()
        .map(|r| r.object.spec.use_default_gateways.clone())
        .collect();
    assert_eq!(
        scopes,
        vec![
            Some(HttpRouteUseDefaultGateways::All),
            Some(HttpRouteUseDefaultGateways::None)
        ]
    );
}

#[test]
fn namespaces_are_defaulted_for_namespaced_kinds_only() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pc, namespace: ignored}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: pc, listeners: []}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw2, namespace: \"\"}
spec: {gatewayClassName: pc, listeners: []}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: apps}
";
    let loaded = load_str("n.yaml", text);
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(loaded.inputs.gateway_classes[0].object.metadata.namespace, None);
    let gateway_namespaces: Vec<_> = loaded
        .inputs
        .gateways
        .iter()
        .map(|g| g.object.metadata.namespace.as_deref())
        .collect();
    assert_eq!(gateway_namespaces, vec![Some("default"), Some("default")]);
    assert_eq!(
        loaded.inputs.services[0].object.metadata.namespace.as_deref(),
        Some("apps")
    );
}

#[test]
fn duplicates_keep_the_first_and_name_both_locations() {
    let text = format!(
        "{}---\n{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: one, namespace: other}}\n",
        service("one"),
        service("one").replace("port: 80", "port: 81")
    );
    let loaded = load_str("dup.yaml", &text);
    assert_eq!(
        loaded.diagnostics,
        vec![diag(
            Severity::Warning,
            Some("Service default/one"),
            "dup.yaml:9",
            "duplicate object: Service default/one is already defined at dup.yaml:1; \
             this definition is ignored"
        )]
    );
    // The first one (port 80) is kept; the same name in another namespace is
    // not a duplicate.
    assert_eq!(services(&loaded), vec![(1, "one".into()), (17, "one".into())]);
    let first = &loaded.inputs.services[0].object;
    let port = first
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port);
    assert_eq!(port, Some(80));

    // Across separate loads, via merge.
    let merged = merge([
        load_str("a.yaml", &service("x")),
        load_str("b.yaml", &format!("# comment\n{}", service("x"))),
    ]);
    assert_eq!(merged.inputs.services.len(), 1);
    assert_eq!(merged.inputs.services[0].source, Source::new("a.yaml", 1));
    assert_eq!(
        merged.diagnostics,
        vec![diag(
            Severity::Warning,
            Some("Service default/x"),
            "b.yaml:2",
            "duplicate object: Service default/x is already defined at a.yaml:1; this definition is ignored"
        )]
    );
}

#[test]
fn secrets_merge_string_data_into_data() {
    let text = "\
apiVersion: v1
kind: Secret
metadata: {name: creds}
data:
  user: YWRtaW4=
  password: b2xk
stringData:
  password: new
  token: |
    multi
    line
---
apiVersion: v1
kind: Secret
metadata: {name: bad}
data:
  key: not base64!
";
    let loaded = load_str("s.yaml", text);
    assert_eq!(loaded.inputs.secrets.len(), 1);
    let secret = &loaded.inputs.secrets[0].object;
    assert_eq!(secret.string_data, None);
    let data: Vec<(String, String)> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    assert_eq!(
        data,
        vec![
            ("password".to_string(), "new".to_string()),
            ("token".to_string(), "multi\nline\n".to_string()),
            ("user".to_string(), "admin".to_string()),
        ]
    );
    let errors = errors(&loaded);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].object.as_deref(), Some("Secret default/bad"));
    assert_eq!(errors[0].file.as_deref(), Some("s.yaml:17"));
    assert!(
        errors[0].message.starts_with("data.key: "),
        "{}",
        errors[0].message
    );
}

#[test]
fn json_file_and_list() {
    let (name, text) = VALID_MANIFESTS
        .iter()
        .find(|(name, _)| *name == "list.json")
        .expect("list.json seed");
    let loaded = load_str(name, text);
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(services(&loaded), vec![(5, "greeter".into())]);
    let route = &loaded.inputs.http_routes[0];
    assert_eq!(route.source, Source::new("list.json", 11));
    assert_eq!(route.object.metadata.namespace.as_deref(), Some("default"));

    // A single JSON object.
    let loaded = load_str(
        "svc.json",
        "\n{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"j\"}}",
    );
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(services(&loaded), vec![(2, "j".into())]);

    // Valid JSON that the YAML reader refuses: loaded, with a warning.
    let loaded = load_str(
        "dup.json",
        "{\n\"apiVersion\": \"v1\",\n\"kind\": \"Service\",\n\"metadata\": {\"name\": \"a\", \"name\": \"b\"}\n}\n",
    );
    assert_eq!(services(&loaded), vec![(1, "b".into())]);
    assert_eq!(warnings(&loaded).len(), 1, "{:?}", loaded.diagnostics);
    assert_eq!(loaded.diagnostics[0].file.as_deref(), Some("dup.json:4"));
    assert!(
        loaded.diagnostics[0].message.starts_with("duplicate mapping key")
            && loaded.diagnostics[0]
                .message
                .ends_with("; read as plain JSON, lines inside this document are approximate"),
        "{}",
        loaded.diagnostics[0].message
    );

    // JSON syntax errors carry the line.
    let loaded = load_str(
        "bad.json",
        "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Service\"\n  \"metadata\": {}\n}\n",
    );
    assert_eq!(
        loaded.diagnostics,
        vec![diag(
            Severity::Error,
            None,
            "bad.json:4",
            "invalid JSON: expected `,` or `}`"
        )]
    );
}

#[test]
fn yaml_list_items_keep_their_own_lines() {
    let text = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a}
- # comment
  apiVersion: v1
  kind: Service
  metadata:
    name: b
- 5
- apiVersion: gateway.networking.k8s.io/v1
  kind: HTTPRoute
  metadata: {name: r}
  spec:
    rules:
    - matches:
      - path: {type: Nope}
---
apiVersion: v1
kind: ServiceList
items:
- apiVersion: v1
  kind: Service
  metadata: {name: c}
---
apiVersion: v1
kind: List
items: {}
";
    let loaded = load_str("list.yaml", text);
    assert_eq!(
        services(&loaded),
        vec![(4, "a".into()), (8, "b".into()), (24, "c".into())]
    );
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Error,
                None,
                "list.yaml:12",
                "expected a Kubernetes object (a mapping with apiVersion and kind), found a number"
            ),
            diag(
                Severity::Error,
                Some("HTTPRoute default/r"),
                "list.yaml:19",
                "spec.rules[0].matches[0].path.type: unknown value \"Nope\", expected one of \
                 Exact, PathPrefix, RegularExpression; rule 0 is replaced with a 500 \
                 (Accepted=False, UnsupportedValue)"
            ),
            diag(
                Severity::Error,
                None,
                "list.yaml:30",
                "items: expected a list, found a mapping"
            ),
        ]
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    // Runs on the test harness's 2 MiB thread on purpose: the parser allows
    // 64 levels, and each level takes a lot of stack in debug builds.
    for depth in [20, 63, 64, 500] {
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let text = format!(
                "{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: deep}}\nspec: {}x{}\n",
                service("ok"),
                open.repeat(depth),
                close.repeat(depth)
            );
            let loaded = load_str("deep.yaml", &text);
            let expected: Vec<(usize, String)> = if depth <= 63 && open == "{a: " {
                // Within the limit, the nested map is one unknown field.
                vec![(1, "ok".into()), (9, "deep".into())]
            } else {
                vec![(1, "ok".into())]
            };
            assert_eq!(services(&loaded), expected, "depth {depth} {open}");
            assert_eq!(loaded.diagnostics.len(), 1, "depth {depth} {open}");
            let diagnostic = &loaded.diagnostics[0];
            assert_eq!(diagnostic.file.as_deref(), Some("deep.yaml:12"));
            if depth > 63 {
                assert_eq!(diagnostic.severity, Severity::Error);
                assert!(
                    diagnostic.message.starts_with("invalid YAML: "),
                    "{}",
                    diagnostic.message
                );
            }
        }
    }
}

#[test]
fn directory_is_walked_recursively_in_sorted_order() {
    let dir = TempDir::new("walk");
    dir.write("b.yaml", service("b"));
    dir.write("a/z.yml", service("a-z"));
    dir.write(
        "a/c.json",
        r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a-c"}}"#,
    );
    dir.write("a/deeper/d.YAML", service("a-deeper-d"));
    dir.write("aa.yaml", service("aa"));
    dir.write("notes.txt", service("txt"));
    dir.write("README.md", "# not a manifest: [");
    dir.write(".hidden.yaml", service("hidden"));
    dir.write(".git/config.yaml", service("git"));
    dir.write("empty.yaml", "");
    dir.write("binary.yaml", b"apiVersion: v1\nkind: \xff\xfe\n");
    dir.write("dup/x.yaml", service("b"));

    let loaded = load_path(dir.path()).expect("directory loads");
    let names: Vec<(String, String)> = loaded
        .inputs
        .services
        .iter()
        .map(|s| {
            let rel = s
                .source
                .file
                .strip_prefix(&format!("{}/", dir.path().display()))
                .unwrap_or(&s.source.file)
                .to_string();
            (rel, s.object.metadata.name.clone().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("a/c.json".to_string(), "a-c".to_string()),
            ("a/deeper/d.YAML".to_string(), "a-deeper-d".to_string()),
            ("a/z.yml".to_string(), "a-z".to_string()),
            ("aa.yaml".to_string(), "aa".to_string()),
            ("b.yaml".to_string(), "b".to_string()),
        ]
    );
    let base = dir.path().display().to_string();
    assert_eq!(
        loaded.diagnostics,
        vec![
            diag(
                Severity::Error,
                None,
                &format!("{base}/binary.yaml:2"),
                "file is not valid UTF-8; ignored"
            ),
            diag(
                Severity::Warning,
                Some("Service default/b"),
                &format!("{base}/dup/x.yaml:1"),
                &format!(
                    "duplicate object: Service default/b is already defined at {base}/b.yaml:1; \
                     this definition is ignored"
                )
            ),
        ]
    );
    // Deterministic.
    assert_eq!(load_path(dir.path()).expect("again"), loaded);
}

#[cfg(unix)]
#[test]
fn unreadable_files_in_a_directory_are_diagnostics() {
    let dir = TempDir::new("unreadable");
    dir.write("good.yaml", service("good"));
    std::os::unix::fs::symlink(dir.path().join("missing.yaml"), dir.path().join("broken.yaml"))
        .expect("symlink");
    // A symlink loop must not recurse forever.
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).expect("symlink");

    let loaded = load_path(dir.path()).expect("directory loads");
    assert_eq!(services(&loaded), vec![(1, "good".into())]);
    assert_eq!(loaded.diagnostics.len(), 1, "{:?}", loaded.diagnostics);
    let diagnostic = &loaded.diagnostics[0];
    assert_eq!(diagnostic.severity, Severity::Error);
    assert_eq!(
        diagnostic.file.as_deref(),
        Some(dir.path().join("broken.yaml").display().to_string().as_str())
    );
    assert!(
        diagnostic.message.starts_with("cannot read file: "),
        "{}",
        diagnostic.message
    );
}

#[test]
fn a_file_path_loads_that_file_whatever_its_extension() {
    let dir = TempDir::new("file");
    let path = dir.write("manifest.txt", format!("# c\n{}", service("t")));
    let loaded = load_path(&path).expect("file loads");
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(
        loaded.inputs.services[0].source,
        Source::new(path.display().to_string(), 2)
    );
    assert!(!is_manifest_file(&path));
    assert!(is_manifest_file(&dir.path().join("x.Yml")));
    assert!(!is_manifest_file(&dir.path().join(".x.yaml")));
}

#[test]
fn a_missing_path_is_a_load_error() {
    let dir = TempDir::new("missing");
    let path = dir.path().join("does-not-exist");
    let error = load_path(&path).expect_err("missing path");
    let LoadError::Read {
        path: reported,
        source,
    } = &error;
    assert_eq!(reported, &path);
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("No such file or directory"), "{message}");
}

#[test]
fn messages_stay_on_one_line() {
    let text = "apiVersion: v1\nkind: \"Weird\\nKind\\u001b\"\nmetadata: {name: \"a\\nb\"}\n";
    let loaded = load_str("w.yaml", text);
    assert_eq!(
        warnings(&loaded)
            .iter()
            .map(|d| (d.object.clone(), d.message.clone()))
            .collect::<Vec<_>>(),
        vec![(
            Some("Weird\\nKind\\u{1b} a\\nb".to_string()),
            "unknown kind v1/Weird\\nKind\\u{1b}; ignored".to_string()
        )]
    );
}

#[test]
fn names_kubernetes_would_refuse_are_refused_per_kind() {
    let doc = |api: &str, kind: &str, ns: &str, name: &str| {
        format!(
            "---\napiVersion: {api}\nkind: {kind}\nmetadata:\n  namespace: \"{ns}\"\n  name: \"{name}\"\n"
        )
    };
    let gw = "gateway.networking.k8s.io/v1";
    let cases = [
        // (document, field refused or None when it loads)
        (doc("v1", "Service", "a", "b/c"), Some("metadata.name")),
        (doc("v1", "Service", "a/b", "c"), Some("metadata.namespace")),
        // Service names are DNS-1035 labels: no leading digit, no dot.
        (doc("v1", "Service", "a", "1web"), Some("metadata.name")),
        (doc("v1", "Service", "a", "web.v1"), Some("metadata.name")),
        (doc("v1", "Service", "a", "web-1"), None),
        (doc("v1", "Secret", "a", "tls.example-1"), None),
        (doc("v1", "Secret", "a", "Tls"), Some("metadata.name")),
        (doc("v1", "Secret", "a", "tls..x"), Some("metadata.name")),
        (doc(gw, "HTTPRoute", "a", "r_1"), Some("metadata.name")),
        (doc(gw, "HTTPRoute", "a", "r."), Some("metadata.name")),
        (doc(gw, "HTTPRoute", "a", ".."), Some("metadata.name")),
        (doc(gw, "HTTPRoute", "a", "r.v1") + "spec: {}\n", None),
        (doc(gw, "HTTPRoute", "-a", "r"), Some("metadata.namespace")),
        (doc(gw, "HTTPRoute", "a.b", "r"), Some("metadata.namespace")),
        (doc("v1", "Secret", "infra", &"g".repeat(253)), None),
        (
            doc(gw, "Gateway", "infra", &"g".repeat(254)),
            Some("metadata.name"),
        ),
        (
            doc(gw, "GRPCRoute", &"n".repeat(64), "g"),
            Some("metadata.namespace"),
        ),
        (doc(gw, "ReferenceGrant", "a", "x%2Fy"), Some("metadata.name")),
        (
            doc("discovery.k8s.io/v1", "EndpointSlice", "a", "web-1/x"),
            Some("metadata.name"),
        ),
        // Namespaces are labels; cluster-scoped kinds have no namespace.
        (doc("v1", "Namespace", "", "a.b"), Some("metadata.name")),
        (doc("v1", "Namespace", "", "team-a"), None),
        (
            doc(gw, "GatewayClass", "ignored/here", "portcullis") + "spec: {controllerName: x}\n",
            None,
        ),
        (doc(gw, "GatewayClass", "", "Portcullis"), Some("metadata.name")),
        (
            doc("gateway.portcullis.dev/v1alpha1", "TrafficPolicy", "a", "p/q"),
            Some("metadata.name"),
        ),
    ];
    for (text, refused) in cases {
        let loaded = load_str("n.yaml", &text);
        match refused {
            None => {
                assert!(loaded.diagnostics.is_empty(), "{text}: {:#?}", loaded.diagnostics);
                assert_eq!(loaded.inputs.len(), 1, "{text}");
            }
            Some(field) => {
                assert_eq!(loaded.inputs.len(), 0, "{text} is refused");
                let [d] = loaded.diagnostics.as_slice() else {
                    panic!("{text}: one diagnostic: {:#?}", loaded.diagnostics)
                };
                assert_eq!(d.severity, Severity::Error);
                assert!(
                    d.message.starts_with(&format!("{field}: ")),
                    "{text}: {}",
                    d.message
                );
                assert!(d.message.contains("is not a valid"), "{}", d.message);
                assert!(d.object.is_some(), "{d:?}");
                // The line of the field (namespace on line 5, name on 6).
                let line = if field == "metadata.namespace" { 5 } else { 6 };
                assert_eq!(d.file.as_deref(), Some(format!("n.yaml:{line}").as_str()));
            }
        }
    }
}

#[test]
fn many_unreadable_values_keep_the_route_and_a_hopeless_rule_reads_as_empty() {
    // 200 rules with an unknown filter type each (every one found: the
    // bound is per rule), and one rule with 100 unreadable values.
    let mut text = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  rules:\n",
    );
    for i in 0..200 {
        text.push_str(&format!(
            "  - matches: [{{path: {{value: /r{i}}}}}]\n    filters: [{{type: Foo{i}}}]\n"
        ));
    }
    text.push_str("  - matches: [{path: {value: /many}}]\n    filters:\n");
    for _ in 0..100 {
        text.push_str("    - {type: Bar}\n");
    }
    let started = std::time::Instant::now();
    let loaded = load_str("many.yaml", &text);
    let [route] = loaded.inputs.http_routes.as_slice() else {
        panic!("the route is kept: {:?}", loaded.diagnostics.first())
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let rules: std::collections::BTreeSet<usize> = route.unreadable.iter().map(|u| u.rule).collect();
    assert_eq!(rules.len(), 201);
    let hopeless = route
        .unreadable
        .iter()
        .find(|u| u.field() == "spec.rules[200]")
        .expect("the hopeless rule is reported as a whole");
    assert!(
        hopeless.message.contains("the rule is read as an empty rule"),
        "{hopeless}"
    );
    assert_eq!(loaded.diagnostics.len(), route.unreadable.len());
    assert!(
        !loaded.has_errors(),
        "a kept route's unreadable values do not break the file"
    );
}

#[test]
fn an_unreadable_route_hostname_becomes_an_invalid_one_never_a_wider_one() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: app}
spec:
  parentRefs: [{name: gw}]
  hostnames: [5, a.example.com]
";
    let loaded = load_str("g.yaml", text);
    let [route] = loaded.inputs.grpc_routes.as_slice() else {
        panic!("the GRPCRoute is kept: {:#?}", loaded.diagnostics)
    };
    let hostnames = route.object.spec.hostnames.clone().unwrap_or_default();
    // Same length and order: the bad entry stays, as a string no hostname
    // check accepts (the translator refuses it like any invalid hostname).
    assert_eq!(hostnames.len(), 2, "{hostnames:?}");
    assert!(
        hostnames[0].contains("unreadable") && hostnames[0].contains(' '),
        "{hostnames:?}"
    );
    assert_eq!(hostnames[1], "a.example.com");
    assert_eq!(loaded.diagnostics.len(), 1, "{:#?}", loaded.diagnostics);
    assert_eq!(loaded.diagnostics[0].file.as_deref(), Some("g.yaml:6"));
    assert!(
        loaded.diagnostics[0]
            .message
            .starts_with("spec.hostnames[0]: invalid type: number, expected a string"),
        "{:#?}",
        loaded.diagnostics
    );
    assert!(!loaded.has_errors());
}
