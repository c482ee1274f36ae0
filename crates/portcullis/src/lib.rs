//! The portcullis control plane as a library: the `portcullis` binary is a
//! thin wrapper over it, and the conformance runner (`crates/conformance`)
//! runs the same `serve` in-process.

pub mod cli;
pub mod config;
pub mod controller;
pub mod extensions;
pub mod orphan_guard;
pub mod provision_args;
pub mod serve;
pub mod validator;
pub mod views;
pub mod xds_ca;
