//! Test support shared by the workspace's test suites: finding the real Envoy
//! binary and asking it whether a configuration is valid, and a real
//! Kubernetes control plane (`kube`).

pub mod envoy;
pub mod generate;
pub mod kube;
pub mod kube_controller_manager;
pub mod port;
