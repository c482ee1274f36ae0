//! The CLI view of Default Gateways (offline, from the default-gateways
//! fixture's manifests): the DEFAULT column, `get routes --defaulted`, and
//! `describe route` explaining each default Gateway's decision.

mod common;

use std::process::Command;

fn run(args: &[&str]) -> String {
    let f = common::fixture_input("default-gateways");
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .arg("-f")
        .arg(&f)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Rows as whitespace-split cells, keyed by the NAME column.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.get(1) == Some(&name) || cells.get(2) == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

#[test]
fn get_gateways_shows_which_are_default() {
    let t = run(&["get", "gateways"]);
    let header: Vec<&str> = t.lines().next().unwrap_or("").split_whitespace().collect();
    let col = header
        .iter()
        .position(|h| *h == "DEFAULT")
        .expect("DEFAULT column");
    assert_eq!(row(&t, "gw-a")[col], "yes");
    assert_eq!(row(&t, "gw-b")[col], "yes");
    assert_eq!(row(&t, "not-default")[col], "-");
}

#[test]
fn get_routes_defaulted_lists_claims_and_refusals() {
    let t = run(&["get", "routes", "--defaulted"]);
    assert_eq!(row(&t, "web")[3..], ["infra/gw-a,infra/gw-b", "-"]);
    assert_eq!(row(&t, "health")[3..], ["infra/gw-a,infra/gw-b", "-"]);
    assert_eq!(row(&t, "untrusted")[3..], ["infra/gw-a", "infra/gw-b"]);
    assert_eq!(
        t.lines().count(),
        4,
        "only routes asking for a default Gateway:\n{t}"
    );
}

#[test]
fn describe_route_explains_each_default_gateway() {
    let t = run(&["describe", "route", "other/untrusted"]);
    let at = t.find("  Default Gateways:\n").unwrap_or_else(|| panic!("{t}"));
    let section: Vec<&str> = t[at..].lines().skip(1).take(2).map(str::trim).collect();
    assert_eq!(
        section,
        [
            "infra/gw-a: claimed: Route is bound to default Gateway",
            "infra/gw-b: refused: NotAllowedByListeners: no listener of Gateway infra/gw-b allows HTTPRoute from namespace other"
        ]
    );
}
