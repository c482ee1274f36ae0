//! Backend references: Services resolved into clusters (a cluster names its
//! Service port; its endpoints are resolved at assembly, `endpoints.rs`),
//! cross-namespace references checked against ReferenceGrants.
//!
//! A backend that cannot be resolved keeps its share of traffic and answers
//! 500 (Gateway API: requests to an invalid backend get a 500), so it is
//! returned as [`Backend::Invalid`] rather than dropped.

use std::collections::BTreeMap;

use crate::index::Index;
use crate::reference_grant::{self, From, To};
use crate::route::model::{BackendRef, Route, RouteKind};
use crate::status::reason;

/// An Envoy cluster for one Service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    pub name: String,
    pub http2: bool,
    /// The Service port whose endpoints it serves (`None`: an extension
    /// backend's cluster, which the extension fills). Its endpoints are
    /// resolved when the Gateway is assembled ([`crate::endpoints`]), never
    /// held here: a route's works read no EndpointSlice, so an EndpointSlice
    /// edit rebuilds no route (ARCHITECTURE.md §7).
    pub service: Option<crate::endpoints::ServicePort>,
    /// For a backendRef to a `backendResources` kind: the extension
    /// resource. Such a cluster has no endpoints of its own; the
    /// extension's `PostClusterModify` (and `PostEndpointsModify`) make it
    /// (`extension::run::post_cluster`).
    pub extension: Vec<crate::extension::ExtensionResource>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Cluster {
        name: String,
        weight: u32,
    },
    Invalid {
        weight: u32,
        reason: &'static str,
        message: String,
    },
}

/// Resolves one backendRef, registering its cluster in `clusters`.
pub fn resolve(
    index: &Index<'_>,
    route: &Route<'_>,
    b: &BackendRef<'_>,
    field: impl Fn() -> String,
    clusters: &mut BTreeMap<String, ClusterSpec>,
) -> Backend {
    let weight = u32::try_from(b.weight.max(0)).unwrap_or(0);
    let invalid = |reason: &'static str, message: String| Backend::Invalid {
        weight,
        reason,
        message: format!("{}: {message}", field()),
    };
    if let Some(x) = index.extensions.as_ref()
        && x.registration
            .backend_resources
            .contains(&crate::extension::GroupKind {
                group: b.group.to_string(),
                kind: b.kind.to_string(),
            })
    {
        return match extension_cluster(index, x, route, b, clusters) {
            Ok(name) => Backend::Cluster { name, weight },
            Err(e) => invalid(e.reason(), e.to_string()),
        };
    }
    if !(b.group.is_empty() || b.group == "core") || b.kind != "Service" {
        return invalid(
            reason::INVALID_KIND,
            format!("backend kind {}/{} is not supported", b.group, b.kind),
        );
    }
    let ns = b.namespace.unwrap_or(route.namespace);
    let from = From {
        group: "gateway.networking.k8s.io",
        kind: route.kind.kind(),
        namespace: route.namespace,
    };
    let to = To {
        group: "",
        kind: "Service",
        namespace: ns,
        name: b.name,
    };
    if !reference_grant::permitted(index, &from, &to) {
        return invalid(
            reason::REF_NOT_PERMITTED,
            format!(
                "Service {ns}/{} is in another namespace and no ReferenceGrant allows it",
                b.name
            ),
        );
    }
    let Some(port) = b.port else {
        return invalid(
            reason::BACKEND_NOT_FOUND,
            format!("Service {ns}/{}: port is required", b.name),
        );
    };
    match service_cluster(index, ns, b.name, port, route.kind == RouteKind::Grpc, clusters) {
        Ok(name) => Backend::Cluster { name, weight },
        Err(e) => invalid(reason::BACKEND_NOT_FOUND, e.to_string()),
    }
}

/// Why a backendRef to an extension backend cannot be used; `what` is
/// `group/kind ns/name`, [`reason`](ExtensionBackendError::reason) the
/// route's `ResolvedRefs=False` reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum ExtensionBackendError {
    #[error("{what} is in another namespace and no ReferenceGrant allows it")]
    NotPermitted { what: String },
    #[error("{what}: the extension's Cluster hook is not enabled (hooks.xdsTranslator.post)")]
    NoClusterHook { what: String },
    #[error("{what} not found")]
    NotFound { what: String },
}

impl ExtensionBackendError {
    fn reason(&self) -> &'static str {
        match self {
            ExtensionBackendError::NotPermitted { .. } => reason::REF_NOT_PERMITTED,
            ExtensionBackendError::NoClusterHook { .. } => reason::INVALID_KIND,
            ExtensionBackendError::NotFound { .. } => reason::BACKEND_NOT_FOUND,
        }
    }
}

