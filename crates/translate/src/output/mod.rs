//! Rendering an [`Output`](crate::Output): canonical proto-JSON/YAML of the
//! xDS (design §5, [`json`]) and Envoy bootstraps ([`bootstrap`]): a static
//! one with every resource inline, and a dynamic one pointing at the ADS
//! server. [`stream`] writes the CLI's documents (JSON, YAML, bootstrap) as
//! they render.

pub mod bootstrap;
mod fast;
pub mod json;
mod lazy;
pub mod redact;
pub mod stream;

pub use bootstrap::{
    AdminAddress, BootstrapOptions, XdsClientTls, ads_bootstrap, ads_bootstrap_tls_proto, static_bootstrap,
    try_ads_bootstrap_tls,
};
pub use json::{
    any_to_json, bytes_to_json, descriptor_pool, gateway_xds_to_json, json_to_message, json_to_yaml,
    message_from_json, message_to_json, output_to_json, output_to_yaml, try_gateway_xds_to_json,
};

/// Why a message could not be rendered or parsed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The type is not in the vendored envoy-types descriptor set.
    #[error("unknown protobuf type {0:?}")]
    UnknownType(String),
    #[error("cannot decode {type_name}: {source}")]
    Decode {
        type_name: String,
        #[source]
        source: prost::DecodeError,
    },
    /// proto-JSON (de)serialization failed, e.g. an Any of an unknown type
    /// or a JSON field the message does not have.
    #[error("{type_name}: {message}")]
    Json { type_name: String, message: String },
    #[error("YAML: {0}")]
    Yaml(String),
    /// A resource of a [`GatewayXds`](crate::GatewayXds) could not be rendered.
    #[error("{0}")]
    Render(String),
}
