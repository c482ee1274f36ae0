//! The checked-in CRDs of our kinds (`crds/portcullis/`) are exactly what
//! the Rust types generate (`api::crd`). `PORTCULLIS_UPDATE_CRDS=1`
//! rewrites them.

use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds/portcullis")
}

#[test]
fn checked_in_crds_are_generated_from_the_types() {
    let update = std::env::var_os("PORTCULLIS_UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for (file, crd) in api::crd::all().expect("generate CRDs") {
        let path = dir().join(file);
        let want = api::crd::to_yaml(&crd);
        if update {
            std::fs::create_dir_all(dir()).expect("mkdir crds/portcullis");
            std::fs::write(&path, &want).expect("write CRD");
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (regenerate with PORTCULLIS_UPDATE_CRDS=1 cargo test -p api --test crds): {stale:?}"
    );
}

#[test]
fn schema_checks_types_and_keeps_unknown_fields() {
    let crd = api::crd::traffic_policy().expect("generate");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    // A type from the Rust type (i64 -> integer), a required field, an enum.
    let bucket = &spec["properties"]["localRateLimit"]["properties"]["tokenBucket"];
    assert_eq!(bucket["properties"]["maxTokens"]["type"], "integer");
    assert!(
        bucket["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|f| f == "fillInterval"))
    );
    assert_eq!(
        spec["properties"]["rbac"]["properties"]["action"]["enum"],
        serde_json::json!(["Allow", "Deny"])
    );
    // Unknown fields kept (never pruned into a policy that serves open).
    assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(bucket["x-kubernetes-preserve-unknown-fields"], true);
    assert!(!schema.to_string().contains("\"default\""));
}
