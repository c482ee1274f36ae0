//! Golden fixtures: each file in `tests/fixtures/` holds the input
//! manifests, then a marker line, then the expected output (xDS per
//! Gateway, status of every object, diagnostics) as YAML.
//!
//! Regenerate with `PORTCULLIS_UPDATE_FIXTURES=1 cargo test -p translate --test fixtures`
//! and review the diff like code. Independently of the goldens, every
//! Gateway's xDS in every fixture must be accepted by the real Envoy
//! (`envoy --mode validate` on the static bootstrap), and translating in
//! STRICT mode (the real Envoy as validator) must give the same output:
//! STANDARD already keeps everything Envoy would reject out of the xDS.

#[path = "support/real_envoy.rs"]
mod real_envoy;

#[path = "support/fixture_settings.rs"]
mod fixture_settings;

#[path = "support/fixture_files.rs"]
mod fixture_files;

use translate::output::{self, bootstrap};

const MARKER: &str = "# ---- expected output (regenerate: PORTCULLIS_UPDATE_FIXTURES=1 cargo test -p translate --test fixtures) ----";

/// Loads and translates the input part of a fixture, as the CLI does.
fn run(name: &str, input: &str) -> translate::Output {
    let loaded = api::loader::load_str(name, input);
    let mut out = translate::translate(&loaded.inputs, &fixture_settings::settings_for(input));
    let mut diags = loaded.diagnostics;
    diags.append(&mut out.diagnostics);
    out.diagnostics = diags;
    out
}

fn split(text: &str) -> (&str, Option<&str>) {
    match text.find(MARKER) {
        Some(i) => (
            &text[..i],
            Some(text[i + MARKER.len()..].trim_start_matches('\n')),
        ),
        None => (text, None),
    }
}

#[test]
fn fixtures_match_goldens_and_envoy_accepts_them() {
    let update = std::env::var_os("PORTCULLIS_UPDATE_FIXTURES").is_some();
    let files = fixture_files::paths();
    assert!(
        files.len() >= 30,
        "expected at least 30 fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let (input, expected) = split(&text);
        let out = run(&format!("fixtures/{name}"), input);
        let actual_json = output::output_to_json(&out);
        let actual_yaml = output::output_to_yaml(&out);
        if update {
            let new = format!(
                "{}{MARKER}\n{actual_yaml}",
                input.trim_end_matches('\n').to_string() + "\n"
            );
            std::fs::write(path, new).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        } else {
            match expected {
                None => failures.push(format!("{name}: no expected section; regenerate the fixtures")),
                Some(exp) => {
                    let exp_json: serde_json::Value = serde_saphyr::from_str(exp)
                        .unwrap_or_else(|e| panic!("{name}: expected section is not YAML: {e}"));
                    if exp_json != actual_json {
                        failures.push(format!(
                            "{name}: output differs from golden\n{}",
                            diff(&exp_json, &actual_json)
                        ));
                    }
                }
            }
        }
        let loaded = api::loader::load_str(&format!("fixtures/{name}"), input);
        let envoy = real_envoy::RealEnvoy::default();
        let strict = translate::translate_with(
            &loaded.inputs,
            &fixture_settings::settings_for(input),
            Some(&envoy),
        );
        let with_routes = strict.gateways.values().filter(|g| !g.routes.is_empty()).count();
        if envoy.calls() < with_routes {
            failures.push(format!(
                "{name}: STRICT made {} Envoy calls for {with_routes} Gateways",
                envoy.calls()
            ));
        }
        let standard = translate::translate(&loaded.inputs, &fixture_settings::settings_for(input));
        if strict != standard {
            failures.push(format!(
                "{name}: STRICT differs from STANDARD (STANDARD let through something Envoy rejects)\n{}",
                diff(
                    &output::output_to_json(&standard),
                    &output::output_to_json(&strict)
                )
            ));
        }
        for (key, gw) in &out.gateways {
            let b = bootstrap::static_bootstrap(gw, key, &Default::default());
            if let Err(e) = testkit::envoy::validate(&b) {
                failures.push(format!("{name}: Envoy rejected the xDS of Gateway {key}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Line diff of the pretty JSON forms (first differing region, with context).
fn diff(expected: &serde_json::Value, actual: &serde_json::Value) -> String {
    let e = serde_json::to_string_pretty(expected).unwrap_or_default();
    let a = serde_json::to_string_pretty(actual).unwrap_or_default();
    let el: Vec<&str> = e.lines().collect();
    let al: Vec<&str> = a.lines().collect();
    let first = el
        .iter()
        .zip(&al)
        .position(|(x, y)| x != y)
        .unwrap_or(el.len().min(al.len()));
    let from = first.saturating_sub(3);
    let mut out = String::new();
    for l in el.iter().skip(from).take(12) {
        out.push_str(&format!("- {l}\n"));
    }
    for l in al.iter().skip(from).take(12) {
        out.push_str(&format!("+ {l}\n"));
    }
    out
}
