//! Inputs the real Envoy once rejected (found by hunting for STANDARD's
//! blind spots), kept as regressions. Each file in `tests/rejections/`
//! starts with comment lines:
//!
//! - `# envoy: …` what Envoy 1.40 said about the output before the fix;
//! - `# standard: …` a substring of the error diagnostic STANDARD must now
//!   report (the rule replaced, the listener refused, the policy invalid),
//!   or `(accepted)` when the fix made the input valid as written (e.g. a
//!   shallower encoding): then STANDARD must report no error.
//!
//! Each case must produce that diagnostic, and the whole output must be
//! accepted by the real Envoy (`--mode validate`): the mistake is reported
//! and contained, never a NACK.
//!
//! Cases named `tls-accepted-*` are Secrets the real Envoy takes although
//! they look odd (keys of every type and encoding, X.509 and base64
//! encodings BoringSSL still reads): they keep STANDARD's TLS checks from
//! refusing more than BoringSSL does.
//!
//! `tests/rejections/strict-only/` holds the inputs STANDARD deliberately
//! does not model (see the README's STRICT section): there the test
//! asserts the opposite, that STANDARD reports nothing and Envoy rejects the
//! output, so that a case that becomes caught in-process moves to the main
//! directory instead of silently changing meaning.

#[path = "support/fixture_files.rs"]
mod fixture_files;

use std::path::{Path, PathBuf};

use translate::output::bootstrap;

fn cases(dir: &str) -> Vec<PathBuf> {
    fixture_files::yaml_files(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/rejections")
            .join(dir),
    )
}

/// One case: its file name, its text, and its STANDARD translation.
struct Case {
    name: String,
    text: String,
    out: translate::Output,
}

fn translated(dir: &str) -> Vec<Case> {
    cases(dir)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("case");
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let loaded = api::loader::load_str(&name, &text);
            let out = translate::translate(&loaded.inputs, &translate::Settings::default());
            Case { name, text, out }
        })
        .collect()
}

fn header(text: &str, key: &str) -> Option<String> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
        .map(str::to_string)
}

/// Every Gateway's output through `envoy --mode validate`: the rejections.
fn envoy_rejections(out: &translate::Output) -> Vec<String> {
    out.gateways
        .iter()
        .filter_map(|(key, gw)| {
            let b = bootstrap::static_bootstrap(gw, key, &Default::default());
            testkit::envoy::validate(&b).err().map(|e| format!("{key}: {e}"))
        })
        .collect()
}

fn errors(out: &translate::Output) -> Vec<String> {
    out.diagnostics
        .iter()
        .filter(|d| d.severity == api::Severity::Error)
        .map(|d| d.message.clone())
        .chain(out.status.iter().flat_map(|s| {
            // Listener and policy conditions carry refusals that are not
            // diagnostics (e.g. InvalidCertificateRef).
            let v = translate::status::Timed::new(&s.status, &out.transition_time).to_json();
            let mut found = Vec::new();
            collect_false_messages(&v, &mut found);
            found
        }))
        .collect()
}

fn collect_false_messages(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            let field = |k: &str| m.get(k).and_then(|s| s.as_str());
            // A refusal: Accepted/ResolvedRefs/Programmed False, or a
            // route's PartiallyInvalid True.
            let refused = matches!(
                (field("type"), field("status")),
                (Some("Accepted" | "ResolvedRefs" | "Programmed"), Some("False"))
                    | (Some("PartiallyInvalid"), Some("True"))
            );
            if refused && let Some(msg) = field("message") {
                out.push(msg.to_string());
            }
            m.values().for_each(|x| collect_false_messages(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_false_messages(x, out)),
        _ => {}
    }
}

#[test]
fn each_former_rejection_is_caught_in_process_and_envoy_accepts_the_output() {
    let files = translated("");
    assert!(
        files.len() >= 87,
        "expected the hunted cases and their accepted counterparts, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for Case { name, text, out } in &files {
        let want = header(text, "standard").unwrap_or_else(|| panic!("{name}: no `# standard:` line"));
        assert!(header(text, "envoy").is_some(), "{name}: no `# envoy:` line");
        let errs = errors(out);
        if want == "(accepted)" {
            if !errs.is_empty() {
                failures.push(format!("{name}: expected no error, got {errs:?}"));
            }
        } else if !errs.iter().any(|e| e.contains(want.as_str())) {
            failures.push(format!("{name}: no error containing {want:?}; errors: {errs:?}"));
        }
        for r in envoy_rejections(out) {
            failures.push(format!("{name}: Envoy rejected the output: {r}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn strict_only_cases_are_still_invisible_to_standard_and_rejected_by_envoy() {
    for Case { name, out, .. } in translated("strict-only") {
        let errs = errors(&out);
        assert!(
            errs.is_empty(),
            "{name}: STANDARD now reports {errs:?}: move it to tests/rejections/ with a `# standard:` line"
        );
        assert!(
            !envoy_rejections(&out).is_empty(),
            "{name}: Envoy now accepts it: it no longer shows what STRICT adds"
        );
    }
}
