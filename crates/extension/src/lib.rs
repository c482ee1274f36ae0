//! Envoy Gateway's extension protocol for portcullis (README "Writing an
//! extension"; ARCHITECTURE.md §2):
//!
//! - [`proto`]: the `envoygateway.extension` messages, client and server,
//!   generated at build time from the vendored `.proto` files (Envoy types
//!   are envoy-types', so the wire format is Envoy Gateway's).
//! - [`config`]: `extensionManager` / `extensionManagers` in Envoy
//!   Gateway's shape, validated into [`config::ExtensionConfig`].
//! - [`client`]: [`Chain`], the gRPC client that implements the
//!   translator's [`translate::extension::Hooks`] with deadlines, retries,
//!   bounded concurrency and a reply cache ([`cache`]), counting what it
//!   does ([`stats`]).

pub mod cache;
pub mod client;
pub mod config;
pub mod example;
pub mod stats;

pub mod proto {
    //! Generated from `proto/extension/{service,context}.proto`.
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("envoygateway.extension");

    /// The encoded `FileDescriptorSet` of the two files and their imports.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/extension_descriptor.bin"));
}

pub use client::{Chain, ChainOptions, ClientError, Observer};
pub use config::{ConfigError, ExtensionConfig, ExtensionManagerSpec, ManagerConfig};
pub use stats::{CallResult, Reachability, StatsSnapshot};
