//! Kubernetes provider.
