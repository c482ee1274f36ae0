//! CustomResourceDefinitions generated from the Rust types: portcullis's
//! own kinds (TrafficPolicy, GatewayExtension, GatewayParameters, from
//! [`crate::policy`] and [`crate::gateway_parameters`]) and Contour's
//! `projectcontour.io/v1` HTTPProxy and TLSCertificateDelegation (from
//! [`crate::httpproxy`]), with `schemars`; the checked-in copies in
//! `crds/portcullis/` are kept equal to these by `crates/api/tests/crds.rs`.
//!
//! The schema checks what the types can say (field types, required
//! fields, enum values, documentation), with one deliberate loosening:
//! every object keeps unknown fields (`x-kubernetes-preserve-unknown-fields`).
//! A structural schema would otherwise *prune* a misspelled field on
//! write, silently — a TrafficPolicy whose `extAuth` was typed `extauth`
//! would then be stored as a policy without external authorization and
//! serve its routes open. Kept, the unknown field reaches the loader,
//! which refuses it exactly as in file mode (the policy is invalid and
//! its targets fail closed, see [`crate::policy`]).
//!
//! Contour's kinds are generated the same way and **replace Contour's own
//! CRDs** (same names, group, version, short names and printer columns, so
//! Contour manifests and `kubectl get proxy` work unchanged): Contour's
//! schema prunes every field it does not know — a typo, a field of a newer
//! Contour — and it describes fields portcullis does not implement as if
//! they worked. With this schema such a field is kept, the HTTPProxy loader
//! (which denies unknown fields) reports it, and the proxy is invalid and
//! fenced instead of served without it. The status schema keeps Contour's
//! shape (`currentStatus`, `description`, `conditions`, `loadBalancer`; see
//! the status writer in `kube-provider`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::httpproxy::{HttpProxySpec, TlsCertificateDelegationSpec};
use crate::policy::{GatewayExtensionSpec, TrafficPolicySpec};

/// Why a CRD could not be generated (a schema the apiserver's type cannot
/// hold: a bug in this module, reported instead of panicking).
#[derive(Debug, thiserror::Error)]
#[error("CRD {kind}: the generated schema does not read as JSONSchemaProps: {source}")]
pub struct CrdError {
    pub kind: &'static str,
    #[source]
    pub source: serde_json::Error,
}

/// Every CRD of our kinds, with the file name it is checked in under.
pub fn all() -> Result<Vec<(&'static str, CustomResourceDefinition)>, CrdError> {
    Ok(vec![
        ("trafficpolicies.yaml", traffic_policy()?),
        ("gatewayextensions.yaml", gateway_extension()?),
        ("gatewayparameters.yaml", gateway_parameters()?),
        ("httpproxies.yaml", http_proxy()?),
        ("tlscertificatedelegations.yaml", tls_certificate_delegation()?),
    ])
}

/// Names, group and version of one CRD, and what it shows in `kubectl get`.
struct Definition {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    /// `(name, jsonPath, description)`, all of type string.
    columns: &'static [(&'static str, &'static str, &'static str)],
    /// The schema of `status` (never pruning: the controller writes it).
    status: Value,
}

impl Definition {
    /// One of portcullis's own kinds (`gateway.portcullis.dev/v1alpha1`).
    fn ours(kind: &'static str, plural: &'static str, short: &'static [&'static str]) -> Self {
        Self {
            group: crate::policy::GROUP,
            version: crate::policy::VERSION,
            kind,
            plural,
            short,
            categories: &["portcullis"],
            columns: &[],
            // Written by the controller; its shape is the Gateway API's
            // policy status (ancestors), not checked here.
            status: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        }
    }
}

pub fn traffic_policy() -> Result<CustomResourceDefinition, CrdError> {
    crd::<TrafficPolicySpec>(Definition::ours("TrafficPolicy", "trafficpolicies", &["tp"]))
}

pub fn gateway_extension() -> Result<CustomResourceDefinition, CrdError> {
    crd::<GatewayExtensionSpec>(Definition::ours(
        "GatewayExtension",
        "gatewayextensions",
        &["gwext"],
    ))
}

pub fn gateway_parameters() -> Result<CustomResourceDefinition, CrdError> {
    crd::<crate::gateway_parameters::GatewayParametersSpec>(Definition::ours(
        "GatewayParameters",
        "gatewayparameters",
        &["gwparams"],
    ))
}

