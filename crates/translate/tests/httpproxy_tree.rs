//! HTTPProxy include trees and tree-wide duplicate detection: one table
//! test per rule of README "HTTPProxy" (issue 14, "How it is checked",
//! first bullet).

use api::loader::load_str;
use translate::httpproxy::conditions::PathMatch;
use translate::httpproxy::tree::{Action, VirtualHostPlan};
use translate::httpproxy::{Analysis, HttpProxySettings, ProxyId, analyze};
use translate::index::Index;

/// Loads `yaml` (no load errors allowed unless `lenient`) and analyzes it.
fn run_with(yaml: &str, settings: &HttpProxySettings, lenient: bool, check: impl FnOnce(&Analysis<'_>)) {
    let loaded = load_str("t.yaml", yaml);
    if !lenient {
        assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    }
    let index = Index::new(&loaded.inputs);
    let analysis = analyze(&loaded.inputs, &index, settings);
    check(&analysis);
}

fn run(yaml: &str, check: impl FnOnce(&Analysis<'_>)) {
    run_with(yaml, &HttpProxySettings::default(), false, check);
}

fn id(s: &str) -> ProxyId {
    let (ns, name) = s.split_once('/').expect("ns/name");
    ProxyId::new(ns, name)
}

/// `(type, reason, message)` of every error of `proxy`.
fn errors(a: &Analysis<'_>, proxy: &str) -> Vec<(String, String, String)> {
    a.statuses.proxies[&id(proxy)]
        .errors
        .iter()
        .map(|e| (e.type_.to_string(), e.reason.to_string(), e.message.clone()))
        .collect()
}

fn warnings(a: &Analysis<'_>, proxy: &str) -> Vec<(String, String, String)> {
    a.statuses.proxies[&id(proxy)]
        .warnings
        .iter()
        .map(|e| (e.type_.to_string(), e.reason.to_string(), e.message.clone()))
        .collect()
}

fn t(a: &str, b: &str, c: &str) -> (String, String, String) {
    (a.to_string(), b.to_string(), c.to_string())
}

fn vh<'x, 'a>(a: &'x Analysis<'a>, root: &str) -> &'x VirtualHostPlan<'a> {
    a.virtual_hosts
        .iter()
        .find(|v| v.root == id(root))
        .expect("root served")
}

/// Programmed routes as `(merged conditions, holder, first service)`.
fn programmed(a: &Analysis<'_>, root: &str) -> Vec<(String, String, String)> {
    vh(a, root)
        .entries
        .iter()
        .filter(|e| e.programmed)
        .map(|e| {
            let what = match &e.action {
                Action::Route { route, .. } => {
                    route.services.first().map_or("-".to_string(), |s| s.name.clone())
                }
                Action::BadGateway { .. } => "502".to_string(),
                Action::Fence { .. } => "500".to_string(),
            };
            (
                e.conditions.to_string(),
                e.holder().map(ToString::to_string).unwrap_or_default(),
                what,
            )
        })
        .collect()
}

fn dup_error(conditions: &str) -> (String, String, String) {
    t(
        "RouteError",
        "DuplicateMatchConditions",
        &format!("duplicate match conditions defined on route matching {conditions}"),
    )
}

fn dup_warning(child: &str) -> (String, String, String) {
    t(
        "IncludeError",
        "DuplicateMatchConditions",
        &format!("duplicate match conditions defined in included HTTPProxy \"{child}\""),
    )
}

const SEED_ONE: &str = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: example-root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - name: example-child1
    conditions: [{prefix: /foo}]
  - name: example-child2
    conditions: [{prefix: /foo}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: example-child1, namespace: default}
spec:
  routes:
  - conditions: [{prefix: /bar}]
    services: [{name: s1, port: 8080}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: example-child2, namespace: default}
spec:
  routes:
  - conditions: [{prefix: /bar}]
    services: [{name: s2, port: 8080}]
";

/// The seed's first include-tree example: equal include conditions are
/// fine; the second child's `/foo/bar` is the duplicate; the root gets a
/// warning and stays valid.
#[test]
fn seed_duplicate_across_includes_with_equal_conditions() {
    run(SEED_ONE, |a| {
        assert_eq!(
            programmed(a, "default/example-root"),
            vec![t("path prefix: \"/foo/bar\"", "default/example-child1", "s1")]
        );
        assert_eq!(errors(a, "default/example-child1"), vec![]);
        assert_eq!(
            errors(a, "default/example-child2"),
            vec![dup_error("path prefix: \"/foo/bar\"")]
        );
        assert_eq!(errors(a, "default/example-root"), vec![]);
        assert_eq!(
            warnings(a, "default/example-root"),
            vec![dup_warning("default/example-child2")]
        );
        // Issue correction: currentStatus agrees with Valid.
        assert_eq!(a.statuses.current_status(&id("default/example-root")), "valid");
        assert_eq!(
            a.statuses.current_status(&id("default/example-child2")),
            "invalid"
        );
        let dup = vh(a, "default/example-root")
            .entries
            .iter()
            .find(|e| e.holder() == Some(&id("default/example-child2")))
            .expect("entry");
        assert_eq!(dup.duplicate_of, Some(0));
    });
}

/// The seed's second example: `/foo` + `/` and `/` + `/foo` are the same
/// full route.
#[test]
fn seed_duplicate_across_includes_with_different_split() {
    let yaml = SEED_ONE
        .replacen(
            "conditions: [{prefix: /foo}]\n  - name: example-child2\n    conditions: [{prefix: /foo}]",
            "conditions: [{prefix: /foo}]\n  - name: example-child2\n    conditions: [{prefix: /}]",
            1,
        )
        .replacen(
            "conditions: [{prefix: /bar}]\n    services: [{name: s1",
            "conditions: [{prefix: /}]\n    services: [{name: s1",
            1,
        )
        .replacen(
            "conditions: [{prefix: /bar}]\n    services: [{name: s2",
            "conditions: [{prefix: /foo}]\n    services: [{name: s2",
            1,
        );
    run(&yaml, |a| {
        assert_eq!(
            programmed(a, "default/example-root"),
            vec![t("path prefix: \"/foo/\"", "default/example-child1", "s1")]
        );
        assert_eq!(
            errors(a, "default/example-child2"),
            vec![dup_error("path prefix: \"/foo\"")]
        );
        assert_eq!(
            warnings(a, "default/example-root"),
            vec![dup_warning("default/example-child2")]
        );
    });
}

/// The seed's single-proxy example: the first route wins (Contour let the
/// last overwrite).
#[test]
fn duplicate_within_one_proxy_first_wins() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: example, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  routes:
  - conditions: [{prefix: /foo}]
    services: [{name: s1, port: 8080}]
  - conditions: [{prefix: /foo}]
    services: [{name: s2, port: 8080}]
";
    run(yaml, |a| {
        assert_eq!(
            programmed(a, "default/example"),
            vec![t("path prefix: \"/foo\"", "default/example", "s1")]
        );
        assert_eq!(
            errors(a, "default/example"),
            vec![dup_error("path prefix: \"/foo\"")]
        );
        assert_eq!(warnings(a, "default/example"), vec![]);
        assert_eq!(a.statuses.current_status(&id("default/example")), "invalid");
    });
}

/// A root whose two routes carry `first` and `second` as conditions.
fn two_routes(first: &str, second: &str) -> String {
    format!(
        "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: r, namespace: default}}
spec:
  virtualhost: {{fqdn: example.com}}
  routes:
  - conditions: {first}
    services: [{{name: s1, port: 80}}]
  - conditions: {second}
    services: [{{name: s2, port: 80}}]
"
    )
}

/// Every condition type takes part in the comparison: the same condition
/// twice is a duplicate; another value of it is not.
#[test]
fn every_condition_type_in_a_duplicate() {
    let cases: &[(&str, &str, &str)] = &[
        ("[{prefix: /a}]", "[{prefix: /b}]", "path prefix: \"/a\""),
        ("[{exact: /a}]", "[{exact: /b}]", "path exact: \"/a\""),
        ("[{regex: '/a.*'}]", "[{regex: '/b.*'}]", "path regex: \"/a.*\""),
        (
            "[{header: {name: x-a, present: true}}]",
            "[{header: {name: x-b, present: true}}]",
            "path prefix: \"/\", header \"x-a\" present",
        ),
        (
            "[{header: {name: x-a, notpresent: true}}]",
            "[{header: {name: x-b, notpresent: true}}]",
            "path prefix: \"/\", header \"x-a\" notpresent",
        ),
        (
            "[{header: {name: x-a, exact: v}}]",
            "[{header: {name: x-a, exact: w}}]",
            "path prefix: \"/\", header \"x-a\" exact: \"v\"",
        ),
        (
            "[{header: {name: x-a, notexact: v}}]",
            "[{header: {name: x-a, notexact: w}}]",
            "path prefix: \"/\", header \"x-a\" notexact: \"v\"",
        ),
        (
            "[{header: {name: x-a, contains: v}}]",
            "[{header: {name: x-a, contains: w}}]",
            "path prefix: \"/\", header \"x-a\" contains: \"v\"",
        ),
        (
            "[{header: {name: x-a, notcontains: v}}]",
            "[{header: {name: x-a, notcontains: w}}]",
            "path prefix: \"/\", header \"x-a\" notcontains: \"v\"",
        ),
        (
            "[{header: {name: x-a, regex: 'v.*'}}]",
            "[{header: {name: x-a, regex: 'w.*'}}]",
            "path prefix: \"/\", header \"x-a\" regex: \"v.*\"",
        ),
        (
            "[{queryParameter: {name: q, exact: v}}]",
            "[{queryParameter: {name: q, exact: w}}]",
            "path prefix: \"/\", query parameter \"q\" exact: \"v\"",
        ),
        (
            "[{queryParameter: {name: q, prefix: v}}]",
            "[{queryParameter: {name: q, prefix: w}}]",
            "path prefix: \"/\", query parameter \"q\" prefix: \"v\"",
        ),
        (
            "[{queryParameter: {name: q, suffix: v}}]",
            "[{queryParameter: {name: q, suffix: w}}]",
            "path prefix: \"/\", query parameter \"q\" suffix: \"v\"",
        ),
        (
            "[{queryParameter: {name: q, contains: v}}]",
            "[{queryParameter: {name: q, contains: w}}]",
            "path prefix: \"/\", query parameter \"q\" contains: \"v\"",
        ),
        (
            "[{queryParameter: {name: q, regex: 'v.*'}}]",
            "[{queryParameter: {name: q, regex: 'w.*'}}]",
            "path prefix: \"/\", query parameter \"q\" regex: \"v.*\"",
        ),
        (
            "[{queryParameter: {name: q, present: true}}]",
            "[{queryParameter: {name: r, present: true}}]",
            "path prefix: \"/\", query parameter \"q\" present",
        ),
        // ignoreCase changes the match, so it is part of the key.
        (
            "[{header: {name: x-a, exact: v, ignoreCase: true}}]",
            "[{header: {name: x-a, exact: v}}]",
            "path prefix: \"/\", header \"x-a\" exact: \"v\" (ignoreCase)",
        ),
        (
            "[{queryParameter: {name: q, exact: v, ignoreCase: true}}]",
            "[{queryParameter: {name: q, exact: v}}]",
            "path prefix: \"/\", query parameter \"q\" exact: \"v\" (ignoreCase)",
        ),
    ];
    for (same, other, rendered) in cases {
        run(&two_routes(same, same), |a| {
            assert_eq!(errors(a, "default/r"), vec![dup_error(rendered)], "{same}");
            assert_eq!(programmed(a, "default/r").len(), 1, "{same}");
        });
        run(&two_routes(same, other), |a| {
            assert_eq!(errors(a, "default/r"), vec![], "{same} vs {other}");
            assert_eq!(programmed(a, "default/r").len(), 2, "{same} vs {other}");
        });
    }
}

/// Header and query conditions compare as sets: order does not matter,
/// header names compare case-insensitively, and a prefix `/a` is not an
/// exact `/a`.
#[test]
fn duplicates_are_order_insensitive() {
    let ab = "[{prefix: /p}, {header: {name: x-a, present: true}}, {queryParameter: {name: q, exact: v}}]";
    let ba = "[{queryParameter: {name: q, exact: v}}, {header: {name: X-A, present: true}}, {prefix: /p}]";
    run(&two_routes(ab, ba), |a| {
        assert_eq!(
            errors(a, "default/r"),
            vec![dup_error(
                "path prefix: \"/p\", header \"x-a\" present, query parameter \"q\" exact: \"v\""
            )]
        );
    });
    run(&two_routes("[{prefix: /a}]", "[{exact: /a}]"), |a| {
        assert_eq!(errors(a, "default/r"), vec![]);
    });
}

/// Conditions split differently between include and route are the same
/// full route (header on the include vs on the route).
#[test]
fn duplicates_compare_merged_header_and_query_conditions() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - name: a
    conditions: [{prefix: /x}, {header: {name: x-env, exact: prod}}]
  - name: b
    conditions: [{prefix: /x}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: a, namespace: default}
spec:
  routes:
  - conditions: [{queryParameter: {name: v, present: true}}]
    services: [{name: s1, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: b, namespace: default}
spec:
  routes:
  - conditions: [{queryParameter: {name: v, present: true}}, {header: {name: x-env, exact: prod}}]
    services: [{name: s2, port: 80}]
";
    run(yaml, |a| {
        assert_eq!(
            errors(a, "default/b"),
            vec![dup_error(
                "path prefix: \"/x\", header \"x-env\" exact: \"prod\", query parameter \"v\" present"
            )]
        );
        assert_eq!(warnings(a, "default/root"), vec![dup_warning("default/b")]);
    });
}

const THREE_DEEP: &str = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: platform}
spec:
  virtualhost: {fqdn: Example.COM}
  includes:
  - {name: mid, namespace: team, conditions: [{prefix: /api}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: mid, namespace: team}
spec:
  includes:
  - {name: leaf1, conditions: [{prefix: /v1}]}
  - {name: leaf2, conditions: [{prefix: /v1}]}
  routes:
  - services: [{name: mid, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: leaf1, namespace: team}
spec:
  routes:
  - conditions: [{exact: /users}]
    services: [{name: one, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: leaf2, namespace: team}
spec:
  routes:
  - conditions: [{exact: /users}]
    services: [{name: two, port: 80}]
  - conditions: [{exact: /groups}]
    services: [{name: two, port: 80}]
";

/// Three deep: the error on the leaf holding the duplicate, a warning on
/// every ancestor up to the root, everything valid still programmed.
#[test]
fn three_deep_tree_warns_every_ancestor() {
    run(THREE_DEEP, |a| {
        assert_eq!(
            errors(a, "team/leaf2"),
            vec![dup_error("path exact: \"/api/v1/users\"")]
        );
        assert_eq!(warnings(a, "team/mid"), vec![dup_warning("team/leaf2")]);
        assert_eq!(warnings(a, "platform/root"), vec![dup_warning("team/leaf2")]);
        assert_eq!(errors(a, "team/mid"), vec![]);
        assert_eq!(errors(a, "platform/root"), vec![]);
        assert_eq!(errors(a, "team/leaf1"), vec![]);
        assert_eq!(
            programmed(a, "platform/root"),
            vec![
                t("path exact: \"/api/v1/users\"", "team/leaf1", "one"),
                t("path exact: \"/api/v1/groups\"", "team/leaf2", "two"),
                t("path prefix: \"/api\"", "team/mid", "mid"),
            ]
        );
        assert_eq!(vh(a, "platform/root").fqdn, "example.com");
    });
}

/// A cycle is reported on the proxy it returns to, with the path, and the
/// include that closes it is fenced for its conditions.
#[test]
fn include_cycle_is_reported_and_fenced() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: a, conditions: [{prefix: /a}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: a, namespace: default}
spec:
  includes:
  - {name: b, conditions: [{prefix: /b}]}
  routes:
  - services: [{name: sa, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: b, namespace: default}
spec:
  includes:
  - {name: a, conditions: [{prefix: /c}]}
  routes:
  - services: [{name: sb, port: 80}]
";
    run(yaml, |a| {
        assert_eq!(
            errors(a, "default/a"),
            vec![t(
                "IncludeError",
                "IncludeCreatesCycle",
                "include creates an include cycle: default/root -> default/a -> default/b -> default/a"
            )]
        );
        assert_eq!(errors(a, "default/b"), vec![]);
        assert_eq!(
            programmed(a, "default/root"),
            vec![
                t("path prefix: \"/a/b/c\"", "default/b", "500"),
                t("path prefix: \"/a/b\"", "default/b", "sb"),
                t("path prefix: \"/a\"", "default/a", "sa"),
            ]
        );
    });
}

/// A proxy no valid root reaches is orphaned, including the children of a
/// root that is not served; a child included twice is not an orphan.
#[test]
fn orphans() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: twice, conditions: [{prefix: /one}]}
  - {name: twice, conditions: [{prefix: /two}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: twice, namespace: default}
spec:
  routes:
  - services: [{name: s, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: alone, namespace: default}
spec:
  routes:
  - services: [{name: s, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: empty-root, namespace: default}
spec:
  virtualhost: {fqdn: other.example.com}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: bad-root, namespace: default}
spec:
  virtualhost: {fqdn: ''}
  includes:
  - {name: under-bad}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: under-bad, namespace: default}
spec:
  routes:
  - services: [{name: s, port: 80}]
";
    run(yaml, |a| {
        let orphan = t(
            "Orphaned",
            "Orphaned",
            "this HTTPProxy is not part of a delegation chain from a root HTTPProxy",
        );
        assert_eq!(errors(a, "default/alone"), vec![orphan.clone()]);
        assert_eq!(errors(a, "default/under-bad"), vec![orphan]);
        assert_eq!(a.statuses.current_status(&id("default/alone")), "orphaned");
        assert_eq!(errors(a, "default/twice"), vec![]);
        assert_eq!(a.statuses.current_status(&id("default/twice")), "valid");
        assert_eq!(
            errors(a, "default/empty-root"),
            vec![t(
                "SpecError",
                "NothingDefined",
                "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy"
            )]
        );
        assert_eq!(
            errors(a, "default/bad-root"),
            vec![t(
                "VirtualHostError",
                "FQDNNotSpecified",
                "Spec.VirtualHost.Fqdn must be specified"
            )]
        );
        let status = a.statuses.render(&id("default/alone"), 3, "T", None);
        assert_eq!(status.current_status, "orphaned");
        assert_eq!(
            status.description,
            "this HTTPProxy is not part of a delegation chain from a root HTTPProxy"
        );
        assert_eq!(status.conditions[0].status, "False");
        assert_eq!(status.conditions[0].reason, "ErrorPresent");
        assert_eq!(status.conditions[0].observed_generation, 3);
    });
}

/// A missing include, or one naming a root, answers 502 for its
/// conditions; a route with the same conditions is served instead of the
/// 502 (and is no duplicate).
#[test]
fn missing_include_answers_502() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: missing, namespace: apps, conditions: [{prefix: /missing}]}
  - {name: other-root, conditions: [{prefix: /other}]}
  - {name: gone, conditions: [{prefix: /shadowed}]}
  routes:
  - conditions: [{prefix: /shadowed}]
    services: [{name: s, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: other-root, namespace: default}
spec:
  virtualhost: {fqdn: other.example.com}
  routes:
  - services: [{name: s, port: 80}]
";
    run(yaml, |a| {
        assert_eq!(
            errors(a, "default/root"),
            vec![
                t(
                    "IncludeError",
                    "IncludeNotFound",
                    "include apps/missing not found"
                ),
                t(
                    "IncludeError",
                    "RootIncludesRoot",
                    "root httpproxy cannot include another root httpproxy (default/other-root)"
                ),
                t(
                    "IncludeError",
                    "IncludeNotFound",
                    "include default/gone not found"
                ),
            ]
        );
        assert_eq!(
            programmed(a, "default/root"),
            vec![
                t("path prefix: \"/missing\"", "default/root", "502"),
                t("path prefix: \"/other\"", "default/root", "502"),
                t("path prefix: \"/shadowed\"", "default/root", "s"),
            ]
        );
    });
}

/// Roots only in root namespaces (when configured); children anywhere.
#[test]
fn root_namespaces() {
    let settings = HttpProxySettings {
        root_namespaces: vec!["platform".into()],
        gateway: None,
    };
    let yaml = THREE_DEEP.to_string()
        + "
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: rogue, namespace: team}
spec:
  virtualhost: {fqdn: rogue.example.com}
  routes:
  - services: [{name: s, port: 80}]
";
    run_with(&yaml, &settings, false, |a| {
        assert_eq!(
            errors(a, "team/rogue"),
            vec![t(
                "RootNamespaceError",
                "RootProxyNotAllowedInNamespace",
                "root HTTPProxy cannot be defined in this namespace"
            )]
        );
        assert_eq!(errors(a, "platform/root"), vec![]);
        assert_eq!(a.virtual_hosts.len(), 1);
    });
}

