//! Knobs of one translation.

use std::collections::BTreeMap;

/// Settings that change what the translator produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// GatewayClasses whose `spec.controllerName` equals this are ours.
    pub controller_name: String,
    /// Address Envoy listeners bind to.
    pub listener_address: String,
    /// Address reported in Gateway `status.addresses`.
    pub status_address: String,
    /// RFC 3339 time stamped on conditions as `lastTransitionTime`.
    pub transition_time: String,
    /// Per-Gateway (`namespace/name`) bind address, overriding
    /// `listener_address` and `status_address` (e.g. one loopback address
    /// per Gateway, so Gateways on one machine can share ports).
    pub gateway_addresses: BTreeMap<String, String>,
    /// Threads that build rules (`None`: one per core, at most 8). The
    /// output does not depend on it. Measured at 10,000 routes on 2 cores
    /// with jemalloc (the `portcullis` binary's allocator): two threads
    /// take ~0.7x the time for ~+6 MiB; with glibc malloc they gained ~10%
    /// and kept ~100 MiB more (per-thread arenas).
    pub parallelism: Option<usize>,
    /// Which endpoint addresses tenants' EndpointSlices may use (see
    /// [`crate::endpoint_guard`]). The default refuses unspecified,
    /// multicast, broadcast and link-local addresses and allows loopback;
    /// `serve` adds its own listeners as reserved.
    pub endpoint_guard: crate::endpoint_guard::EndpointGuard,
    /// HTTPProxy root namespaces and serving Gateway (see
    /// [`crate::httpproxy`]).
    pub http_proxy: crate::httpproxy::HttpProxySettings,
}

impl Settings {
    /// (bind address, reported address) of a Gateway.
    pub fn addresses_of(&self, gateway: &str) -> (&str, &str) {
        match self.gateway_addresses.get(gateway) {
            Some(a) => (a, a),
            None => (&self.listener_address, &self.status_address),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            controller_name: "portcullis.dev/gateway-controller".into(),
            listener_address: "0.0.0.0".into(),
            status_address: "127.0.0.1".into(),
            transition_time: "1970-01-01T00:00:00Z".into(),
            gateway_addresses: BTreeMap::new(),
            parallelism: None,
            endpoint_guard: Default::default(),
            http_proxy: Default::default(),
        }
    }
}
