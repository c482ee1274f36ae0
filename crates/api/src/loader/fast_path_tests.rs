//! The fast path (a document read without spans, see `load_fast`) must give
//! exactly what the spanned path gives: the same inputs and the same
//! diagnostics, messages and lines. Compared on every translator fixture
//! (as YAML, and each document as a `.json` file) and on broken inputs.

use std::path::Path;

use super::{Reading, Sink, load_fast, load_str, load_str_spanned, split};

const MARKER: &str = "# ---- expected output";

fn assert_same(file: &str, text: &str) {
    let fast = load_str(file, text);
    let spanned = load_str_spanned(file, text);
    assert_eq!(fast, spanned, "fast and spanned loads differ for {file}:\n{text}");
}

fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../translate/tests/fixtures");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("fixture entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("fixture text");
        let input = text.split(MARKER).next().unwrap_or_default().to_string();
        out.push((path.display().to_string(), input));
    }
    out.sort();
    assert!(
        out.len() > 50,
        "expected the translator's fixtures in {}",
        dir.display()
    );
    out
}

#[test]
fn every_fixture_loads_the_same_both_ways() {
    for (file, input) in fixtures() {
        assert_same(&file, &input);
        // Each document on its own, as a `.json` file.
        for (index, chunk) in split::split(&input).iter().enumerate() {
            let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(chunk.text) else {
                continue;
            };
            if value.is_null() {
                continue;
            }
            let json = serde_json::to_string_pretty(&value).expect("JSON");
            assert_same(&format!("{file}.{index}.json"), &json);
        }
    }
}

#[test]
fn clean_documents_take_the_fast_path_and_broken_ones_do_not() {
    let good = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n";
    let sink = Sink::default();
    let inputs = load_fast(&sink, "f.yaml", good, 1, Reading::Fast);
    assert_eq!(inputs.map(|i| i.namespaces.len()), Some(1));
    for bad in [
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  bogus: 1\n",
        "apiVersion: v1\nkind: Namespace\nmetadata: [\n",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: b\n",
    ] {
        let sink = Sink::default();
        assert!(
            load_fast(&sink, "f.yaml", bad, 1, Reading::Fast).is_none(),
            "{bad}"
        );
        assert!(sink.diagnostics.is_empty(), "nothing reported for {bad}");
    }
}

const ROUTE_HEAD: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\n  namespace: ns\nspec:\n  parentRefs:\n  - name: gw\n";

#[test]
fn broken_inputs_load_the_same_both_ways() {
    let good = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: ns\nspec:\n  ports:\n  - port: 80\n";
    let cases: Vec<(&str, String)> = vec![
        ("unknown field", format!("{ROUTE_HEAD}  bogus: 1\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: /}}\n      extra: x\n")),
        ("wrong type", format!("{ROUTE_HEAD}  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: [1]}}\n  - backendRefs:\n    - name: s\n      port: eighty\n")),
        ("unknown enum", format!("{ROUTE_HEAD}  rules:\n  - matches:\n    - path: {{type: Glob, value: /}}\n    - method: FETCH\n")),
        ("broken between good", format!("{good}---\n{ROUTE_HEAD}  rules: [\n---\n{good}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n")),
        ("duplicate keys", format!("{ROUTE_HEAD}  rules: []\n  rules: []\n")),
        ("duplicate objects", format!("{good}---\n{good}")),
        ("tabs", format!("{ROUTE_HEAD}\trules: []\n")),
        ("tab in value", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name:\ta\n".to_string()),
        ("anchors", format!("{ROUTE_HEAD}  rules:\n  - &r\n    matches:\n    - path: {{type: PathPrefix, value: /a}}\n  - *r\n")),
        ("undefined alias", format!("{ROUTE_HEAD}  rules:\n  - *nope\n")),
        ("missing name", "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: ns\n".to_string()),
        ("bad name", "apiVersion: v1\nkind: Service\nmetadata:\n  name: Not_Valid\n".to_string()),
        ("unknown kind", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n".to_string()),
        ("scalar document", "just text\n".to_string()),
        ("several documents after ...", format!("{good}...\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n")),
        ("list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n- {apiVersion: v1, kind: Namespace, metadata: {name: B}}\n".to_string()),
        ("status ignored", format!("{good}status:\n  x: 1\n")),
        ("singular useDefaultGateway", format!("{ROUTE_HEAD}  useDefaultGateway: All\n")),
        ("secret value", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  tls.crt: [1]\n".to_string()),
        ("non-finite float", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n  labels:\n    a: .nan\n    b: yes\n".to_string()),
        ("policy unreadable", "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata:\n  name: p\nspec:\n  targetRefs: 3\n".to_string()),
    ];
    for (what, text) in &cases {
        assert_same(&format!("{what}.yaml"), text);
    }
    // The same as JSON, where the YAML reader is tried first.
    assert_same(
        "dup.json",
        "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}",
    );
    assert_same(
        "unknown.json",
        "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\", \"x\": 1}}",
    );
    assert_same("broken.json", "{\"apiVersion\": \"v1\", \"kind\": ");
    assert_same(
        "good.json",
        "\n\n{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}",
    );
}