/// Two roots claiming one FQDN (case-insensitive) are both invalid; their
/// children are orphaned; two roots may include the same child.
#[test]
fn duplicate_fqdns_and_shared_children() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: a, namespace: one}
spec:
  virtualhost: {fqdn: Example.com}
  includes: [{name: child, namespace: shared}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: b, namespace: two}
spec:
  virtualhost: {fqdn: example.COM}
  routes: [{services: [{name: s, port: 80}]}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: c, namespace: three}
spec:
  virtualhost: {fqdn: c.example.com}
  includes: [{name: shared-child, namespace: shared}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: d, namespace: four}
spec:
  virtualhost: {fqdn: d.example.com}
  includes: [{name: shared-child, namespace: shared}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: child, namespace: shared}
spec:
  routes: [{services: [{name: s, port: 80}]}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: shared-child, namespace: shared}
spec:
  routes: [{services: [{name: s, port: 80}]}]
";
    run(yaml, |a| {
        let conflict = t(
            "VirtualHostError",
            "DuplicateVhost",
            "fqdn \"example.com\" is used in multiple HTTPProxies: one/a, two/b",
        );
        assert_eq!(errors(a, "one/a"), vec![conflict.clone()]);
        assert_eq!(errors(a, "two/b"), vec![conflict]);
        assert_eq!(a.statuses.current_status(&id("shared/child")), "orphaned");
        assert_eq!(errors(a, "shared/shared-child"), vec![]);
        assert_eq!(programmed(a, "three/c").len(), 1);
        assert_eq!(programmed(a, "four/d").len(), 1);
    });
}

