//! Which endpoints a cluster gets: the ready addresses of its Service
//! port's EndpointSlices that the endpoint guard allows.
//!
//! Resolved when a Gateway is assembled (`xds::build_memo`), not when a
//! route is built: a route's works name a cluster's Service port
//! ([`ServicePort`] in `backend::ClusterSpec`) and never hold its
//! endpoints, so an edit that changes only EndpointSlices reuses every
//! route and rebuilds only the ClusterLoadAssignments of the Services it
//! touched (`incremental/endpoints.rs`, ARCHITECTURE.md §7).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::backend::ClusterSpec;
use crate::index::Index;

/// One port of one Service: what a Service-backed cluster serves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePort {
    pub namespace: String,
    pub name: String,
    pub port: i32,
}

/// (address, port) pairs, sorted and deduplicated.
pub type Addresses = Arc<Vec<(String, u32)>>;

/// Resolves clusters' endpoints over one translation's index, each Service
/// port once (thousands of clusters share a few Services, and Gateways
/// are assembled on several threads).
pub struct Resolver<'i, 'a> {
    index: &'i Index<'a>,
    memo: Mutex<HashMap<ServicePort, Addresses>>,
}

impl<'i, 'a> Resolver<'i, 'a> {
    pub fn new(index: &'i Index<'a>) -> Self {
        Self {
            index,
            memo: Mutex::default(),
        }
    }

    /// The endpoints of `cluster`: none for an extension backend's (the
    /// extension makes them) or a Service port that no longer exists.
    pub fn of(&self, cluster: &ClusterSpec) -> Addresses {
        let Some(service) = &cluster.service else {
            return Addresses::default();
        };
        let memo = || self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = memo().get(service) {
            return Arc::clone(known);
        }
        let resolved = Arc::new(ready(self.index, service));
        memo().insert(service.clone(), Arc::clone(&resolved));
        resolved
    }
}

/// Ready endpoints of a Service port. EndpointSlice ports are matched by
/// the Service port's name, as kube-proxy does. Addresses the endpoint
/// guard refuses ([`crate::endpoint_guard`]) are left out.
fn ready(index: &Index<'_>, service: &ServicePort) -> Vec<(String, u32)> {
    let ServicePort {
        namespace,
        name,
        port,
    } = service;
    // Untracked: a Service edit rebuilds its assignments by its own rule
    // (`incremental/services.rs`).
    let Some(svc_port) = index
        .service_untracked(namespace, name)
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.as_ref())
        .and_then(|ps| ps.iter().find(|p| p.port == *port))
    else {
        return Vec::new();
    };
    let port_name = svc_port.name.as_deref();
    let fallback_port = match svc_port.target_port.as_ref() {
        Some(IntOrString::Int(p)) => *p,
        None => *port,
        Some(IntOrString::String(_)) => 0,
    };
    let mut out = Vec::new();
    for slice in index.slices_of(namespace, name) {
        let slice_port = slice
            .ports
            .as_ref()
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.name.as_deref().unwrap_or("") == port_name.unwrap_or(""))
            })
            .and_then(|p| p.port)
            .unwrap_or(fallback_port);
        let Ok(slice_port) = u32::try_from(slice_port) else {
            continue;
        };
        if slice_port == 0 || slice_port > 65535 {
            continue;
        }
        for ep in slice.endpoints.iter().flatten() {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for addr in &ep.addresses {
                let Ok(ip) = addr.parse::<std::net::IpAddr>() else {
                    continue;
                };
                // Refused addresses (the control plane, link-local, ...) are
                // left out; `endpoint_guard::diagnostics` reports them.
                let port = u16::try_from(slice_port).unwrap_or(0);
                if index.endpoint_guard.judge(ip, port).is_none() {
                    out.push((addr.clone(), slice_port));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
