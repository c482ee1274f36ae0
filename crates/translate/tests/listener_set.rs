//! ListenerSets (issue 12 point 7) and route status fidelity (point 8):
//! admission by `allowedListeners`, merge precedence, binding through a
//! `ListenerSet` parentRef, isolation between Gateway and ListenerSet
//! listeners, and the status each object gets.

mod common;

use common::*;
use serde_json::Value;

fn gateway(allowed: &str) -> String {
    format!(
        "{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  {allowed}
  listeners:
  - {{name: http, protocol: HTTP, port: 80, hostname: \"*.example.com\", allowedRoutes: {{namespaces: {{from: All}}}}}}
"
    )
}

fn listener_set(ns: &str, name: &str, created: &str, listeners: &str) -> String {
    format!(
        "---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: {name}, namespace: {ns}, creationTimestamp: \"{created}\"}}
spec:
  parentRef: {{name: gw, namespace: infra}}
  listeners:
{listeners}"
    )
}

fn route(name: &str, parent: &str, path: &str) -> String {
    format!(
        "---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: infra}}
spec:
  parentRefs: [{parent}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
    backendRefs: [{{name: web, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: infra}}
spec:
  ports: [{{name: http, port: 80}}]
"
    )
}

fn conds(st: &Value) -> &Value {
    &st["conditions"]
}

fn set_listener<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .unwrap_or(&Value::Null)
}

const FOO: &str = "  - {name: foo, protocol: HTTP, port: 80, hostname: \"*.foo.example.com\", allowedRoutes: {namespaces: {from: All}}}\n";

#[test]
fn a_gateway_without_allowed_listeners_admits_none() {
    for allowed in ["", "allowedListeners: {namespaces: {from: None}}"] {
        let out = run(&(gateway(allowed) + &listener_set("infra", "ls", "2026-01-01T00:00:00Z", FOO)));
        let st = status(&out, "ListenerSet", Some("infra"), "ls").expect("ListenerSet status");
        assert_eq!(
            sr(condition(conds(&st), "Accepted")),
            ("False".into(), "NotAllowed".into())
        );
        assert_eq!(
            sr(condition(conds(&st), "Programmed")),
            ("False".into(), "NotAllowed".into())
        );
        // Its listener never reaches Envoy.
        let domains: Vec<String> = out.gateways["infra/gw"]
            .routes
            .iter()
            .flat_map(|rc| rc.decode().virtual_hosts)
            .flat_map(|vh| vh.domains)
            .collect();
        assert!(
            !domains.iter().any(|d| d == "*.foo.example.com"),
            "{allowed:?}: {domains:?}"
        );
    }
}

#[test]
fn selector_admits_only_labelled_namespaces_and_an_empty_selector_none() {
    let ns = "---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {tier: edge}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
";
    let input = |sel: &str| {
        gateway(&format!(
            "allowedListeners: {{namespaces: {{from: Selector{sel}}}}}"
        )) + ns
            + &listener_set("team", "a", "2026-01-01T00:00:00Z", FOO)
            + &listener_set(
                "other",
                "b",
                "2026-01-01T00:00:00Z",
                "  - {name: bar, protocol: HTTP, port: 80, hostname: bar.example.com}\n",
            )
    };
    let out = run(&input(", selector: {matchLabels: {tier: edge}}"));
    let a = status(&out, "ListenerSet", Some("team"), "a").expect("a");
    let b = status(&out, "ListenerSet", Some("other"), "b").expect("b");
    assert_eq!(
        sr(condition(conds(&a), "Accepted")),
        ("True".into(), "Accepted".into())
    );
    assert_eq!(
        sr(condition(conds(&b), "Accepted")),
        ("False".into(), "NotAllowed".into())
    );
    let gw = status(&out, "Gateway", Some("infra"), "gw").expect("gw");
    assert_eq!(gw["attachedListenerSets"], 1);
    // The Gateway's status lists its own listeners only.
    assert_eq!(gw["listeners"].as_array().map(Vec::len), Some(1));

    let out = run(&input(""));
    let a = status(&out, "ListenerSet", Some("team"), "a").expect("a");
    assert_eq!(
        sr(condition(conds(&a), "Accepted")),
        ("False".into(), "NotAllowed".into())
    );
}

#[test]
fn merge_precedence_gateway_then_creation_time_then_name() {
    let z = "  - {name: z, protocol: HTTP, port: 80, hostname: z.example.com}\n";
    let tcp = "  - {name: tcp, protocol: TCP, port: 80}\n";
    let input = gateway("allowedListeners: {namespaces: {from: Same}}")
        // Created later but named first: loses z.example.com to "old".
        + &listener_set("infra", "a-new", "2026-01-02T00:00:00Z", &format!("{z}{tcp}"))
        + &listener_set("infra", "old", "2026-01-01T00:00:00Z", z);
    let out = run(&input);
    let new = status(&out, "ListenerSet", Some("infra"), "a-new").expect("a-new");
    let old = status(&out, "ListenerSet", Some("infra"), "old").expect("old");
    assert_eq!(
        sr(condition(conds(set_listener(&old, "z")), "Conflicted")),
        ("False".into(), "NoConflicts".into())
    );
    for (l, why) in [("z", "HostnameConflict"), ("tcp", "ProtocolConflict")] {
        let l = set_listener(&new, l);
        for t in ["Accepted", "Programmed"] {
            assert_eq!(sr(condition(conds(l), t)), ("False".into(), why.into()), "{t}");
        }
        assert_eq!(sr(condition(conds(l), "Conflicted")), ("True".into(), why.into()));
    }
    // No valid listener left: the set is not accepted.
    assert_eq!(
        sr(condition(conds(&new), "Accepted")),
        ("False".into(), "ListenersNotValid".into())
    );
    let gw = status(&out, "Gateway", Some("infra"), "gw").expect("gw");
    assert_eq!(gw["attachedListenerSets"], 1);
    assert_eq!(
        sr(condition(conds(&gw), "Accepted")),
        ("True".into(), "Accepted".into())
    );
}

#[test]
fn routes_bind_by_kind_and_listeners_stay_isolated() {
    let input = gateway("allowedListeners: {namespaces: {from: Same}}")
        + &listener_set("infra", "ls", "2026-01-01T00:00:00Z", FOO)
        + &route("on-gw", "{name: gw}", "/gw")
        + &route("on-ls", "{kind: ListenerSet, name: ls, sectionName: foo}", "/ls")
        + &route("gw-section-of-ls", "{name: gw, sectionName: foo}", "/x");
    let out = run(&input);
    assert_eq!(
        sr(parent_condition(&out, ("infra", "on-ls"), "ls", "Accepted")),
        ("True".into(), "Accepted".into())
    );
    let st = status(&out, "HTTPRoute", Some("infra"), "on-ls").expect("route");
    assert_eq!(st["parents"][0]["parentRef"]["kind"], "ListenerSet");
    // A Gateway parentRef never reaches a ListenerSet listener.
    assert_eq!(
        sr(parent_condition(
            &out,
            ("infra", "gw-section-of-ls"),
            "gw",
            "Accepted"
        )),
        ("False".into(), "NoMatchingParent".into())
    );
    let ls = status(&out, "ListenerSet", Some("infra"), "ls").expect("ls");
    assert_eq!(set_listener(&ls, "foo")["attachedRoutes"], 1);
    let gw = listener_status(&out, ("infra", "gw"), "http").expect("gw listener");
    assert_eq!(gw["attachedRoutes"], 1);
    // Isolation: *.foo.example.com is its own virtual host holding only the
    // ListenerSet's route; Envoy picks it for bar.foo.example.com, so the
    // Gateway listener's route (on *.example.com) does not answer there.
    let vhs: Vec<_> = out.gateways["infra/gw"]
        .routes
        .iter()
        .flat_map(|rc| rc.decode().virtual_hosts)
        .collect();
    let names = |domain: &str| -> Vec<String> {
        vhs.iter()
            .filter(|v| v.domains.iter().any(|d| d == domain))
            .flat_map(|v| v.routes.iter().map(|r| r.name.clone()))
            .collect()
    };
    let foo = names("*.foo.example.com");
    assert!(
        foo.iter().any(|n| n.contains("/on-ls/")) && !foo.iter().any(|n| n.contains("/on-gw/")),
        "{foo:?}"
    );
    let wide = names("*.example.com");
    assert!(
        wide.iter().any(|n| n.contains("/on-gw/")) && !wide.iter().any(|n| n.contains("/on-ls/")),
        "{wide:?}"
    );
}

#[test]
fn a_route_whose_every_rule_is_replaced_is_not_accepted() {
    let bad_rule = "  - matches: [{path: {type: RegularExpression, value: \"(\"}}]\n    backendRefs: [{name: web, port: 80}]\n";
    let good_rule = "  - backendRefs: [{name: web, port: 80}]\n";
    let input = |rules: &str| {
        format!(
            "{}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: infra}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
{rules}---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: infra}}
spec:
  ports: [{{name: http, port: 80}}]
",
            gateway("")
        )
    };
    let out = run(&input(&format!("{bad_rule}{bad_rule}")));
    let acc = parent_condition(&out, ("infra", "r"), "gw", "Accepted").expect("accepted");
    assert_eq!(sr(Some(&acc)), ("False".into(), "UnsupportedValue".into()));
    let msg = acc["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("Replaced Rule (0)") && msg.contains("Replaced Rule (1)"),
        "{msg}"
    );
    assert!(parent_condition(&out, ("infra", "r"), "gw", "PartiallyInvalid").is_none());
    // Still bound (counted) and fenced.
    let l = listener_status(&out, ("infra", "gw"), "http").expect("listener");
    assert_eq!(l["attachedRoutes"], 1);

    let out = run(&input(&format!("{bad_rule}{good_rule}")));
    assert_eq!(
        sr(parent_condition(&out, ("infra", "r"), "gw", "Accepted")),
        ("True".into(), "Accepted".into())
    );
    assert_eq!(
        sr(parent_condition(&out, ("infra", "r"), "gw", "PartiallyInvalid")),
        ("True".into(), "UnsupportedValue".into())
    );
}