/// TLS: a Secret in another namespace needs a TLSCertificateDelegation
/// there (for this namespace or `*`); a missing Secret is reported.
#[test]
fn tls_certificate_delegation() {
    let root = |ns: &str, secret: &str| {
        format!(
            "
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: root, namespace: {ns}}}
spec:
  virtualhost: {{fqdn: {ns}.example.com, tls: {{secretName: {secret}}}}}
  routes: [{{services: [{{name: s, port: 80}}]}}]
"
        )
    };
    let secret = "
---
apiVersion: v1
kind: Secret
metadata: {name: wildcard, namespace: certs}
type: kubernetes.io/tls
data: {tls.crt: '', tls.key: ''}
---
apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata: {name: d, namespace: certs}
spec:
  delegations:
  - {secretName: wildcard, targetNamespaces: [allowed]}
";
    let any = "
---
apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata: {name: d, namespace: certs}
spec:
  delegations:
  - {secretName: wildcard, targetNamespaces: ['*']}
";
    let yaml = format!(
        "{secret}{}{}{}",
        root("allowed", "certs/wildcard"),
        root("denied", "certs/wildcard"),
        root("nosecret", "absent")
    );
    run(&yaml, |a| {
        assert_eq!(errors(a, "allowed/root"), vec![]);
        let tls = vh(a, "allowed/root").tls.clone().expect("tls");
        assert_eq!(
            (tls.secret_namespace.as_str(), tls.secret_name.as_str()),
            ("certs", "wildcard")
        );
        assert_eq!(tls.minimum_protocol_version, "1.2");
        assert_eq!(
            errors(a, "denied/root"),
            vec![t(
                "TLSError",
                "DelegationNotPermitted",
                "Spec.VirtualHost.TLS Secret \"certs/wildcard\" certificate delegation not permitted"
            )]
        );
        assert_eq!(
            errors(a, "nosecret/root"),
            vec![t(
                "TLSError",
                "SecretNotValid",
                "Spec.VirtualHost.TLS Secret \"absent\" is invalid: Secret not found"
            )]
        );
    });
    let yaml = format!(
        "{}{}{any}",
        secret
            .split("---\napiVersion: projectcontour.io/v1")
            .next()
            .unwrap_or(""),
        root("denied", "certs/wildcard")
    );
    run(&yaml, |a| assert_eq!(errors(a, "denied/root"), vec![]));
}

