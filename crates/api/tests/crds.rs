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

/// Contour's kinds keep Contour's names (manifests and `kubectl get proxy`
/// move over unchanged), its printer columns and a status subresource,
/// and keep every field the types do not know at every level of the spec:
/// an unimplemented or misspelled field reaches the loader (which fails
/// the proxy closed) instead of being pruned by the apiserver.
#[test]
fn contour_kinds_keep_contours_names_and_every_unknown_field() {
    let crd = api::crd::http_proxy().expect("generate");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("httpproxies.projectcontour.io")
    );
    assert_eq!(crd.spec.group, "projectcontour.io");
    assert_eq!(crd.spec.scope, "Namespaced");
    let names = &crd.spec.names;
    assert_eq!(
        (
            names.kind.as_str(),
            names.plural.as_str(),
            names.singular.as_deref()
        ),
        ("HTTPProxy", "httpproxies", Some("httpproxy"))
    );
    assert_eq!(names.list_kind.as_deref(), Some("HTTPProxyList"));
    assert_eq!(
        names.short_names,
        Some(vec!["proxy".to_string(), "proxies".to_string()])
    );
    let version = &crd.spec.versions[0];
    assert_eq!(
        (version.name.as_str(), version.served, version.storage),
        ("v1", true, true)
    );
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("FQDN", ".spec.virtualhost.fqdn"),
            ("TLS Secret", ".spec.virtualhost.tls.secretName"),
            ("Status", ".status.currentStatus"),
            ("Status Description", ".status.description"),
        ]
    );
    assert!(version.subresources.as_ref().is_some_and(|s| s.status.is_some()));

    let schema = serde_json::to_value(&version.schema).expect("json");
    let root = &schema["openAPIV3Schema"]["properties"];
    let spec = &root["spec"];
    let route = &spec["properties"]["routes"]["items"];
    let service = &route["properties"]["services"]["items"];
    for (at, object) in [
        ("spec", spec),
        ("spec.virtualhost", &spec["properties"]["virtualhost"]),
        (
            "spec.virtualhost.tls",
            &spec["properties"]["virtualhost"]["properties"]["tls"],
        ),
        ("spec.routes[]", route),
        ("spec.routes[].services[]", service),
        (
            "spec.routes[].conditions[]",
            &route["properties"]["conditions"]["items"],
        ),
        ("spec.includes[]", &spec["properties"]["includes"]["items"]),
        ("status", &root["status"]),
    ] {
        assert_eq!(
            object["x-kubernetes-preserve-unknown-fields"], true,
            "{at}: {object}"
        );
    }
    // What the types allow is checked: types and required fields.
    assert_eq!(service["properties"]["port"]["type"], "integer");
    assert_eq!(service["required"], serde_json::json!(["name", "port"]));
    assert_eq!(
        spec["properties"]["virtualhost"]["required"],
        serde_json::json!(["fqdn"])
    );
    assert_eq!(root["status"]["properties"]["currentStatus"]["type"], "string");
    let text = schema.to_string();
    assert!(
        !text.contains("\"default\""),
        "the apiserver would inject defaults"
    );
    assert!(
        !text.contains("additionalProperties"),
        "not structural / would refuse unknown fields"
    );

    let crd = api::crd::tls_certificate_delegation().expect("generate");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("tlscertificatedelegations.projectcontour.io")
    );
    assert_eq!(crd.spec.names.kind, "TLSCertificateDelegation");
    assert_eq!(crd.spec.names.short_names, Some(vec!["tlscerts".to_string()]));
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(
        spec["properties"]["delegations"]["items"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}
