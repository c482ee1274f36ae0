//! `Output.replacements`: one record per replaced rule and Gateway, with the
//! class and message the status carries (metrics and `describe` read it).

use translate::error::ErrorClass;

fn fixture_input(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    // Fixtures hold the input first, then the expectations after this marker.
    text.split("\n# ---- expected output")
        .next()
        .map(str::to_string)
        .unwrap_or(text)
}

#[test]
fn replaced_rule_is_recorded_once_per_gateway() {
    let out = translate::translate(
        &api::loader::load_str("invalid-header-name.yaml", &fixture_input("invalid-header-name")).inputs,
        &translate::Settings::default(),
    );
    assert_eq!(out.replacements.len(), 1, "{:?}", out.replacements);
    let r = &out.replacements[0];
    assert_eq!(
        (
            r.gateway.as_str(),
            r.route_kind.as_str(),
            r.route_namespace.as_str(),
            r.route_name.as_str(),
            r.rule
        ),
        ("infra/gw", "HTTPRoute", "app", "r", 0)
    );
    assert_eq!(r.class, ErrorClass::Structural);
    assert!(
        r.message
            .starts_with("spec.rules[0].filters[0].requestHeaderModifier.set[0].name"),
        "{}",
        r.message
    );
}

#[test]
fn valid_routes_record_nothing() {
    let out = translate::translate(
        &api::loader::load_str("basic.yaml", &fixture_input("basic-http")).inputs,
        &translate::Settings::default(),
    );
    assert!(out.replacements.is_empty(), "{:?}", out.replacements);
    assert!(!out.gateways.is_empty());
}