/// Include conditions as Contour allows them: at most one prefix, no
/// exact, no regex, prefixes start with `/`; an include that breaks them is
/// not followed and fenced as far as its conditions can be expressed.
/// Duplicate include conditions alone are no error.
#[test]
fn include_condition_validity() {
    // (conditions, message, the fence standing in for the include)
    let cases = [
        (
            "[{exact: /a}]",
            "include: exact conditions are not allowed in includes block",
            Some("path prefix: \"/a\""),
        ),
        (
            "[{regex: '/a/.*'}]",
            "include: regex conditions are not allowed in includes block",
            Some("path prefix: \"/a/\""),
        ),
        (
            "[{prefix: /a}, {prefix: /b}]",
            "include: more than one prefix, exact or regex is not allowed in a condition block",
            Some("path prefix: \"/a\""),
        ),
        (
            "[{prefix: a}]",
            "include: prefix conditions must start with /, a was supplied",
            None,
        ),
    ];
    for (conds, message, fence) in cases {
        let yaml = format!(
            "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: root, namespace: default}}
spec:
  virtualhost: {{fqdn: example.com}}
  includes:
  - {{name: child, conditions: {conds}}}
  - {{name: child2, conditions: [{{prefix: /same}}]}}
  - {{name: child3, conditions: [{{prefix: /same}}]}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: child2, namespace: default}}
spec:
  routes: [{{conditions: [{{prefix: /x}}], services: [{{name: s, port: 80}}]}}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: child3, namespace: default}}
spec:
  routes: [{{conditions: [{{prefix: /y}}], services: [{{name: s, port: 80}}]}}]
"
        );
        run(&yaml, |a| {
            assert_eq!(
                errors(a, "default/root"),
                vec![t("IncludeError", "PathMatchConditionsNotValid", message)],
                "{conds}"
            );
            assert_eq!(errors(a, "default/child2"), vec![]);
            assert_eq!(errors(a, "default/child3"), vec![]);
            let fences: Vec<String> = programmed(a, "default/root")
                .into_iter()
                .filter(|p| p.2 == "500")
                .map(|p| p.0)
                .collect();
            assert_eq!(
                fences,
                fence.into_iter().map(String::from).collect::<Vec<_>>(),
                "{conds}"
            );
        });
    }
}

