//! Extension resources as the translator uses them: objects of the kinds
//! the configuration registers ([`Registration`]), looked up by
//! `extensionRef` (in the route's namespace) and, for `policyResources`,
//! by what their `targetRefs` name.
//!
//! Each object is one [`ExtensionResource`] whose bytes are shared (`Arc`)
//! by every call that passes it: a resource used by 1,000 routes is held
//! once.

use std::collections::{BTreeMap, HashMap};

use api::{Diagnostic, Inputs};

use super::{ExtensionResource, Hook, Registration};

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The registration and the extension resources of one translation.
#[derive(Debug, Default)]
pub struct Extensions {
    pub registration: Registration,
    /// (group, kind, namespace, name) → the resource (`resources` and
    /// `backendResources` kinds).
    by_name: HashMap<(String, String, String, String), ExtensionResource>,
    /// Policies targeting a route: (route kind, namespace, name) →
    /// [(sectionName, policy)].
    route_policies: BTreeMap<(String, String, String), Vec<Targeted>>,
    /// Policies targeting a Gateway: (namespace, name) → [(sectionName,
    /// policy)]; `None` = the whole Gateway.
    gateway_policies: BTreeMap<(String, String), Vec<Targeted>>,
}

/// A policy with the `sectionName` it targets (`None`: the whole object).
type Targeted = (Option<String>, ExtensionResource);

/// What an `extensionRef` names.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// Not a registered kind: today's 500 (unknown extension kind).
    NotRegistered,
    /// A registered kind, but no such object in the route's namespace.
    Missing,
    Found(ExtensionResource),
}

/// One `targetRefs` entry of a policy.
struct Target {
    group: String,
    kind: String,
    name: String,
    section: Option<String>,
}

impl Extensions {
    /// Indexes `inputs.extension_resources` by the registration. Problems
    /// (a policy without usable `targetRefs`) come back as diagnostics.
    pub fn new(inputs: &Inputs, registration: Registration) -> (Self, Vec<Diagnostic>) {
        let mut out = Self {
            registration,
            ..Default::default()
        };
        let mut diagnostics = Vec::new();
        for r in &inputs.extension_resources {
            let o = &r.object;
            let gk = super::GroupKind {
                group: o.group().to_string(),
                kind: o.kind.clone(),
            };
            let resource = ExtensionResource {
                unstructured_bytes: o.json.clone(),
            };
            if out.registration.resources.contains(&gk) || out.registration.backend_resources.contains(&gk) {
                out.by_name.insert(
                    (
                        gk.group.clone(),
                        gk.kind.clone(),
                        o.namespace.clone(),
                        o.name.clone(),
                    ),
                    resource.clone(),
                );
            }
            if !out.registration.policy_resources.contains(&gk) {
                continue;
            }
            let label = format!("{} {}/{}", o.kind, o.namespace, o.name);
            match targets(&o.json) {
                Ok(ts) => {
                    for t in ts {
                        if t.group != GATEWAY_GROUP {
                            diagnostics.push(Diagnostic::warning(
                                Some(label.clone()),
                                Some(&r.source),
                                format!(
                                    "spec.targetRefs: group {:?} is not {GATEWAY_GROUP}; this target is ignored",
                                    t.group
                                ),
                            ));
                            continue;
                        }
                        // Policy attachment is local: a policy targets
                        // objects of its own namespace.
                        match t.kind.as_str() {
                            "Gateway" => out
                                .gateway_policies
                                .entry((o.namespace.clone(), t.name))
                                .or_default()
                                .push((t.section, resource.clone())),
                            "HTTPRoute" | "GRPCRoute" => out
                                .route_policies
                                .entry((t.kind, o.namespace.clone(), t.name))
                                .or_default()
                                .push((t.section, resource.clone())),
                            other => diagnostics.push(Diagnostic::warning(
                                Some(label.clone()),
                                Some(&r.source),
                                format!(
                                    "spec.targetRefs: kind {other:?} cannot be targeted by an extension policy (Gateway, HTTPRoute, GRPCRoute); this target is ignored"
                                ),
                            )),
                        }
                    }
                }
                Err(message) => diagnostics.push(Diagnostic::error(
                    Some(label),
                    Some(&r.source),
                    format!("{message}; the policy is not passed to the extension"),
                )),
            }
        }
        (out, diagnostics)
    }

    /// Whether `hook` is in `hooks.xdsTranslator.post`.
    pub fn runs(&self, hook: Hook) -> bool {
        self.registration.hooks.contains(&hook)
    }

