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

/// Weights past the CRD maximum (or a sum past u32) used to wrap; they now
/// replace the rule.
#[test]
fn oversized_weights_replace_the_rule_instead_of_wrapping() {
    let input = fixture_input("invalid-header-name");
    let rules_at = input.find("  rules:").expect("rules");
    let rules_end = input[rules_at..].find("---").expect("end") + rules_at;
    let with = |rules: &str| {
        format!(
            "{}{rules}{}",
            &input[..rules_at],
            &input[rules_at + (rules_end - rules_at)..]
        )
    };
    let one = with(
        "  rules:\n  - matches: [{path: {type: PathPrefix, value: /a}}]\n    backendRefs: [{name: web, port: 80, weight: 1000001}]\n",
    );
    let refs = vec!["{name: web, port: 80, weight: 1000000}"; 4300].join(", ");
    let sum = with(&format!(
        "  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]\n    backendRefs: [{refs}]\n"
    ));
    for (text, want) in [
        (
            one,
            "spec.rules[0].backendRefs[0].weight: 1000001 is above the maximum weight 1000000",
        ),
        (
            sum,
            "spec.rules[0].backendRefs: the backend weights (valid and invalid backends alike) sum to at least 4295000000, above Envoy's limit of 4294967295",
        ),
    ] {
        let out = translate::translate(
            &api::loader::load_str("weights.yaml", &text).inputs,
            &translate::Settings::default(),
        );
        assert_eq!(out.replacements.len(), 1, "{:?}", out.replacements);
        assert_eq!(out.replacements[0].message, want);
        assert_eq!(out.replacements[0].class, ErrorClass::Structural);
    }
}

/// Rules are built on several threads for larger inputs; the output must
/// not depend on how many.
#[test]
fn output_does_not_depend_on_the_thread_count() {
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(300));
    let inputs = api::loader::load_str("generated.yaml", &text).inputs;
    let with = |n: usize| {
        translate::translate(
            &inputs,
            &translate::Settings {
                parallelism: Some(n),
                ..Default::default()
            },
        )
    };
    let one = with(1);
    assert!(one.gateways.values().map(|g| g.routes.len()).sum::<usize>() > 0);
    assert!(with(4) == one, "4 threads differ from 1");
    assert!(with(3) == one, "3 threads differ from 1");
}
