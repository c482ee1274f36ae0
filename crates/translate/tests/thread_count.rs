//! The output does not depend on how many threads translate: generated
//! inputs (several Gateways, routes, rules) and every golden fixture give
//! identical output with one thread and with several.

use testkit::generate::{Shape, manifests};

fn with_threads(inputs: &api::Inputs, n: usize) -> translate::Output {
    let settings = translate::Settings {
        parallelism: Some(n),
        ..Default::default()
    };
    translate::translate(inputs, &settings)
}

#[test]
fn generated_inputs_translate_identically_on_any_thread_count() {
    // Above the pipeline's threshold (500 routes), so every step runs
    // in parallel.
    let loaded = api::loader::load_str("generated.yaml", &manifests(Shape::with_routes(600)));
    let one = with_threads(&loaded.inputs, 1);
    assert!(one.gateways.len() >= 2, "the shape has several Gateways");
    for n in [2, 3, 8] {
        assert!(
            with_threads(&loaded.inputs, n) == one,
            "{n} threads changed the output"
        );
    }
}

#[test]
fn fixtures_translate_identically_on_any_thread_count() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("fixture");
        let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
        let loaded = api::loader::load_str(&path.to_string_lossy(), input);
        let one = with_threads(&loaded.inputs, 1);
        assert!(
            with_threads(&loaded.inputs, 4) == one,
            "{}: 4 threads changed the output",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} fixtures found");
}