/// A route that cannot be served is fenced (500) for its conditions, an
/// invalid regex by its literal prefix; the proxy's other routes are
/// served; the proxy is invalid.
#[test]
fn invalid_routes_are_fenced_not_dropped() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: child, conditions: [{prefix: /app}]}
  routes:
  - services: [{name: catchall, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: child, namespace: default}
spec:
  routes:
  - conditions: [{regex: '/v1/(unclosed'}]
    services: [{name: s, port: 80}]
  - conditions: [{prefix: /both}, {header: {name: x-a, present: true}}, {header: {name: x-a, notpresent: true}}]
    services: [{name: s, port: 80}]
  - conditions: [{prefix: /none}]
  - conditions: [{prefix: /ok}]
    services: [{name: ok, port: 80}]
";
    run(yaml, |a| {
        let e = errors(a, "default/child");
        assert_eq!(e.len(), 3, "{e:?}");
        assert_eq!(e[0].1, "PathMatchConditionsNotValid");
        assert!(
            e[0].2
                .starts_with("route: supplied regex: /v1/(unclosed invalid. error: "),
            "{}",
            e[0].2
        );
        assert_eq!(
            e[1],
            t(
                "RouteError",
                "HeaderMatchConditionsNotValid",
                "cannot specify contradictory 'present' and 'notpresent' conditions for the same route and header"
            )
        );
        assert_eq!(
            e[2],
            t(
                "RouteError",
                "RouteActionCountNotValid",
                "must set exactly one of route.services or route.requestRedirectPolicy or route.directResponsePolicy"
            )
        );
        let p = programmed(a, "default/root");
        assert_eq!(p[0], t("path prefix: \"/app/v1/\"", "default/child", "500"));
        assert_eq!(
            p[1],
            t(
                "path prefix: \"/app/both\", header \"x-a\" present, header \"x-a\" notpresent",
                "default/child",
                "500"
            )
        );
        assert_eq!(p[2], t("path prefix: \"/app/none\"", "default/child", "500"));
        assert_eq!(p[3], t("path prefix: \"/app/ok\"", "default/child", "ok"));
        assert_eq!(p[4], t("path prefix: \"/\"", "default/root", "catchall"));
        assert_eq!(a.statuses.current_status(&id("default/child")), "invalid");
        assert_eq!(a.statuses.current_status(&id("default/root")), "valid");
    });
}

