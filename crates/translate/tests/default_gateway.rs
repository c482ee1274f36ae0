//! GEP-3793 Default Gateways: one test per MUST / MUST NOT, on status
//! output (and the xDS where the rule is about what is served).

mod common;

use common::{CLASS, condition, run, status};
use serde_json::Value;

/// A Gateway `ns/name` with one HTTP listener (hostname optional), the given
/// `defaultScope` (None: unset) and `allowedRoutes.namespaces.from`.
fn gateway(ns: &str, name: &str, scope: Option<&str>, from: &str, hostname: Option<&str>) -> String {
    let scope = scope
        .map(|s| format!("  defaultScope: {s}\n"))
        .unwrap_or_default();
    let hostname = hostname
        .map(|h| format!(", hostname: \"{h}\""))
        .unwrap_or_default();
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  gatewayClassName: portcullis\n{scope}  listeners:\n  - {{name: http, protocol: HTTP, port: 80{hostname}, allowedRoutes: {{namespaces: {{from: {from}}}}}}}\n"
    )
}

/// An HTTPRoute with `useDefaultGateways` (None: unset), optional explicit
/// parentRefs (`ns/name`) and hostnames.
fn route(ns: &str, name: &str, use_default: Option<&str>, parents: &[&str], hostnames: &[&str]) -> String {
    let ud = use_default
        .map(|u| format!("  useDefaultGateways: {u}\n"))
        .unwrap_or_default();
    let parents = if parents.is_empty() {
        String::new()
    } else {
        let refs: Vec<String> = parents
            .iter()
            .map(|p| {
                let (pns, pname) = p.split_once('/').unwrap_or(("", p));
                format!("{{name: {pname}, namespace: {pns}}}")
            })
            .collect();
        format!("  parentRefs: [{}]\n", refs.join(", "))
    };
    let hosts = if hostnames.is_empty() {
        String::new()
    } else {
        format!(
            "  hostnames: [{}]\n",
            hostnames
                .iter()
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{ud}{parents}{hosts}  rules:\n  - backendRefs: [{{name: web, port: 80}}]\n"
    )
}

fn parents(out: &translate::Output, ns: &str, name: &str) -> Vec<Value> {
    status(out, "HTTPRoute", Some(ns), name)
        .and_then(|s| s["parents"].as_array().cloned())
        .unwrap_or_default()
}

/// (gateway ns/name, Accepted status, reason, message) per parent entry.
fn entries(out: &translate::Output, ns: &str, name: &str) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = parents(out, ns, name)
        .iter()
        .map(|p| {
            let a = condition(&p["conditions"], "Accepted")
                .cloned()
                .unwrap_or_default();
            (
                format!(
                    "{}/{}",
                    p["parentRef"]["namespace"].as_str().unwrap_or(""),
                    p["parentRef"]["name"].as_str().unwrap_or("")
                ),
                a["status"].as_str().unwrap_or("").to_string(),
                a["reason"].as_str().unwrap_or("").to_string(),
                a["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn bound(gw: &str) -> (String, String, String, String) {
    (
        gw.into(),
        "True".into(),
        "Accepted".into(),
        "Route is bound to default Gateway".into(),
    )
}

/// Names of the Envoy routes a Gateway serves.
fn served(out: &translate::Output, gw: &str) -> Vec<String> {
    out.gateways
        .get(gw)
        .map(|g| {
            g.route_configurations()
                .into_iter()
                .flat_map(|rc| rc.virtual_hosts)
                .flat_map(|vh| vh.routes)
                .map(|r| r.name)
                .collect()
        })
        .unwrap_or_default()
}

fn default_condition(out: &translate::Output, ns: &str, name: &str) -> Option<Value> {
    status(out, "Gateway", Some(ns), name)
        .and_then(|s| condition(&s["conditions"], "DefaultGateway").cloned())
}

#[test]
fn a_defaulted_route_is_claimed_by_a_default_gateway_and_served() {
    let out = run(&format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        route("app", "r", Some("All"), &[], &[])
    ));
    assert_eq!(entries(&out, "app", "r"), vec![bound("infra/gw")]);
    assert!(!served(&out, "infra/gw").is_empty());
}

#[test]
fn every_default_gateway_claims_the_route() {
    let out = run(&format!(
        "{CLASS}{}{}{}",
        gateway("infra", "gw-a", Some("All"), "All", None),
        gateway("infra", "gw-b", Some("All"), "All", None),
        route("app", "r", Some("All"), &[], &[])
    ));
    assert_eq!(
        entries(&out, "app", "r"),
        vec![bound("infra/gw-a"), bound("infra/gw-b")]
    );
    assert!(!served(&out, "infra/gw-a").is_empty() && !served(&out, "infra/gw-b").is_empty());
}

#[test]
fn gateways_without_default_scope_all_do_not_claim() {
    for scope in [None, Some("None")] {
        let out = run(&format!(
            "{CLASS}{}{}",
            gateway("infra", "gw", scope, "All", None),
            route("app", "r", Some("All"), &[], &[])
        ));
        assert!(entries(&out, "app", "r").is_empty(), "{scope:?}");
        assert!(served(&out, "infra/gw").is_empty(), "{scope:?}");
    }
}

#[test]
fn routes_not_asking_are_ignored() {
    for ud in [None, Some("None")] {
        let out = run(&format!(
            "{CLASS}{}{}",
            gateway("infra", "gw", Some("All"), "All", None),
            route("app", "r", ud, &[], &[])
        ));
        assert!(entries(&out, "app", "r").is_empty(), "{ud:?}");
        assert!(served(&out, "infra/gw").is_empty(), "{ud:?}");
    }
}

#[test]
fn allowed_routes_still_decide() {
    // Same namespace only: a route from another namespace is refused, with
    // the reason, and not served; one from the Gateway's namespace is bound.
    let out = run(&format!(
        "{CLASS}{}{}{}",
        gateway("infra", "gw", Some("All"), "Same", None),
        route("app", "r", Some("All"), &[], &[]),
        route("infra", "mine", Some("All"), &[], &[])
    ));
    let e = entries(&out, "app", "r");
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].1.as_str(), e[0].2.as_str()),
        ("False", "NotAllowedByListeners")
    );
    assert_eq!(entries(&out, "infra", "mine"), vec![bound("infra/gw")]);
    let names = served(&out, "infra/gw");
    assert!(names.iter().all(|n| !n.contains("/app/r/")), "{names:?}");
    assert!(names.iter().any(|n| n.contains("/infra/mine/")), "{names:?}");
}

