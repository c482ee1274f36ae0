//! The CLI view of policies (offline, from the policy-ext-auth-missing
//! fixture): `get policies` shows targets, ancestors and acceptance;
//! `describe policy` lists each problem; `describe route` names the policy
//! behind a replaced rule.

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifests() -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../translate/tests/fixtures/policy-ext-auth-missing.yaml");
    let text = std::fs::read_to_string(fixture).expect("fixture");
    let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
    let dir = std::env::temp_dir().join(format!("portcullis-policy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("in.yaml");
    std::fs::write(&path, input).expect("write");
    path
}

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .arg("-f")
        .arg(manifests())
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
