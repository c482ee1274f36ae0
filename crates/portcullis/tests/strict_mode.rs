//! routeReplacementMode end to end: the setting's sources and errors, the
//! Envoy-backed validator (cache, collapsing, timeout, missing binary), and
//! the replacement metrics served on /metrics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use portcullis::validator::{EnvoyValidator, Options, ValidatorMetrics};
use translate::strict::{Candidate, Validator, Verdict};

fn envoy() -> PathBuf {
    testkit::envoy::binary().expect("envoy")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../translate/tests/fixtures/{name}.yaml"))
}

/// The fixture's input part, as its own file (fixtures append expectations).
fn fixture_input(name: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture");
    let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
    std::fs::create_dir_all(dir).expect("mkdir");
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, input).expect("write");
    path
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portcullis-strict-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn portcullis(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    cmd.args(args).env_remove("PORTCULLIS_ROUTE_REPLACEMENT_MODE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run portcullis");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bootstrap(cluster: &str, timeout: &str) -> serde_json::Value {
    serde_json::json!({"static_resources": {"clusters": [{"name": cluster, "connect_timeout": timeout}]}})
}

fn candidate(cluster: &str, timeout: &str) -> Candidate {
    Candidate {
        label: cluster.into(),
        bootstrap: bootstrap(cluster, timeout),
        xds: None,
    }
}

#[test]
fn validator_caches_collapses_and_reports_envoys_reason() {
    let metrics = ValidatorMetrics::default();
    let v = EnvoyValidator::new(envoy(), Options::default(), metrics.clone()).expect("validator");
    let batch = vec![
        candidate("a", "1s"),
        candidate("a", "1s"),
        candidate("a", "1s"),
        candidate("b", "-1s"),
    ];
    let verdicts = v.validate(&batch);
    assert_eq!(
        verdicts[..3],
        [Verdict::Accepted, Verdict::Accepted, Verdict::Accepted]
    );
    match &verdicts[3] {
        Verdict::Rejected(m) => {
            assert!(m.starts_with("Invalid duration"), "{m}");
            assert!(!m.contains("debugproto"), "the proto dump is dropped: {m}");
            assert!(
                !m.contains("candidate-"),
                "the temp path must not leak into messages: {m}"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // Identical candidates ran once: two Envoy runs for four candidates.
    assert_eq!(metrics.calls.get(), 2);
    assert_eq!(metrics.cache_hits.get(), 2);
    // A second identical batch is answered from the cache.
    assert_eq!(v.validate(&batch), verdicts);
    assert_eq!(metrics.calls.get(), 2);
    assert_eq!(metrics.cache_hits.get(), 6);
}

#[test]
fn a_hanging_validator_is_an_environment_error_not_a_rejection() {
    let dir = tmp("hang");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let fake = dir.join("envoy");
    std::fs::write(&fake, "#!/bin/sh\nsleep 5\n").expect("write");
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&fake)
        .status()
        .expect("chmod");
    assert!(status.success());
    let metrics = ValidatorMetrics::default();
    let options = Options {
        timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let v = EnvoyValidator::new(fake, options, metrics.clone()).expect("validator");
    let verdicts = v.validate(&[candidate("a", "1s")]);
    assert!(
        matches!(&verdicts[0], Verdict::Unavailable(m) if m.contains("timed out")),
        "{verdicts:?}"
    );
    assert_eq!(metrics.environment_errors.get(), 1);
    // Not cached: the next call runs again.
    let _ = v.validate(&[candidate("a", "1s")]);
    assert_eq!(metrics.calls.get(), 2);
}

#[test]
fn mode_errors_are_startup_errors_listing_the_allowed_values() {
    let q = fixture("basic-http");
    let q = q.to_str().unwrap_or_default();
    let (code, _, err) = portcullis(
        &["translate", "-f", q, "--route-replacement-mode", "LENIENT"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--route-replacement-mode: invalid route replacement mode \"LENIENT\": allowed values are STANDARD, STRICT"),
        "{err}"
    );
    let (code, _, err) = portcullis(
        &["translate", "-f", q],
        &[("PORTCULLIS_ROUTE_REPLACEMENT_MODE", "strict")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("PORTCULLIS_ROUTE_REPLACEMENT_MODE: invalid"),
        "{err}"
    );
    let (code, _, err) = portcullis(
        &["translate", "-f", q],
        &[
            ("PORTCULLIS_ROUTE_REPLACEMENT_MODE", "STRICT"),
            ("ENVOY_BIN", "/nonexistent/envoy"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("STRICT route replacement needs the Envoy binary"),
        "{err}"
    );
    // serve checks the mode before it binds or watches anything.
    let (code, _, err) = portcullis(
        &[
            "serve",
            "--no-envoy",
            q,
            "--route-replacement-mode",
            "NONE",
            "--admin-address",
            "127.0.0.1:0",
            "--xds-address",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("allowed values are STANDARD, STRICT"), "{err}");
}

#[test]
fn strict_from_the_config_file_changes_nothing_on_a_clean_config() {
    let dir = tmp("config");
    let input = fixture_input("ordering-across-routes", &dir.join("in"));
    let config = dir.join("portcullis.yaml");
    std::fs::write(&config, "routeReplacementMode: STRICT\n").expect("write");
    let input = input.to_str().unwrap_or_default();
    let envoy = envoy();
    let envoy = envoy.to_str().unwrap_or_default();
    let (code, standard, err) = portcullis(&["translate", "-f", input, "-o", "json"], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, strict, err) = portcullis(
        &[
            "translate",
            "-f",
            input,
            "-o",
            "json",
            "--config",
            config.to_str().unwrap_or_default(),
        ],
        &[("ENVOY_BIN", envoy)],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(strict, standard);
    std::fs::write(&config, "routeReplacementMode: STRICT\nbogus: 1\n").expect("write");
    let (code, _, err) = portcullis(
        &[
            "translate",
            "-f",
            input,
            "--config",
            config.to_str().unwrap_or_default(),
        ],
        &[("ENVOY_BIN", envoy)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("portcullis.yaml") && err.contains("bogus"), "{err}");
}

#[test]
fn describe_route_lists_each_replaced_rule_with_its_class() {
    let dir = tmp("describe");
    let input = fixture_input("invalid-header-name", &dir);
    let (code, out, err) = portcullis(
        &[
            "describe",
            "route",
            "app/r",
            "-f",
            input.to_str().unwrap_or_default(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == "Replaced rules (answer HTTP 500):")
        .unwrap_or_else(|| panic!("no replaced-rules section:\n{out}"));
    assert_eq!(
        lines[at + 1].trim(),
        "Rule (0) [structural] spec.rules[0].filters[0].requestHeaderModifier.set[0].name: \"bad header\" is not a valid header name (on infra/gw)"
    );
}

fn free_port() -> u16 {
    testkit::port::free()
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

#[test]
fn serve_counts_replacements_per_route_and_class() {
    let dir = tmp("serve");
    fixture_input("invalid-header-name", &dir.join("in"));
    let admin = format!("127.0.0.1:{}", free_port());
    let xds = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args([
            "serve",
            "--no-envoy",
            "--admin-address",
            &admin,
            "--xds-address",
            &xds,
        ])
        .arg(dir.join("in"))
        .env_remove("PORTCULLIS_ROUTE_REPLACEMENT_MODE")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let labels = "{gateway=\"infra/gw\",route_namespace=\"app\",route_name=\"r\",error_class=\"structural\"}";
    // The `_current` gauge is set just after the `_total` counter: wait
    // for both.
    let current = format!("portcullis_invalid_route_replacements_current{labels} 1");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut metrics = String::new();
    while std::time::Instant::now() < deadline {
        if let Some(m) = http_get(&admin, "/metrics") {
            let done = m.contains("portcullis_invalid_route_replacements_total") && m.contains(&current);
            metrics = m;
            if done {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        metrics.contains(&format!("portcullis_invalid_route_replacements_total{labels} 1")),
        "{metrics}"
    );
    assert!(metrics.contains(&current), "{metrics}");
    assert!(
        metrics.contains("portcullis_strict_validator_calls_total 0"),
        "{metrics}"
    );
}

#[test]
fn after_an_edit_only_the_dirty_route_configuration_costs_a_call() {
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(40));
    let metrics = ValidatorMetrics::default();
    let v = EnvoyValidator::new(envoy(), Options::default(), metrics.clone()).expect("validator");
    let run = |text: &str| {
        let inputs = api::loader::load_str("generated.yaml", text).inputs;
        translate::translate_with(&inputs, &translate::Settings::default(), Some(&v))
    };
    let cold = run(&text);
    let route_configs: u64 = cold.gateways.values().map(|g| g.routes.len() as u64).sum();
    // Cold: a skeleton per Gateway and one call per route configuration.
    assert_eq!(metrics.calls.get(), cold.gateways.len() as u64 + route_configs);
    let before = metrics.calls.get();
    let again = run(&text);
    assert!(again == cold, "a second translation of the same input differs");
    assert!(cold.diagnostics.is_empty(), "{:?}", cold.diagnostics);
    assert_eq!(
        metrics.calls.get(),
        before,
        "nothing changed: nothing to validate"
    );
    let edited = text.replacen("value: /api/v0}", "value: /api/v0-edited}", 1);
    assert_ne!(edited, text);
    let out = run(&edited);
    assert_eq!(
        metrics.calls.get(),
        before + 1,
        "one dirty route configuration, one call"
    );
    assert!(out.replacements.is_empty());
}