    /// What an `extensionRef` of a route in `namespace` resolves to.
    pub fn resolve(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Lookup {
        let gk = super::GroupKind {
            group: group.to_string(),
            kind: kind.to_string(),
        };
        if !self.registration.resources.contains(&gk) {
            return Lookup::NotRegistered;
        }
        match self
            .by_name
            .get(&(gk.group, gk.kind, namespace.to_string(), name.to_string()))
        {
            Some(r) => Lookup::Found(r.clone()),
            None => Lookup::Missing,
        }
    }

    /// A `backendResources` object, by the backendRef's group, kind,
    /// namespace and name.
    pub fn backend(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<ExtensionResource> {
        let gk = super::GroupKind {
            group: group.to_string(),
            kind: kind.to_string(),
        };
        if !self.registration.backend_resources.contains(&gk) {
            return None;
        }
        self.by_name
            .get(&(gk.group, gk.kind, namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The policies targeting a route's rule (`sectionName` = the rule's
    /// name) or the whole route.
    pub fn route_policies(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        rule: Option<&str>,
    ) -> Vec<ExtensionResource> {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        self.route_policies
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|(section, _)| section.is_none() || section.as_deref() == rule)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The policies targeting a Gateway as a whole or one of `listeners`
    /// (by `sectionName`).
    pub fn gateway_policies(
        &self,
        namespace: &str,
        name: &str,
        listeners: &[&str],
    ) -> Vec<ExtensionResource> {
        let mut out: Vec<ExtensionResource> = Vec::new();
        let key = (namespace.to_string(), name.to_string());
        for (section, r) in self.gateway_policies.get(&key).into_iter().flatten() {
            let applies = match section {
                None => true,
                Some(s) => listeners.contains(&s.as_str()),
            };
            if applies && !out.contains(r) {
                out.push(r.clone());
            }
        }
        out
    }
}

/// What the loader must accept for `registration`: every registered kind
/// (`resources`, `policyResources`, `backendResources`) is loaded as an
/// extension object instead of being reported as an unknown kind. The edge
/// (`serve`, `translate --config`) passes it to `api::loader::*_with`.
pub fn loader_options(registration: &Registration) -> api::loader::Options {
    api::loader::Options {
        extension_kinds: registration
            .resources
            .iter()
            .chain(&registration.policy_resources)
            .chain(&registration.backend_resources)
            .map(|gk| (gk.group.clone(), gk.kind.clone()))
            .collect(),
        extension_versions: registration
            .versions
            .iter()
            .map(|(gk, v)| ((gk.group.clone(), gk.kind.clone()), v.clone()))
            .collect(),
    }
}

/// Why a policy resource's targets cannot be read (an error diagnostic on
/// the resource: it is not passed to the extension).
#[derive(Debug, thiserror::Error)]
enum TargetsError {
    #[error("cannot be read as JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("spec.targetRefs: expected a list")]
    NotAList,
    #[error("spec.targetRefs: missing required field")]
    Missing,
    #[error("spec.targetRefs[{index}]: kind and name are required")]
    KindAndName { index: usize },
}

/// `spec.targetRefs` (or the older singular `spec.targetRef`).
fn targets(json: &[u8]) -> Result<Vec<Target>, TargetsError> {
    let value: serde_json::Value = serde_json::from_slice(json).map_err(TargetsError::Json)?;
    let spec = value.get("spec");
    let refs: Vec<&serde_json::Value> = match (
        spec.and_then(|s| s.get("targetRefs")),
        spec.and_then(|s| s.get("targetRef")),
    ) {
        (Some(serde_json::Value::Array(a)), _) => a.iter().collect(),
        (None, Some(one)) => vec![one],
        (Some(_), _) => return Err(TargetsError::NotAList),
        (None, None) => return Err(TargetsError::Missing),
    };
    refs.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let field = |f: &str| r.get(f).and_then(serde_json::Value::as_str).map(str::to_string);
            let (Some(kind), Some(name)) = (field("kind"), field("name")) else {
                return Err(TargetsError::KindAndName { index: i });
            };
            Ok(Target {
                group: field("group").unwrap_or_else(|| GATEWAY_GROUP.to_string()),
                kind,
                name,
                section: field("sectionName"),
            })
        })
        .collect()
}

#[cfg(test)]
mod targets_tests {
    use super::*;

    #[test]
    fn target_errors_name_the_variant_and_the_field() {
        let err = targets(br#"{"spec":{}}"#).err();
        assert!(matches!(err, Some(TargetsError::Missing)), "{err:?}");
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("spec.targetRefs: missing required field")
        );
        let err = targets(br#"{"spec":{"targetRefs":[{"kind":"Gateway"}]}}"#).err();
        assert!(
            matches!(err, Some(TargetsError::KindAndName { index: 0 })),
            "{err:?}"
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("spec.targetRefs[0]: kind and name are required")
        );
        let err = targets(b"{").err();
        assert!(matches!(err, Some(TargetsError::Json(_))), "{err:?}");
        assert!(err.is_some_and(|e| e.to_string().starts_with("cannot be read as JSON: ")),);
    }
}
