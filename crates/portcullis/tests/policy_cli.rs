//! The CLI view of policies (offline, from the policy-ext-auth-missing
//! fixture): `get policies` shows targets, ancestors and acceptance;
//! `describe policy` lists each problem; `describe route` names the policy
//! behind a replaced rule.

mod common;

use std::process::Command;

fn run(args: &[&str]) -> String {
    run_on("policy-ext-auth-missing", args)
}

fn run_on(fixture: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .arg("-f")
        .arg(common::fixture_input(fixture))
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
        .split_whitespace()
        .collect()
}

#[test]
fn get_policies_shows_targets_ancestors_and_acceptance() {
    let t = run(&["get", "policies"]);
    assert!(t.starts_with("KIND"), "{t}");
    // A missing GatewayExtension is a recoverable warning: still accepted.
    assert_eq!(
        row(&t, "needs-auth"),
        [
            "TrafficPolicy",
            "app",
            "needs-auth",
            "HTTPRoute",
            "protected",
            "infra/gw",
            "True",
            "PartiallyValid"
        ]
    );
    // An extension whose Service is missing is not accepted.
    assert_eq!(
        row(&t, "no-service")[..3],
        ["GatewayExtension", "app", "no-service"]
    );
    assert_eq!(row(&t, "no-service")[3..], ["-", "-", "False", "Invalid"]);
}

#[test]
fn describe_names_every_problem_and_the_policy_behind_a_replacement() {
    let d = run(&["describe", "policy", "app/needs-auth"]);
    assert!(d.contains("Accepted: True (PartiallyValid)"), "{d}");
    assert!(
        d.contains("spec.extAuth.extensionRef: GatewayExtension app/not-there not found; its targets answer 500 until it exists [referential]"),
        "{d}"
    );
    let r = run(&["describe", "route", "app/protected"]);
    assert!(
        r.contains("Rule (0) [referential] spec.rules[0]: extAuth from TrafficPolicy app/needs-auth: GatewayExtension app/not-there not found"),
        "{r}"
    );
}

#[test]
fn describe_route_lists_the_policies_in_force_per_rule() {
    let d = run_on("policy-features", &["describe", "route", "app/r"]);
    let section: Vec<&str> = d
        .lines()
        .skip_while(|l| !l.starts_with("  Policies in force:"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(str::trim)
        .collect();
    assert_eq!(
        section,
        [
            "rule 0: rbac, extAuth from TrafficPolicy app/admin-only (rule)",
            "rule 0: headerModifiers, cors, localRateLimit, transformation, timeouts, retry from TrafficPolicy app/all-features (route)",
            "rule 1: headerModifiers, cors, localRateLimit, rbac, transformation, extAuth, timeouts, retry from TrafficPolicy app/all-features (route)",
        ],
        "{d}"
    );
}
