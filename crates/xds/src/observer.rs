//! What the server reports about the Envoys it serves.

/// Receives xDS events; implemented by the binary (metrics, status).
pub trait Observer: Send + Sync + 'static {
    fn connected(&self, _node: &str) {}
    fn disconnected(&self, _node: &str) {}
    fn pushed(&self, _node: &str, _type_url: &str, _version: &str) {}
    fn acked(&self, _node: &str, _type_url: &str, _version: &str) {}
    /// Envoy rejected `version` of `type_url` with `message`.
    fn nacked(&self, _node: &str, _type_url: &str, _version: &str, _message: &str) {}
    /// A stream asked for `node` with a client certificate that does not
    /// name it (`identity`: the certificate's URI SANs); it was refused.
    fn refused(&self, _node: &str, _identity: &str) {}
    /// A TLS handshake failed (no client certificate, an untrusted one, a
    /// timeout).
    fn handshake_failed(&self, _error: &str) {}
}

pub struct NoopObserver;
impl Observer for NoopObserver {}
