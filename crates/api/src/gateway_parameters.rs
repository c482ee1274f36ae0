//! `GatewayParameters` (`gateway.portcullis.dev/v1alpha1`, namespaced):
//! how the Envoy of every Gateway of a GatewayClass is provisioned in
//! Kubernetes mode (replicas, resources, Service type, annotations, image).
//! A GatewayClass names one in `spec.parametersRef` (with its namespace);
//! the translator accepts the class only when the reference resolves to a
//! GatewayParameters that reads and passes [`GatewayParametersSpec::problems`]
//! (else `Accepted=False`, reason `InvalidParameters`), and the
//! provisioner (`kube_provider::provision`) applies only accepted ones.
//!
//! As for the policy kinds, a GatewayParameters whose spec does not parse
//! (an unknown field included: the CRD keeps them, see [`crate::crd`]) is
//! loaded with its identity and `load_errors`, so the class says why
//! instead of "not found".

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

pub const KIND: &str = "GatewayParameters";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayParameters {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GatewayParametersSpec,
    /// `field: reason` for every part of the spec that could not be read;
    /// non-empty makes the parameters invalid.
    #[serde(skip)]
    pub load_errors: Vec<String>,
}

/// Every field is optional; an absent one keeps the provisioner's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayParametersSpec {
    /// Envoy replicas per Gateway (default 1; 0 is allowed: scaled down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Envoy container image (default: the official image of the Envoy
    /// version portcullis pins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Requests and limits of the Envoy container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Type of each Gateway's Service (default `LoadBalancer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceType>,
    /// Annotations of each Gateway's Service (e.g. a cloud load balancer's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    /// Annotations of the Envoy pods (e.g. Prometheus scraping).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
}

/// Container requests and limits, as Kubernetes quantities (`100m`, `128Mi`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    #[default]
    LoadBalancer,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

impl GatewayParametersSpec {
    /// `field: reason` for every value the apiserver would refuse in the
    /// objects built from it (so the class reports them, instead of the
    /// provisioner failing to apply): a negative replica count, an empty
    /// image, a quantity that does not parse, an annotation key that is
    /// not a qualified name.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(r) = self.replicas
            && r < 0
        {
            out.push(format!("spec.replicas: {r} is negative"));
        }
        if let Some(image) = &self.image
            && (image.trim().is_empty() || image.chars().any(char::is_whitespace))
        {
            out.push(format!("spec.image: {image:?} is not an image reference"));
        }
        if let Some(res) = &self.resources {
            for (field, map) in [("requests", &res.requests), ("limits", &res.limits)] {
                for (name, quantity) in map {
                    if !is_qualified_name(name) {
                        out.push(format!("spec.resources.{field}: {name:?} is not a resource name"));
                    }
                    if !is_quantity(quantity) {
                        out.push(format!(
                            "spec.resources.{field}.{name}: {quantity:?} is not a Kubernetes quantity"
                        ));
                    }
                }
            }
        }
        for (field, map) in [
            ("serviceAnnotations", &self.service_annotations),
            ("podAnnotations", &self.pod_annotations),
        ] {
            for key in map.keys() {
                if !is_qualified_name(key) {
                    out.push(format!(
                        "spec.{field}: {key:?} is not a valid annotation key (a qualified name, optionally prefixed with a DNS subdomain and '/')"
                    ));
                }
            }
        }
        out
    }
}

/// Why a GatewayClass's `spec.parametersRef` cannot be used (the class is
/// then `Accepted=False`, reason `InvalidParameters`, with this message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParametersError {
    #[error(
        "spec.parametersRef: {group}/{kind} is not supported: portcullis reads only {}/{KIND}",
        crate::policy::GROUP
    )]
    UnsupportedKind { group: String, kind: String },
    #[error("spec.parametersRef.namespace: required ({KIND} is namespaced)")]
    NoNamespace,
    #[error("spec.parametersRef: {KIND} {namespace}/{name} does not exist")]
    NotFound { namespace: String, name: String },
    #[error("spec.parametersRef: {KIND} {namespace}/{name} is invalid: {}", problems.join("; "))]
    Invalid {
        namespace: String,
        name: String,
        problems: Vec<String>,
    },
}

/// The parameters a GatewayClass names: `Ok(None)` without a
/// `parametersRef` (the defaults), `Ok(Some)` for one that resolves and is
/// valid, else why not. The translator (class status) and the provisioner
/// (what it applies) both decide through this.
pub fn resolve<'a>(
    class: &gateway_api::experimental::gatewayclasses::GatewayClass,
    parameters: &'a [crate::Sourced<GatewayParameters>],
) -> Result<Option<&'a GatewayParameters>, ParametersError> {
    let Some(r) = &class.spec.parameters_ref else {
        return Ok(None);
    };
    if r.group != crate::policy::GROUP || r.kind != KIND {
        return Err(ParametersError::UnsupportedKind {
            group: r.group.clone(),
            kind: r.kind.clone(),
        });
    }
    let Some(namespace) = r.namespace.as_deref().filter(|n| !n.is_empty()) else {
        return Err(ParametersError::NoNamespace);
    };
    let found = parameters.iter().map(|p| &p.object).find(|p| {
        p.metadata.namespace.as_deref() == Some(namespace) && p.metadata.name.as_deref() == Some(&r.name)
    });
    let Some(p) = found else {
        return Err(ParametersError::NotFound {
            namespace: namespace.into(),
            name: r.name.clone(),
        });
    };
    let mut problems = p.load_errors.clone();
    problems.extend(p.spec.problems());
    if !problems.is_empty() {
        return Err(ParametersError::Invalid {
            namespace: namespace.into(),
            name: r.name.clone(),
            problems,
        });
    }
    Ok(Some(p))
}

/// A Kubernetes quantity: `<sign?><number><suffix?>`, the suffix binary
/// (`Ki`..`Ei`), decimal SI (`n u m k M G T P E`, empty) or an exponent
/// (`e3`, `E-2`).
fn is_quantity(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || number.matches('.').count() > 1 {
        return false;
    }
    const SUFFIXES: [&str; 16] = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    let Some(exp) = suffix.strip_prefix(['e', 'E']) else {
        return false;
    };
    let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    !exp.is_empty() && exp.chars().all(|c| c.is_ascii_digit())
}

/// `[prefix/]name`: prefix a DNS subdomain (≤ 253), name ≤ 63 of
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in ["1", "100m", "0.5", "128Mi", "1Gi", "1e3", "2E-2", "+1", "1.5k"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "m", "1.2.3", "12MB", "1e", "abc", "1 Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn problems_name_the_field() {
        let spec = GatewayParametersSpec {
            replicas: Some(-1),
            image: Some(" ".into()),
            resources: Some(Resources {
                requests: [("cpu".to_string(), "lots".to_string())].into(),
                limits: BTreeMap::new(),
            }),
            pod_annotations: [("bad key".to_string(), String::new())].into(),
            ..Default::default()
        };
        let p = spec.problems();
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(p[0].starts_with("spec.replicas"));
        assert!(p[1].starts_with("spec.image"));
        assert!(p[2].starts_with("spec.resources.requests.cpu"));
        assert!(p[3].starts_with("spec.podAnnotations"));
        let good = GatewayParametersSpec {
            replicas: Some(2),
            image: Some("envoyproxy/envoy:v1.40.0".into()),
            pod_annotations: [("prometheus.io/scrape".to_string(), "true".to_string())].into(),
            ..Default::default()
        };
        assert!(good.problems().is_empty());
    }
}