/// A child whose spec does not parse (an unknown field) is invalid and
/// fenced for its include conditions, never falling to the parent's
/// catch-all.
#[test]
fn unreadable_child_is_fenced_for_its_include_conditions() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: child, conditions: [{prefix: /app}]}
  routes:
  - services: [{name: catchall, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: child, namespace: default}
spec:
  routes:
  - services: [{name: s, port: 80}]
    loadBalancerPolicy: {strategy: Cookie}
";
    run_with(yaml, &HttpProxySettings::default(), true, |a| {
        let e = errors(a, "default/child");
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].0.as_str(), e[0].1.as_str()), ("SpecError", "SpecNotValid"));
        assert!(
            e[0].2
                .contains("spec.routes[0].loadBalancerPolicy: unknown field"),
            "{}",
            e[0].2
        );
        assert_eq!(
            programmed(a, "default/root"),
            vec![
                t("path prefix: \"/app\"", "default/root", "500"),
                t("path prefix: \"/\"", "default/root", "catchall"),
            ]
        );
        let fence = &vh(a, "default/root").entries[0];
        assert_eq!(fence.conditions.path, PathMatch::Prefix("/app".into()));
    });
}

/// Status in Contour's shape goes into the translation's output for every
/// HTTPProxy, served or not; without a serving Gateway, each root gets a
/// warning diagnostic saying so.
#[test]
fn status_in_contours_shape_for_every_proxy() {
    let loaded = load_str("t.yaml", SEED_ONE);
    let settings = translate::Settings {
        transition_time: "2026-01-01T00:00:00Z".into(),
        ..Default::default()
    };
    let out = translate::translate(&loaded.inputs, &settings);
    let status_of = |name: &str| {
        let s = out
            .status
            .iter()
            .find(|s| s.kind == "HTTPProxy" && s.metadata.name == name)
            .expect("status");
        assert_eq!(s.api_version, "projectcontour.io/v1");
        assert_eq!(s.metadata.namespace.as_deref(), Some("default"));
        translate::status::Timed::new(&s.status, &out.transition_time).to_json()
    };
    assert_eq!(
        status_of("example-root"),
        serde_json::json!({
            "currentStatus": "valid",
            "description": "Valid HTTPProxy",
            "conditions": [{
                "type": "Valid",
                "status": "True",
                "reason": "Valid",
                "message": "Valid HTTPProxy",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "warnings": [{
                    "type": "IncludeError",
                    "status": "True",
                    "reason": "DuplicateMatchConditions",
                    "message": "duplicate match conditions defined in included HTTPProxy \"default/example-child2\""
                }]
            }]
        })
    );
    assert_eq!(
        status_of("example-child2"),
        serde_json::json!({
            "currentStatus": "invalid",
            "description": "At least one error present, see Errors for details",
            "conditions": [{
                "type": "Valid",
                "status": "False",
                "reason": "ErrorPresent",
                "message": "At least one error present, see Errors for details",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "errors": [{
                    "type": "RouteError",
                    "status": "True",
                    "reason": "DuplicateMatchConditions",
                    "message": "duplicate match conditions defined on route matching path prefix: \"/foo/bar\""
                }]
            }]
        })
    );
    assert_eq!(status_of("example-child1")["currentStatus"], "valid");
    let unserved: Vec<_> = out
        .diagnostics
        .iter()
        .filter(|d| d.message.starts_with("no Gateway serves HTTPProxies"))
        .collect();
    assert_eq!(unserved.len(), 1, "one per root");
    assert_eq!(
        unserved[0].object.as_deref(),
        Some("HTTPProxy default/example-root")
    );
}

