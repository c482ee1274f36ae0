//! The xDS server: one snapshot of resources per node (one node per
//! Gateway), served to Envoy over ADS in both state-of-the-world and delta
//! variants.
//!
//! Data model: a [`Snapshot`] holds, per resource type, the resources by
//! name, each with a content hash; the type's version is the hash of its
//! contents, so a push happens only for types whose contents changed. The
//! [`SnapshotCache`] publishes snapshots per node through `watch` channels;
//! each ADS stream follows its node's channel and pushes, in a safe order
//! (clusters, endpoints, secrets, then listeners and routes), what the
//! Envoy on the other end has not seen. ACKs and NACKs are reported to an
//! [`Observer`]. Over mutually authenticated TLS ([`tls`]) a stream is
//! served only the node its client certificate names.

pub mod cache;
pub mod delta;
pub mod observer;
mod push_clock;
pub mod server;
pub mod sotw;
pub mod tls;
pub mod types;

pub use cache::{Snapshot, SnapshotCache};
pub use observer::{NoopObserver, Observer};
pub use server::AdsServer;
