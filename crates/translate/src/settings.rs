//! Knobs of one translation.

/// Settings that change what the translator produces.
#[derive(Clone, Debug)]
pub struct Settings {
    /// GatewayClasses whose `spec.controllerName` equals this are ours.
    pub controller_name: String,
    /// Address Envoy listeners bind to.
    pub listener_address: String,
    /// Address reported in Gateway `status.addresses`.
    pub status_address: String,
    /// RFC 3339 time stamped on conditions as `lastTransitionTime`.
    pub transition_time: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            controller_name: "portcullis.dev/gateway-controller".into(),
            listener_address: "0.0.0.0".into(),
            status_address: "127.0.0.1".into(),
            transition_time: "1970-01-01T00:00:00Z".into(),
        }
    }
}
