//! What the server reports about the Envoys it serves.

/// Receives xDS events; implemented by the binary (metrics, status).
pub trait Observer: Send + Sync + 'static {
    fn connected(&self, _node: &str) {}
    fn disconnected(&self, _node: &str) {}
    fn pushed(&self, _node: &str, _type_url: &str, _version: &str) {}
    fn acked(&self, _node: &str, _type_url: &str, _version: &str) {}
    /// Envoy rejected `version` of `type_url` with `message`.
    fn nacked(&self, _node: &str, _type_url: &str, _version: &str, _message: &str) {}
}

pub struct NoopObserver;
impl Observer for NoopObserver {}
