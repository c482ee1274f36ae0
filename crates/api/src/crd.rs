//! CustomResourceDefinitions of portcullis's own kinds (TrafficPolicy,
//! GatewayExtension, GatewayParameters), generated from the Rust types in
//! [`crate::policy`] and [`crate::gateway_parameters`]
//! with `schemars`; the checked-in copies in `crds/portcullis/` are kept
//! equal to these by `crates/api/tests/crds.rs`.
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

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceStatus, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::policy::{GROUP, GatewayExtensionSpec, TrafficPolicySpec, VERSION};

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
    ])
}

pub fn traffic_policy() -> Result<CustomResourceDefinition, CrdError> {
    crd::<TrafficPolicySpec>("TrafficPolicy", "trafficpolicies", &["tp"])
}

pub fn gateway_extension() -> Result<CustomResourceDefinition, CrdError> {
    crd::<GatewayExtensionSpec>("GatewayExtension", "gatewayextensions", &["gwext"])
}

pub fn gateway_parameters() -> Result<CustomResourceDefinition, CrdError> {
    crd::<crate::gateway_parameters::GatewayParametersSpec>(
        "GatewayParameters",
        "gatewayparameters",
        &["gwparams"],
    )
}

/// The YAML of one CRD as checked in.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let body = serde_saphyr::to_string(crd).unwrap_or_default();
    format!(
        "# Generated from the Rust types of crates/api/src by crates/api/src/crd.rs; do not edit.\n# Regenerate: PORTCULLIS_UPDATE_CRDS=1 cargo test -p api --test crds\n{body}"
    )
}

fn crd<Spec: schemars::JsonSchema>(
    kind: &'static str,
    plural: &str,
    short: &[&str],
) -> Result<CustomResourceDefinition, CrdError> {
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
            // Written by the controller; its shape is the Gateway API's
            // policy status (ancestors), not checked here.
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    let schema: JSONSchemaProps =
        serde_json::from_value(schema).map_err(|source| CrdError { kind, source })?;
    Ok(CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: kind.into(),
                list_kind: Some(format!("{kind}List")),
                plural: plural.into(),
                singular: Some(kind.to_ascii_lowercase()),
                short_names: Some(short.iter().map(|s| s.to_string()).collect()),
                categories: Some(vec!["portcullis".into()]),
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: VERSION.into(),
                served: true,
                storage: true,
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
