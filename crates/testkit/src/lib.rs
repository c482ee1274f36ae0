//! Test support shared by the workspace's test suites: finding the real Envoy
//! binary and asking it whether a configuration is valid.

pub mod envoy;
pub mod generate;
