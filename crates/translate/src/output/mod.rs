//! Rendering an [`Output`](crate::Output): proto-JSON of the xDS (design §5)
//! and static Envoy bootstraps. (Being written.)
