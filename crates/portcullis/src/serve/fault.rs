//! Test-only fault injection, for the end-to-end tests that must see a NACK
//! (portcullis's own output never produces one):
//! `PORTCULLIS_TEST_FAULT_FILE=<path>`. While that file exists, the Cluster
//! it holds (proto-JSON) is added to every Gateway's snapshot; read at each
//! translation, so deleting it and changing any input clears the fault.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;

pub const ENV: &str = "PORTCULLIS_TEST_FAULT_FILE";

/// The injected cluster, if the fault file is configured and present.
pub fn cluster() -> Option<Cluster> {
    let path = std::env::var_os(ENV)?;
    let text = std::fs::read_to_string(&path).ok()?;
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "{ENV}: not JSON");
            return None;
        }
    };
    match translate::output::json::message_from_json::<Cluster>(&value) {
        Ok(c) => {
            tracing::warn!(cluster = %c.name, "{ENV}: injecting a test fault into every Gateway");
            Some(c)
        }
        Err(e) => {
            tracing::warn!(error = %e, "{ENV}: not a Cluster");
            None
        }
    }
}
