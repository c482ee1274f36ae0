//! Resource type URLs and the order they are pushed in.

pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// Make-before-break: what a resource refers to is sent before it.
pub const PUSH_ORDER: [&str; 5] = [CLUSTER, ENDPOINT, SECRET, LISTENER, ROUTE];

/// Types whose requests name resources (the others are wildcard).
pub fn is_named(type_url: &str) -> bool {
    matches!(type_url, ENDPOINT | ROUTE | SECRET)
}

pub fn short(type_url: &str) -> &str {
    match type_url {
        CLUSTER => "CDS",
        ENDPOINT => "EDS",
        SECRET => "SDS",
        LISTENER => "LDS",
        ROUTE => "RDS",
        other => other,
    }
}