#[test]
fn listener_hostnames_still_intersect() {
    let out = run(&format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", Some("*.example.com")),
        route("app", "r", Some("All"), &[], &["other.org"])
    ));
    let e = entries(&out, "app", "r");
    assert_eq!(
        (e[0].1.as_str(), e[0].2.as_str()),
        ("False", "NoMatchingListenerHostname")
    );
}

#[test]
fn explicit_parent_refs_still_bind_too() {
    let out = run(&format!(
        "{CLASS}{}{}{}",
        gateway("infra", "default", Some("All"), "All", None),
        gateway("infra", "explicit", None, "All", None),
        route("app", "r", Some("All"), &["infra/explicit"], &[])
    ));
    assert_eq!(
        entries(&out, "app", "r"),
        vec![
            bound("infra/default"),
            (
                "infra/explicit".into(),
                "True".into(),
                "Accepted".into(),
                "Route is accepted".into()
            )
        ]
    );
}

#[test]
fn an_explicit_reference_to_a_default_gateway_is_its_one_entry() {
    let out = run(&format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        route("app", "r", Some("All"), &["infra/gw"], &[])
    ));
    assert_eq!(
        entries(&out, "app", "r"),
        vec![(
            "infra/gw".into(),
            "True".into(),
            "Accepted".into(),
            "Route is accepted".into()
        )]
    );
}

