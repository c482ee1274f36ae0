//! GatewayExtension (type ExtAuth) → an ext_authz HTTP filter per
//! extension, and a TrafficPolicy's `extAuth` → that filter switched on for
//! its routes.
//!
//! Every ext_authz filter is in the HCM chain with `disabled: true`; a
//! route turns on the ones it uses with an empty `FilterConfig` (as Envoy
//! Gateway does), so one listener can serve routes protected by different
//! auth servers and routes without any. An extension that cannot be used
//! (missing, invalid, its Service missing) makes its routes answer 500:
//! authentication that cannot happen must never let requests through.

use std::collections::BTreeMap;

use api::Sourced;
use api::policy::{ExtAuthPolicy, GatewayExtension};
use envoy_types::pb::envoy::config::core::v3::{GrpcService, HttpUri, grpc_service, http_uri};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{ExtAuthz, HttpService, ext_authz};
use envoy_types::pb::envoy::r#type::matcher::v3::{ListStringMatcher, StringMatcher, string_matcher};

use super::PolicyError;
use super::timeouts::{parse_duration, pb};
use crate::backend::{self, ClusterSpec};
use crate::error::ErrorClass;
use crate::index::Index;

pub const KIND: &str = "GatewayExtension";

/// One GatewayExtension, compiled.
#[derive(Clone, Debug)]
pub struct Provider {
    pub namespace: String,
    pub name: String,
    pub filter_name: String,
    pub generation: i64,
    pub source: api::Source,
    /// The filter config and the cluster of its auth server, or why the
    /// extension cannot be used.
    pub built: Result<(ExtAuthz, ClusterSpec), PolicyError>,
    /// `built` failed because the loader could not read the spec; the
    /// loader has reported that at its field's `file:line`.
    pub loader_reported: bool,
}

/// What a policy's `extAuth` does to a route.
#[derive(Clone, Debug, PartialEq)]
pub enum Use {
    /// Switch on this ext_authz filter.
    Enable { filter_name: String },
    /// Explicitly off (overrides a less specific policy).
    Disable,
    /// Cannot be honoured: the route answers 500.
    Unavailable { message: String, class: ErrorClass },
}

pub fn filter_name(namespace: &str, name: &str) -> String {
    format!(
        "{}{}",
        super::EXT_AUTHZ_FILTER_PREFIX,
        crate::naming::compose(&[namespace, name])
    )
}

/// Compiles every GatewayExtension, keyed by (namespace, name).
pub fn compile_all(
    index: &Index<'_>,
    extensions: &[Sourced<GatewayExtension>],
) -> BTreeMap<(String, String), Provider> {
    extensions
        .iter()
        .map(|e| {
            let namespace = e
                .object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let name = e.object.metadata.name.clone().unwrap_or_default();
            let built = build(index, &e.object, &namespace);
            let p = Provider {
                filter_name: filter_name(&namespace, &name),
                generation: e.object.metadata.generation.unwrap_or(1),
                source: e.source.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
                built,
                loader_reported: !e.object.load_errors.is_empty(),
            };
            ((namespace, name), p)
        })
        .collect()
}

