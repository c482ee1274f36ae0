//! The offline CLI: `translate` output contract and exit codes, `get` and
//! `describe` tables computed from manifests with `-f`.

use std::path::PathBuf;
use std::process::Command;

fn quickstart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .output()
        .expect("run portcullis");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn translate_json_follows_the_contract() {
    let q = quickstart();
    let (code, out, err) = run(&["translate", "-f", q.to_str().unwrap_or_default(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let gw = &doc["gateways"]["infra/shared"];
    for k in ["listeners", "routes", "clusters", "endpoints", "secrets"] {
        assert!(gw[k].is_array(), "missing {k}");
    }
    assert_eq!(gw["routes"][0]["name"], "infra/shared/8080");
    assert!(
        doc["status"]
            .as_array()
            .is_some_and(|s| s.iter().any(|o| o["kind"] == "HTTPRoute"))
    );
    assert!(doc["diagnostics"].is_array());
}

#[test]
fn unreadable_path_exits_2_with_a_message() {
    let (code, _, err) = run(&["translate", "-f", "/no/such/path"]);
    assert_eq!(code, 2);
    assert!(err.contains("/no/such/path"), "{err}");
}

#[test]
fn get_and_describe_offline() {
    let q = quickstart();
    let q = q.to_str().unwrap_or_default();
    let (code, out, err) = run(&["get", "gateways", "-f", q]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.contains("shared")).expect("gateway row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "infra",
            "shared",
            "portcullis",
            "127.0.0.1",
            "-",
            "True",
            "True",
            "1"
        ]
    );

    let (code, out, _) = run(&["get", "routes", "-f", q]);
    assert_eq!(code, 0);
    assert!(
        out.lines().any(|l| l.starts_with("HTTPRoute")
            && l.contains("echo.example.com")
            && l.contains("infra/shared")),
        "{out}"
    );

    let (code, out, _) = run(&["describe", "route", "app/echo", "-f", q]);
    assert_eq!(code, 0);
    assert!(out.contains("Parent Gateway infra/shared"), "{out}");
    assert!(out.contains("Accepted") && out.contains("ResolvedRefs"), "{out}");

    let (code, _, err) = run(&["describe", "route", "nope", "-f", q]);
    assert_eq!(code, 2);
    assert!(err.contains("no route nope"), "{err}");
}

/// `get -f` reads manifests with `translate`'s flags and environment
/// (one offline translation behind both): a controller name that is not
/// the GatewayClass's leaves no Gateway in either, and STRICT without an
/// Envoy binary is refused by both.
#[test]
fn get_reads_manifests_as_translate_does() {
    let q = quickstart();
    let q = q.to_str().unwrap_or_default();
    let run_env = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .env("PORTCULLIS_CONTROLLER_NAME", "other.dev/controller")
            .output()
            .expect("run portcullis");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run_env(&["translate", "-f", q, "-o", "json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["gateways"], serde_json::json!({}), "{out}");
    let (code, out) = run_env(&["get", "gateways", "-f", q]);
    assert_eq!(code, 0);
    assert!(
        !out.contains("shared"),
        "another controller's Gateway listed:\n{out}"
    );

    for cmd in [["translate", "-f"], ["get", "routes"]] {
        let mut args: Vec<&str> = cmd.to_vec();
        if cmd[0] == "get" {
            args.push("-f");
        }
        args.extend([
            q,
            "--route-replacement-mode",
            "STRICT",
            "--envoy-bin",
            "/no/such/envoy",
        ]);
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("STRICT route replacement needs the Envoy binary"),
            "{args:?}: {err}"
        );
    }
}