#[test]
fn the_claim_names_the_gateway_and_parent_refs_stay_untouched() {
    let text = format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        route("app", "r", Some("All"), &[], &[])
    );
    let loaded = api::loader::load_str("t.yaml", &text);
    let out = translate::translate(&loaded.inputs, &translate::Settings::default());
    let p = &parents(&out, "app", "r")[0]["parentRef"];
    assert_eq!(p["group"], "gateway.networking.k8s.io");
    assert_eq!(p["kind"], "Gateway");
    assert_eq!(p["namespace"], "infra");
    assert_eq!(p["name"], "gw");
    assert!(p.get("sectionName").is_none() && p.get("port").is_none(), "{p}");
    // The input object still has no parentRefs.
    assert!(loaded.inputs.http_routes[0].object.spec.parent_refs.is_none());
}

#[test]
fn default_gateways_carry_the_condition_and_others_do_not() {
    let out = run(&format!(
        "{CLASS}{}{}{}",
        gateway("infra", "yes", Some("All"), "All", None),
        gateway("infra", "no", Some("None"), "All", None),
        gateway("infra", "unset", None, "All", None)
    ));
    let c = default_condition(&out, "infra", "yes").expect("DefaultGateway on the default Gateway");
    assert_eq!(
        (c["status"].as_str(), c["message"].as_str()),
        (Some("True"), Some("Gateway has default scope All"))
    );
    assert!(default_condition(&out, "infra", "no").is_none());
    assert!(default_condition(&out, "infra", "unset").is_none());
}

#[test]
fn default_scope_changes_nothing_about_listeners() {
    let with = run(&format!(
        "{CLASS}{}",
        gateway("infra", "gw", Some("All"), "All", None)
    ));
    let without = run(&format!("{CLASS}{}", gateway("infra", "gw", None, "All", None)));
    assert_eq!(with.gateways, without.gateways);
    let l = |o: &translate::Output| status(o, "Gateway", Some("infra"), "gw").map(|s| s["listeners"].clone());
    assert_eq!(l(&with), l(&without));
}

#[test]
fn undefaulting_or_deleting_the_gateway_unbinds_its_routes() {
    let r = route("app", "r", Some("All"), &[], &[]);
    let before = run(&format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        r
    ));
    assert_eq!(entries(&before, "app", "r"), vec![bound("infra/gw")]);
    let undefaulted = run(&format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("None"), "All", None),
        r
    ));
    assert!(entries(&undefaulted, "app", "r").is_empty());
    assert!(served(&undefaulted, "infra/gw").is_empty());
    let deleted = run(&format!("{CLASS}{r}"));
    assert!(entries(&deleted, "app", "r").is_empty());
}

#[test]
fn attached_routes_count_defaulted_routes() {
    let out = run(&format!(
        "{CLASS}{}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        route("app", "r1", Some("All"), &[], &[]),
        route("app", "r2", Some("All"), &[], &[])
    ));
    let l = common::listener_status(&out, ("infra", "gw"), "http").expect("listener");
    assert_eq!(l["attachedRoutes"], 2);
}

#[test]
fn grpc_routes_are_claimed_too() {
    let out = run(&format!(
        "{CLASS}{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{name: g, namespace: app}}\nspec:\n  useDefaultGateways: All\n  rules:\n  - backendRefs: [{{name: grpc, port: 9000}}]\n",
        gateway("infra", "gw", Some("All"), "All", None)
    ));
    let st = status(&out, "GRPCRoute", Some("app"), "g").expect("GRPCRoute status");
    let a = condition(&st["parents"][0]["conditions"], "Accepted")
        .cloned()
        .unwrap_or_default();
    assert_eq!(a["message"], "Route is bound to default Gateway");
    assert!(
        served(&out, "infra/gw")
            .iter()
            .any(|n| n.starts_with("grpcroute/app/g/"))
    );
}

#[test]
fn the_singular_spelling_claims_with_a_warning() {
    let text = format!(
        "{CLASS}{}{}",
        gateway("infra", "gw", Some("All"), "All", None),
        route("app", "r", Some("All"), &[], &[]).replace("useDefaultGateways", "useDefaultGateway")
    );
    let out = run(&text);
    assert_eq!(entries(&out, "app", "r"), vec![bound("infra/gw")]);
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.message.contains("useDefaultGateway") && d.message.contains("useDefaultGateways")),
        "{:?}",
        out.diagnostics
    );
}
