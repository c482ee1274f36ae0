//! Resource types portcullis reads, and the one loader every provider uses.
//!
//! Data model: a manifest file holds one or more YAML/JSON documents; each
//! document that names a known kind becomes a typed object wrapped in
//! [`Sourced`] (the object plus the file and line it came from). All objects
//! of one load form an [`Inputs`] snapshot, which is what the translator
//! consumes. Problems found while loading never abort the load: they become
//! [`Diagnostic`]s naming the file, line, object and field, and every other
//! document is still loaded.

// Module docs explain the data model to maintainers and link the private
// items that carry it (`cargo doc --document-private-items` resolves them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod crd;
pub mod diagnostic;
pub mod files;
pub mod gateway_parameters;
pub mod httpproxy;
pub mod inputs;
pub mod loader;
pub mod policy;
pub mod source;

pub use diagnostic::{Diagnostic, Severity};
pub use inputs::{ExtensionObject, FieldStep, Inputs, Sourced, Unreadable};
pub use source::Source;

/// Re-exported so downstream crates name the same versions of the types.
pub use gateway_api;
pub use k8s_openapi;
