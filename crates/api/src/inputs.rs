//! The input snapshot: every object a provider has loaded, by kind.

use gateway_api::experimental::{
    gatewayclasses::GatewayClass, gateways::Gateway, grpcroutes::GrpcRoute, httproutes::HttpRoute,
    referencegrants::ReferenceGrant,
};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::Source;
use crate::policy::{GatewayExtension, TrafficPolicy};

/// An object together with where it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced<T> {
    pub source: Source,
    pub object: T,
}

/// Everything one load produced. Namespaced objects always have
/// `metadata.namespace` set (the loader defaults it to `default`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    pub gateway_classes: Vec<Sourced<GatewayClass>>,
    pub gateways: Vec<Sourced<Gateway>>,
    pub http_routes: Vec<Sourced<HttpRoute>>,
    pub grpc_routes: Vec<Sourced<GrpcRoute>>,
    pub reference_grants: Vec<Sourced<ReferenceGrant>>,
    pub namespaces: Vec<Sourced<Namespace>>,
    pub services: Vec<Sourced<Service>>,
    pub endpoint_slices: Vec<Sourced<EndpointSlice>>,
    pub secrets: Vec<Sourced<Secret>>,
    pub traffic_policies: Vec<Sourced<TrafficPolicy>>,
    pub gateway_extensions: Vec<Sourced<GatewayExtension>>,
}

impl Inputs {
    /// The number of objects of all kinds.
    pub fn len(&self) -> usize {
        self.gateway_classes.len()
            + self.gateways.len()
            + self.http_routes.len()
            + self.grpc_routes.len()
            + self.reference_grants.len()
            + self.namespaces.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
            + self.traffic_policies.len()
            + self.gateway_extensions.len()
    }

    /// Whether no object was loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends every object of `other` (used to merge per-file loads).
    pub fn extend(&mut self, other: Inputs) {
        self.gateway_classes.extend(other.gateway_classes);
        self.gateways.extend(other.gateways);
        self.http_routes.extend(other.http_routes);
        self.grpc_routes.extend(other.grpc_routes);
        self.reference_grants.extend(other.reference_grants);
        self.namespaces.extend(other.namespaces);
        self.services.extend(other.services);
        self.endpoint_slices.extend(other.endpoint_slices);
        self.secrets.extend(other.secrets);
        self.traffic_policies.extend(other.traffic_policies);
        self.gateway_extensions.extend(other.gateway_extensions);
    }
}