/// A configured serving Gateway that is not ours (here: missing) is said
/// to serve nothing, on every root.
#[test]
fn a_missing_serving_gateway_is_reported() {
    let loaded = load_str("t.yaml", SEED_ONE);
    let settings = translate::Settings {
        http_proxy: HttpProxySettings {
            root_namespaces: Vec::new(),
            gateway: Some(("infra".into(), "absent".into())),
        },
        ..Default::default()
    };
    let out = translate::translate(&loaded.inputs, &settings);
    let warnings: Vec<_> = out
        .diagnostics
        .iter()
        .filter(|d| {
            d.message
                .starts_with("the Gateway configured to serve HTTPProxies (infra/absent)")
        })
        .map(|d| d.object.clone().unwrap_or_default())
        .collect();
    assert_eq!(warnings, vec!["HTTPProxy default/example-root"]);
    assert!(out.gateways.is_empty());
}

/// A child included twice under the same conditions: its routes of the
/// second inclusion are duplicates of the first (served once); the child
/// holds them and is invalid, the root is warned; nobody is orphaned.
#[test]
fn child_included_twice_under_the_same_conditions() {
    let yaml = "
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: example.com}
  includes:
  - {name: child, conditions: [{prefix: /same}]}
  - {name: child, conditions: [{prefix: /same}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: child, namespace: default}
spec:
  routes:
  - services: [{name: s, port: 80}]
";
    run(yaml, |a| {
        assert_eq!(
            programmed(a, "default/root"),
            vec![t("path prefix: \"/same\"", "default/child", "s")]
        );
        assert_eq!(
            errors(a, "default/child"),
            vec![dup_error("path prefix: \"/same\"")]
        );
        assert_eq!(warnings(a, "default/root"), vec![dup_warning("default/child")]);
        assert_eq!(a.statuses.current_status(&id("default/root")), "valid");
    });
}