/// The cluster for a backendRef to an extension backend (a `backendResources`
/// kind): named `extension/<namespace>/<group>/<kind>/<name>` (five
/// segments, so it never equals a Service's `ns/name/port[/h2c]`; every
/// part is a validated name), registered in `clusters` with the resource.
fn extension_cluster(
    index: &Index<'_>,
    x: &crate::extension::resources::Extensions,
    route: &Route<'_>,
    b: &BackendRef<'_>,
    clusters: &mut BTreeMap<String, ClusterSpec>,
) -> Result<String, ExtensionBackendError> {
    let ns = b.namespace.unwrap_or(route.namespace);
    let what = format!("{}/{} {ns}/{}", b.group, b.kind, b.name);
    let from = From {
        group: "gateway.networking.k8s.io",
        kind: route.kind.kind(),
        namespace: route.namespace,
    };
    let to = To {
        group: b.group,
        kind: b.kind,
        namespace: ns,
        name: b.name,
    };
    if !reference_grant::permitted(index, &from, &to) {
        return Err(ExtensionBackendError::NotPermitted { what });
    }
    // Nothing but the extension can make this cluster: without its Cluster
    // hook the cluster would have no endpoints, so the backend is invalid
    // (its share answers 500) rather than silently empty.
    if !x.runs(crate::extension::Hook::Cluster) {
        return Err(ExtensionBackendError::NoClusterHook { what });
    }
    let Some(resource) = x.backend(b.group, b.kind, ns, b.name) else {
        return Err(ExtensionBackendError::NotFound { what });
    };
    let name = format!("extension/{ns}/{}/{}/{}", b.group, b.kind, b.name);
    clusters.entry(name.clone()).or_insert_with(|| ClusterSpec {
        name: name.clone(),
        http2: route.kind == RouteKind::Grpc,
        service: None,
        extension: vec![resource],
    });
    Ok(name)
}

/// Why a Service cannot back a route (reason `BackendNotFound`, class
/// referential: it may appear later).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error("Service {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("Service {namespace}/{name} has no port {port}")]
    NoPort {
        namespace: String,
        name: String,
        port: i32,
    },
}

/// The cluster for port `port` of Service `ns/name` (HTTP/2 when `grpc` or
/// the port's appProtocol says so), registered in `clusters`; or why the
/// Service cannot be used.
pub fn service_cluster(
    index: &Index<'_>,
    ns: &str,
    name: &str,
    port: i32,
    grpc: bool,
    clusters: &mut BTreeMap<String, ClusterSpec>,
) -> Result<String, ServiceError> {
    let Some(svc) = index.service(ns, name) else {
        return Err(ServiceError::NotFound {
            namespace: ns.to_string(),
            name: name.to_string(),
        });
    };
    let spec = svc.spec.as_ref();
    let Some(svc_port) = spec
        .and_then(|s| s.ports.as_ref())
        .and_then(|ps| ps.iter().find(|p| p.port == port))
    else {
        return Err(ServiceError::NoPort {
            namespace: ns.to_string(),
            name: name.to_string(),
            port,
        });
    };
    let app_h2 = matches!(
        svc_port.app_protocol.as_deref(),
        Some("kubernetes.io/h2c" | "h2c" | "grpc")
    );
    let http2 = app_h2 || grpc;
    let cluster = crate::naming::cluster(ns, name, port, http2);
    if !clusters.contains_key(&cluster) {
        clusters.insert(
            cluster.clone(),
            ClusterSpec {
                name: cluster.clone(),
                http2,
                service: Some(crate::endpoints::ServicePort {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    port,
                }),
                extension: Vec::new(),
            },
        );
    }
    Ok(cluster)
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn backend_errors_carry_their_reason_and_text() {
        let what = || "example.com/Backend ns/b".to_string();
        let cases = [
            (
                ExtensionBackendError::NotPermitted { what: what() },
                reason::REF_NOT_PERMITTED,
                "example.com/Backend ns/b is in another namespace and no ReferenceGrant allows it",
            ),
            (
                ExtensionBackendError::NoClusterHook { what: what() },
                reason::INVALID_KIND,
                "example.com/Backend ns/b: the extension's Cluster hook is not enabled (hooks.xdsTranslator.post)",
            ),
            (
                ExtensionBackendError::NotFound { what: what() },
                reason::BACKEND_NOT_FOUND,
                "example.com/Backend ns/b not found",
            ),
        ];
        for (e, reason, text) in cases {
            assert_eq!(e.reason(), reason, "{e:?}");
            assert_eq!(e.to_string(), text);
        }
        assert_eq!(
            ServiceError::NoPort {
                namespace: "ns".into(),
                name: "s".into(),
                port: 81
            }
            .to_string(),
            "Service ns/s has no port 81"
        );
    }
}