fn build(
    index: &Index<'_>,
    e: &GatewayExtension,
    namespace: &str,
) -> Result<(ExtAuthz, ClusterSpec), PolicyError> {
    if let Some(err) = e.load_errors.first() {
        return Err(super::load_error(err));
    }
    let a = e
        .spec
        .ext_auth
        .as_ref()
        .ok_or_else(|| PolicyError::structural("spec.extAuth", "required for type ExtAuth"))?;
    let (svc, grpc, field) = match (&a.grpc_service, &a.http_service) {
        (Some(g), None) => (g, true, "spec.extAuth.grpcService"),
        (None, Some(h)) => (h, false, "spec.extAuth.httpService"),
        _ => {
            return Err(PolicyError::structural(
                "spec.extAuth",
                "exactly one of grpcService and httpService is required",
            ));
        }
    };
    let r = &svc.backend_ref;
    let ns = r.namespace.as_deref().unwrap_or(namespace);
    if ns != namespace {
        return Err(PolicyError::semantic(
            format!("{field}.backendRef.namespace"),
            "the auth Service must be in the GatewayExtension's namespace",
        ));
    }
    if !(1..=65535).contains(&r.port) {
        return Err(PolicyError::structural(
            format!("{field}.backendRef.port"),
            "must be 1-65535",
        ));
    }
    let mut clusters = BTreeMap::new();
    let cluster = backend::service_cluster(index, ns, &r.name, r.port, grpc, &mut clusters)
        .map_err(|e| PolicyError::referential(format!("{field}.backendRef"), e.to_string()))?;
    let spec = clusters
        .remove(&cluster)
        .expect("service_cluster registers what it returns");
    let timeout = match &a.timeout {
        Some(t) => parse_duration(t, "spec.extAuth.timeout")?,
        None => std::time::Duration::from_millis(200),
    };
    if timeout.is_zero() {
        return Err(PolicyError::structural(
            "spec.extAuth.timeout",
            "must be greater than zero",
        ));
    }
    let services = if grpc {
        if svc.path_prefix.is_some() {
            return Err(PolicyError::structural(
                format!("{field}.pathPrefix"),
                "only applies to httpService",
            ));
        }
        ext_authz::Services::GrpcService(GrpcService {
            timeout: Some(pb(timeout)),
            target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                grpc_service::EnvoyGrpc {
                    cluster_name: cluster.clone(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        })
    } else {
        let prefix = svc.path_prefix.clone().unwrap_or_default();
        if !prefix.is_empty() && (!prefix.starts_with('/') || prefix.contains(['?', '#', ' '])) {
            return Err(PolicyError::structural(
                format!("{field}.pathPrefix"),
                "must be a path starting with '/'",
            ));
        }
        for (i, h) in a.allowed_headers.iter().enumerate() {
            if !crate::route::filters::is_header_name(h) {
                return Err(PolicyError::structural(
                    format!("spec.extAuth.allowedHeaders[{i}]"),
                    format!("{h:?} is not a valid header name"),
                ));
            }
        }
        ext_authz::Services::HttpService(HttpService {
            server_uri: Some(HttpUri {
                uri: format!("http://{}.{ns}:{}", r.name, r.port),
                timeout: Some(pb(timeout)),
                http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster.clone())),
            }),
            path_prefix: prefix,
            ..Default::default()
        })
    };
    let config = ExtAuthz {
        services: Some(services),
        transport_api_version: envoy_types::pb::envoy::config::core::v3::ApiVersion::V3 as i32,
        failure_mode_allow: a.fail_open.unwrap_or(false),
        allowed_headers: (!grpc && !a.allowed_headers.is_empty()).then(|| ListStringMatcher {
            patterns: a
                .allowed_headers
                .iter()
                .map(|h| StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(h.to_ascii_lowercase())),
                    ignore_case: true,
                })
                .collect(),
        }),
        stat_prefix: format!("{namespace}_{}", e.metadata.name.as_deref().unwrap_or_default()),
        ..Default::default()
    };
    Ok((config, spec))
}

/// A policy's `extAuth`: what it does to its routes, plus a warning for the
/// policy when the extension cannot be used (recoverable: it may appear).
pub fn resolve(
    e: &ExtAuthPolicy,
    field: &str,
    namespace: &str,
    providers: &BTreeMap<(String, String), Provider>,
) -> Result<(Use, Option<PolicyError>), PolicyError> {
    match (&e.extension_ref, e.disable) {
        (Some(_), Some(true)) => Err(PolicyError::semantic(
            field,
            "extensionRef and disable: true contradict each other",
        )),
        (None, Some(true)) => Ok((Use::Disable, None)),
        (None, _) => Err(PolicyError::structural(
            format!("{field}.extensionRef"),
            "required unless disable is true",
        )),
        (Some(r), _) => {
            let rf = format!("{field}.extensionRef");
            match providers.get(&(namespace.to_string(), r.name.clone())) {
                None => {
                    let message = format!("{KIND} {namespace}/{} not found", r.name);
                    Ok((
                        Use::Unavailable {
                            message: message.clone(),
                            class: ErrorClass::Referential,
                        },
                        Some(PolicyError::referential(
                            rf,
                            format!("{message}; its targets answer 500 until it exists"),
                        )),
                    ))
                }
                Some(p) => match &p.built {
                    Ok(_) => Ok((
                        Use::Enable {
                            filter_name: p.filter_name.clone(),
                        },
                        None,
                    )),
                    Err(err) => {
                        let message = format!("{KIND} {namespace}/{} cannot be used: {err}", r.name);
                        Ok((
                            Use::Unavailable {
                                message: message.clone(),
                                class: err.class,
                            },
                            Some(PolicyError {
                                field: rf,
                                message: format!("{message}; its targets answer 500"),
                                class: err.class,
                            }),
                        ))
                    }
                },
            }
        }
    }
}

/// The ext_authz filters the Gateway's chains switch on, with their
/// auth-server clusters.
pub fn install(ir: &mut crate::ir::Gateway, providers: &BTreeMap<(String, String), Provider>) {
    let used: std::collections::BTreeSet<String> = ir
        .ports
        .values()
        .flat_map(|p| &p.chains)
        .flat_map(|c| &c.http_filters)
        .filter(|f| f.starts_with(super::EXT_AUTHZ_FILTER_PREFIX))
        .cloned()
        .collect();
    for p in providers.values() {
        if let (true, Ok((config, cluster))) = (used.contains(&p.filter_name), &p.built) {
            ir.ext_authz.insert(p.filter_name.clone(), config.clone());
            ir.clusters.insert(cluster.name.clone(), cluster.clone());
        }
    }
}
