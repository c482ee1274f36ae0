//! The runner must be able to fail: a copy of a few upstream cases with
//! deliberate mismatches (wrong expected backend, wrong redirect path,
//! wrong response header, a status condition nobody sets, a manifest that
//! routes to the wrong Service) has to produce FAIL lines naming the
//! mismatch, while an untouched case still passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn cases_dir() -> PathBuf {
    let candidates = [
        std::env::var_os("PORTCULLIS_CONFORMANCE_CASES").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/gateway-api")),
        Some(PathBuf::from("/work/shared/conformance/gateway-api")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("index.json").is_file())
        .expect("conformance cases not found: set PORTCULLIS_CONFORMANCE_CASES")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).expect("json")).expect("write");
}

fn copy_test(from: &Path, to: &Path, test: &str) {
    std::fs::create_dir_all(to.join(test)).expect("mkdir");
    for entry in std::fs::read_dir(from.join(test)).expect("read_dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(test).join(entry.file_name())).expect("copy");
    }
}

/// Both modes bind ports 80/443 of 127.0.1.N: one run at a time.
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn mismatches_fail_and_untouched_cases_pass() {
    mismatches("file");
}

/// The same in controller mode: objects applied through a real
/// kube-apiserver, status read back from the API (not the admin API).
#[test]
fn controller_mode_mismatches_fail_and_untouched_cases_pass() {
    let test = "controller_mode_mismatches_fail_and_untouched_cases_pass";
    if let Some(reason) = testkit::kube::missing() {
        assert!(
            std::env::var_os("PORTCULLIS_REQUIRE_KUBE").is_none_or(|v| v.is_empty()),
            "{test}: PORTCULLIS_REQUIRE_KUBE is set but {reason}"
        );
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
        return;
    }
    mismatches("controller");
}

fn mismatches(mode: &str) {
    let _one = ONE_RUN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let src = cases_dir();
    let dst = std::env::temp_dir().join(format!(
        "portcullis-conformance-selfcheck-{mode}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).expect("mkdir");
    std::fs::copy(src.join("base-manifests.yaml"), dst.join("base-manifests.yaml")).expect("copy base");
    let tests = [
        "HTTPRouteSimpleSameNamespace",
        "HTTPRouteMatching",
        "HTTPRouteRedirectPath",
        "HTTPRouteResponseHeaderModifier",
        "HTTPRouteExactPathMatching",
        "HTTPRouteCrossNamespace",
    ];
    for t in tests {
        copy_test(&src, &dst, t);
    }
    let index: Vec<Value> = tests.iter().map(|t| serde_json::json!({ "test": t })).collect();
    write(&dst.join("index.json"), &Value::Array(index));

    // Expectation mutations.
    let edit = |test: &str, f: &dyn Fn(&mut Value)| {
        let p = dst.join(test).join("cases.json");
        let mut v = read(&p);
        f(&mut v);
        write(&p, &v);
    };
    edit("HTTPRouteMatching", &|v| {
        v["request_groups"][0]["cases"][0]["expected"]["backend"] = "infra-backend-v2".into();
    });
    edit("HTTPRouteRedirectPath", &|v| {
        v["request_groups"][0]["cases"][0]["expected"]["redirect"]["path"] = "/somewhere-else/lemon".into();
    });
    edit("HTTPRouteResponseHeaderModifier", &|v| {
        v["request_groups"][0]["cases"][0]["expected"]["response_headers"]["X-Header-Set"] = "other".into();
    });
    edit("HTTPRouteExactPathMatching", &|v| {
        v["status_assertions"][1]["condition"]["reason"] = "NotAReason".into();
    });
    // A manifest-side change: the route points at a Service that does not
    // exist, which the status assertions must catch.
    let m = dst.join("HTTPRouteCrossNamespace");
    for entry in std::fs::read_dir(&m).expect("read_dir") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&p).expect("read");
            assert!(
                text.contains("web-backend"),
                "manifest changed upstream: {}",
                p.display()
            );
            std::fs::write(&p, text.replace("name: web-backend", "name: missing-backend")).expect("write");
        }
    }

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conformance"));
    cmd.arg(&dst)
        .arg("--consistency-timeout")
        .arg("3")
        .arg("--work-dir")
        .arg(dst.join("work"))
        .args(["--mode", mode]);
    if std::env::var_os("ENVOY_BIN").is_none() {
        cmd.env(
            "ENVOY_BIN",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/envoy"),
        );
    }
    let out = cmd.output().expect("run conformance");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let line = |test: &str| -> &str {
        lines
            .iter()
            .find(|l| l.split([' ', ':']).nth(1) == Some(test))
            .copied()
            .unwrap_or_else(|| panic!("no line for {test} in:\n{stdout}"))
    };
    assert_eq!(
        line("HTTPRouteSimpleSameNamespace"),
        "PASS HTTPRouteSimpleSameNamespace",
        "{stdout}"
    );
    let expect_fail = [
        ("HTTPRouteMatching", "backend pod: expected infra-backend-v2-*"),
        (
            "HTTPRouteRedirectPath",
            "redirect path: expected \"/somewhere-else/lemon\"",
        ),
        (
            "HTTPRouteResponseHeaderModifier",
            "response header X-Header-Set: expected \"other\"",
        ),
        ("HTTPRouteExactPathMatching", "reason \"NotAReason\""),
        ("HTTPRouteCrossNamespace", "ResolvedRefs=False/BackendNotFound"),
    ];
    for (test, needle) in expect_fail {
        let l = line(test);
        assert!(l.starts_with(&format!("FAIL {test}: ")), "{l}");
        assert!(l.contains(needle), "{test}: expected {needle:?} in {l:?}");
    }
    assert_eq!(
        lines.last().copied(),
        Some("1 passed, 5 failed, 0 skipped"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let _ = std::fs::remove_dir_all(&dst);
}