/// Contour's status of both of its kinds: `currentStatus`/`description`
/// (the printer columns read them), `conditions` (Contour's
/// `DetailedCondition`s with `errors`/`warnings`), and for HTTPProxy
/// `loadBalancer`. Typed where a printer column reads it; the rest is kept
/// as written (the writer, not the apiserver, owns its shape).
fn contour_status() -> Value {
    let kept = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "currentStatus": {"type": "string"},
            "description": {"type": "string"},
            "conditions": {"type": "array", "items": kept},
            "loadBalancer": kept,
        },
    })
}

/// Contour's HTTPProxy (`projectcontour.io/v1`, short names `proxy`,
/// `proxies`, Contour's printer columns).
pub fn http_proxy() -> Result<CustomResourceDefinition, CrdError> {
    crd::<HttpProxySpec>(Definition {
        group: crate::httpproxy::GROUP,
        version: crate::httpproxy::VERSION,
        kind: "HTTPProxy",
        plural: "httpproxies",
        short: &["proxy", "proxies"],
        categories: &[],
        columns: &[
            ("FQDN", ".spec.virtualhost.fqdn", "Fully qualified domain name"),
            (
                "TLS Secret",
                ".spec.virtualhost.tls.secretName",
                "Secret with TLS credentials",
            ),
            (
                "Status",
                ".status.currentStatus",
                "The current status of the HTTPProxy",
            ),
            (
                "Status Description",
                ".status.description",
                "Description of the current status",
            ),
        ],
        status: contour_status(),
    })
}

/// Contour's TLSCertificateDelegation (`projectcontour.io/v1`, short name
/// `tlscerts`).
pub fn tls_certificate_delegation() -> Result<CustomResourceDefinition, CrdError> {
    crd::<TlsCertificateDelegationSpec>(Definition {
        group: crate::httpproxy::GROUP,
        version: crate::httpproxy::VERSION,
        kind: "TLSCertificateDelegation",
        plural: "tlscertificatedelegations",
        short: &["tlscerts"],
        categories: &[],
        columns: &[],
        status: contour_status(),
    })
}

/// The YAML of one CRD as checked in.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let body = serde_saphyr::to_string(crd).unwrap_or_default();
    format!(
        "# Generated from the Rust types of crates/api/src by crates/api/src/crd.rs; do not edit.\n# Regenerate: PORTCULLIS_UPDATE_CRDS=1 cargo test -p api --test crds\n{body}"
    )
}

fn crd<Spec: schemars::JsonSchema>(def: Definition) -> Result<CustomResourceDefinition, CrdError> {
    let kind = def.kind;
    let settings = schemars::generate::SchemaSettings::openapi3().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut spec = settings
        .into_generator()
        .into_root_schema_for::<Spec>()
        .to_value();
    structural(&mut spec);
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": def.status,
        },
    });
    let schema: JSONSchemaProps =
        serde_json::from_value(schema).map_err(|source| CrdError { kind, source })?;
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let columns = def
        .columns
        .iter()
        .map(|(name, path, description)| CustomResourceColumnDefinition {
            name: name.to_string(),
            json_path: path.to_string(),
            description: Some(description.to_string()),
            type_: "string".into(),
            ..Default::default()
        })
        .collect::<Vec<_>>();
    Ok(CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", def.plural, def.group)),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: def.group.into(),
            names: CustomResourceDefinitionNames {
                kind: kind.into(),
                list_kind: Some(format!("{kind}List")),
                plural: def.plural.into(),
                singular: Some(kind.to_ascii_lowercase()),
                short_names: Some(strings(def.short)),
                categories: (!def.categories.is_empty()).then(|| strings(def.categories)),
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: def.version.into(),
                served: true,
                storage: true,
                additional_printer_columns: (!columns.is_empty()).then_some(columns),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(json!({}))),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    })
}

/// Turns schemars' output into a structural schema the apiserver takes:
/// no `$schema`/`title`/`default` (the apiserver would *inject* defaults
/// into stored objects; the loader applies them instead), no
/// `additionalProperties: false` beside `properties` (not structural;
/// unknown fields are kept instead, see the module doc).
fn structural(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in ["$schema", "title", "default", "examples"] {
                map.remove(key);
            }
            if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            if map.contains_key("properties") {
                map.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
            }
            for (key, v) in map.iter_mut() {
                // Property names are data, not keywords.
                if key == "properties" {
                    if let Value::Object(props) = v {
                        props.values_mut().for_each(structural);
                    }
                } else {
                    structural(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(structural),
        _ => {}
    }
}
