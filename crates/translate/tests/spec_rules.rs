//! Table tests: one row per MUST of the Gateway API spec that binding and
//! listener processing implement, asserted on status output.

mod common;

use common::*;

fn gateway(listeners: &str) -> String {
    format!(
        "{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
{listeners}"
    )
}

fn route(ns: &str, name: &str, parent: &str, hostnames: &str) -> String {
    format!(
        "---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}}}
spec:
  parentRefs: [{parent}]
  hostnames: {hostnames}
  rules:
  - backendRefs: [{{name: web, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80}}]
"
    )
}

struct Row {
    name: &'static str,
    listeners: &'static str,
    route_ns: &'static str,
    parent: &'static str,
    hostnames: &'static str,
    accepted: (&'static str, &'static str),
}

const ALL_HTTP: &str =
    "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n";

#[test]
fn route_acceptance_rows() {
    let rows = [
        Row {
            name: "same namespace, default allowedRoutes: attaches",
            listeners: "  - {name: http, protocol: HTTP, port: 80}\n",
            route_ns: "infra",
            parent: "{name: gw}",
            hostnames: "[]",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "other namespace, default allowedRoutes (Same): MUST NOT attach",
            listeners: "  - {name: http, protocol: HTTP, port: 80}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "other namespace, from All: attaches",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "sectionName matches a listener",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: http}",
            hostnames: "[]",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "sectionName names no listener: NoMatchingParent",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: nope}",
            hostnames: "[]",
            accepted: ("False", "NoMatchingParent"),
        },
        Row {
            name: "port names no listener: NoMatchingParent",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra, port: 81}",
            hostnames: "[]",
            accepted: ("False", "NoMatchingParent"),
        },
        Row {
            name: "port and sectionName both match",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: http, port: 80}",
            hostnames: "[]",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "route hostname disjoint from listener: NoMatchingListenerHostname",
            listeners: "  - {name: http, protocol: HTTP, port: 80, hostname: a.example.com, allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[b.example.com]",
            accepted: ("False", "NoMatchingListenerHostname"),
        },
        Row {
            name: "route wildcard covers listener hostname: attaches",
            listeners: "  - {name: http, protocol: HTTP, port: 80, hostname: a.example.com, allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "['*.example.com']",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "listener kinds exclude HTTPRoute: NotAllowedByListeners",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {kinds: [{kind: GRPCRoute}], namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "selector matches the namespace label set by the API server",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: app}}}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("True", "Accepted"),
        },
        Row {
            name: "selector does not match",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: x}}}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "from: Selector without a selector selects nothing (not every namespace)",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "from: Selector with a misspelt selector selects nothing",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selectr: {matchLabels: {kubernetes.io/metadata.name: app}}}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "from: Selector with an empty selector selects nothing",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selector: {}}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "from: Selector with empty matchLabels selects nothing",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {}}}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "a route only on an unaccepted listener is not accepted",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n  - {name: tcp, protocol: TCP, port: 90, allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: tcp}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "a route only on a listener with an invalid hostname is not accepted",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n  - {name: bad, protocol: HTTP, port: 80, hostname: \"a\\nb.example.com\", allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: bad}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "a route only on a listener with an invalid name is not accepted",
            listeners: "  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n  - {name: Bad_Name, protocol: HTTP, port: 81, allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: Bad_Name}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "a route only on a conflicted listener is not accepted",
            listeners: "  - {name: a, protocol: HTTP, port: 80, hostname: x.com, allowedRoutes: {namespaces: {from: All}}}\n  - {name: b, protocol: HTTP, port: 80, hostname: x.com, allowedRoutes: {namespaces: {from: All}}}\n",
            route_ns: "app",
            parent: "{name: gw, namespace: infra, sectionName: b}",
            hostnames: "[]",
            accepted: ("False", "NotAllowedByListeners"),
        },
        Row {
            name: "a route whose only hostname has a LF is refused, not a catch-all",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[\"a\\nb.example.com\"]",
            accepted: ("False", "UnsupportedValue"),
        },
        Row {
            name: "a route with one valid hostname beside an invalid one attaches",
            listeners: ALL_HTTP,
            route_ns: "app",
            parent: "{name: gw, namespace: infra}",
            hostnames: "[ok.example.com, \"a\\u0000b.example.com\"]",
            accepted: ("True", "Accepted"),
        },
    ];
    let mut failures = Vec::new();
    for row in &rows {
        let yaml = gateway(row.listeners) + &route(row.route_ns, "r", row.parent, row.hostnames);
        let out = run(&yaml);
        let got = sr(parent_condition(&out, (row.route_ns, "r"), "gw", "Accepted"));
        if got != (row.accepted.0.to_string(), row.accepted.1.to_string()) {
            failures.push(format!(
                "{}: expected Accepted={:?}, got {:?}",
                row.name, row.accepted, got
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn attached_routes_counts_only_accepted_attachments() {
    let yaml = gateway(
        "  - {name: a, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n  - {name: b, protocol: HTTP, port: 8080}\n",
    ) + &route("app", "r1", "{name: gw, namespace: infra}", "[]")
        + &route("app", "r2", "{name: gw, namespace: infra, sectionName: a}", "[]");
    let out = run(&yaml);
    assert_eq!(
        listener_status(&out, ("infra", "gw"), "a").map(|l| l["attachedRoutes"].clone()),
        Some(2.into())
    );
    // b allows only its own namespace: app routes do not count there.
    assert_eq!(
        listener_status(&out, ("infra", "gw"), "b").map(|l| l["attachedRoutes"].clone()),
        Some(0.into())
    );
}

#[test]
fn invalid_route_hostnames_are_never_programmed_and_are_named() {
    let yaml = gateway(ALL_HTTP)
        + &route(
            "app",
            "mixed",
            "{name: gw, namespace: infra}",
            "[ok.example.com, \"a\\rb.example.com\"]",
        )
        + &route(
            "app",
            "bad",
            "{name: gw, namespace: infra}",
            "[\"x\\ny.example.com\"]",
        );
    let out = run(&yaml);
    let domains: Vec<String> = out.gateways["infra/gw"]
        .route_configurations()
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .flat_map(|vh| vh.domains)
        .collect();
    assert_eq!(
        domains,
        ["ok.example.com"],
        "neither the bad hostname nor a catch-all is programmed"
    );
    let pi = parent_condition(&out, ("app", "mixed"), "gw", "PartiallyInvalid").expect("PartiallyInvalid");
    assert!(
        pi["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.hostnames[1]")),
        "{pi}"
    );
    assert_eq!(
        listener_status(&out, ("infra", "gw"), "http").map(|l| l["attachedRoutes"].clone()),
        Some(1.into()),
        "the refused route is not counted"
    );
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.message.contains("spec.hostnames[0]")
                && d.object.as_deref() == Some("HTTPRoute app/bad")),
        "{:?}",
        out.diagnostics
    );
}

#[test]
fn observed_generation_follows_metadata_generation() {
    let yaml = gateway(ALL_HTTP).replace(
        "{name: gw, namespace: infra}",
        "{name: gw, namespace: infra, generation: 7}",
    ) + &route("app", "r", "{name: gw, namespace: infra}", "[]").replace(
        "{name: r, namespace: app}",
        "{name: r, namespace: app, generation: 3}",
    );
    let out = run(&yaml);
    let gw = status(&out, "Gateway", Some("infra"), "gw").expect("gateway status");
    assert!(
        gw["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["observedGeneration"] == 7)
    );
    let acc = parent_condition(&out, ("app", "r"), "gw", "Accepted").expect("accepted");
    assert_eq!(acc["observedGeneration"], 3);
}

#[test]
fn status_parent_ref_sets_group_kind_and_namespace_explicitly() {
    let out = run(&(gateway(ALL_HTTP) + &route("app", "r", "{name: gw, namespace: infra}", "[]")));
    let st = status(&out, "HTTPRoute", Some("app"), "r").expect("route status");
    let p = &st["parents"][0]["parentRef"];
    assert_eq!(p["group"], "gateway.networking.k8s.io");
    assert_eq!(p["kind"], "Gateway");
    assert_eq!(p["namespace"], "infra");
    assert_eq!(
        st["parents"][0]["controllerName"],
        "portcullis.dev/gateway-controller"
    );
}

#[test]
fn listener_conflicts_and_protocols() {
    let out = run(&gateway(
        "  - {name: a, protocol: HTTP, port: 80, hostname: x.com}\n  - {name: b, protocol: HTTP, port: 80, hostname: x.com}\n  - {name: c, protocol: HTTPS, port: 80, hostname: y.com, tls: {certificateRefs: [{name: s}]}}\n  - {name: d, protocol: TCP, port: 90}\n",
    ));
    let l = |n: &str| {
        listener_status(&out, ("infra", "gw"), n)
            .expect("listener")
            .clone()
    };
    assert_eq!(
        sr(condition(&l("a")["conditions"], "Conflicted")),
        ("False".into(), "NoConflicts".into())
    );
    assert_eq!(
        sr(condition(&l("b")["conditions"], "Conflicted")),
        ("True".into(), "HostnameConflict".into())
    );
    assert_eq!(
        sr(condition(&l("c")["conditions"], "Conflicted")),
        ("True".into(), "ProtocolConflict".into())
    );
    assert_eq!(
        sr(condition(&l("d")["conditions"], "Accepted")),
        ("False".into(), "UnsupportedProtocol".into())
    );
    // A conflicted listener is neither accepted nor programmed, with the
    // conflict's reason (upstream ListenerSetProtocolConflict).
    assert_eq!(
        sr(condition(&l("b")["conditions"], "Programmed")),
        ("False".into(), "HostnameConflict".into())
    );
    assert_eq!(
        sr(condition(&l("b")["conditions"], "Accepted")),
        ("False".into(), "HostnameConflict".into())
    );
    assert_eq!(
        sr(condition(&l("a")["conditions"], "Programmed")),
        ("True".into(), "Programmed".into())
    );
    // Only the programmed listener reaches Envoy.
    let xds = &out.gateways["infra/gw"];
    assert_eq!(xds.listeners.len(), 1);
}

#[test]
fn invalid_route_kinds_keep_valid_ones_in_supported_kinds() {
    let out = run(&gateway(
        "  - {name: a, protocol: HTTP, port: 80, allowedRoutes: {kinds: [{kind: HTTPRoute}, {kind: TCPRoute}]}}\n  - {name: b, protocol: HTTP, port: 81, allowedRoutes: {kinds: [{kind: Nope}]}}\n",
    ));
    let a = listener_status(&out, ("infra", "gw"), "a").expect("a").clone();
    assert_eq!(
        sr(condition(&a["conditions"], "ResolvedRefs")),
        ("False".into(), "InvalidRouteKinds".into())
    );
    assert_eq!(
        a["supportedKinds"],
        serde_json::json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
    );
    let b = listener_status(&out, ("infra", "gw"), "b").expect("b").clone();
    assert_eq!(b["supportedKinds"], serde_json::json!([]));
}
