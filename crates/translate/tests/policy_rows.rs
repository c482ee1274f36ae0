//! `describe route`'s "policies in force" (`Output::policy_rows`): per
//! rule, each feature with the policy and level it comes from, most
//! specific level first (rule > route > listener > Gateway), with the
//! Gateway and listener levels kept once per scope in the output and
//! joined only when asked.

mod common;

use common::*;

fn input() -> String {
    format!(
        "{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: portcullis
  listeners:
  - {{name: a, protocol: HTTP, port: 80, hostname: a.example.com, allowedRoutes: {{namespaces: {{from: All}}}}}}
  - {{name: b, protocol: HTTP, port: 80, hostname: b.example.com, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: gw-wide, namespace: infra}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  cors: {{allowOrigins: [\"https://app.example.com\"]}}
  localRateLimit: {{tokenBucket: {{maxTokens: 10, tokensPerFill: 10, fillInterval: 1s}}}}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: on-a, namespace: infra}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}}]
  cors: {{allowOrigins: [\"https://a.example.com\"]}}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: on-rule, namespace: app}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: second}}]
  localRateLimit: {{tokenBucket: {{maxTokens: 5, tokensPerFill: 5, fillInterval: 1s}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: a}}]
  rules:
  - name: first
    matches: [{{path: {{type: PathPrefix, value: /one}}}}]
    backendRefs: [{{name: web, port: 80}}]
  - name: second
    matches: [{{path: {{type: PathPrefix, value: /two}}}}]
    backendRefs: [{{name: web, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: on-b, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra, sectionName: b}}]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: app}}
spec:
  ports: [{{name: http, port: 80}}]
"
    )
}

fn rows(out: &translate::Output, name: &str) -> Vec<String> {
    out.policy_rows("HTTPRoute", "app", name)
        .into_iter()
        .map(|a| format!("{} {} {} ({})", a.rule, a.feature, a.policy, a.level))
        .collect()
}

#[test]
fn most_specific_level_wins_per_rule_and_feature() {
    let out = run(&input());
    assert!(
        !out.diagnostics.iter().any(|d| d.severity == api::Severity::Error),
        "{:?}",
        out.diagnostics
    );
    let mut got = rows(&out, "r");
    got.sort();
    assert_eq!(
        got,
        [
            "0 cors TrafficPolicy infra/on-a (listener a of Gateway infra/gw)",
            "0 localRateLimit TrafficPolicy infra/gw-wide (Gateway infra/gw)",
            "1 cors TrafficPolicy infra/on-a (listener a of Gateway infra/gw)",
            "1 localRateLimit TrafficPolicy app/on-rule (rule)",
        ]
    );
    // Listener b has no policy of its own: the Gateway's is in force.
    let mut got = rows(&out, "on-b");
    got.sort();
    assert_eq!(
        got,
        [
            "0 cors TrafficPolicy infra/gw-wide (Gateway infra/gw)",
            "0 localRateLimit TrafficPolicy infra/gw-wide (Gateway infra/gw)",
        ]
    );
}

#[test]
fn scope_levels_are_kept_once_per_scope_not_per_rule() {
    let out = run(&input());
    // Two listener scopes with something in force, two routes attached.
    assert_eq!(out.scoped_policies.listeners.len(), 2);
    assert_eq!(out.scoped_policies.routes.len(), 2);
    // Only the rule-level policy is recorded per rule.
    assert_eq!(out.policy_attachments.len(), 1);
}

#[test]
fn a_fenced_scope_has_nothing_in_force() {
    let yaml = input().replace(
        "cors: {allowOrigins: [\"https://a.example.com\"]}",
        "cors: {allowOrigins: [\"not an origin\"]}",
    );
    let out = run(&yaml);
    assert!(
        !out.scope_replacements.is_empty(),
        "the invalid listener policy must fence listener a: {:?}",
        out.diagnostics
    );
    let got = rows(&out, "r");
    assert_eq!(got, ["1 localRateLimit TrafficPolicy app/on-rule (rule)"]);
}
