//! xDS over mutually authenticated TLS.
//!
//! Data model: a [`ServerTls`] holds the current rustls `ServerConfig`
//! (server certificate chain + key, and the CA bundle client certificates
//! must chain to) behind a lock; every accepted connection is handshaken
//! with the config current at that moment, so [`ServerTls::reload`]
//! (certificate rotation, a new CA in the trust bundle) applies to new
//! connections and never touches established ones. A client that presents
//! no certificate, or one that does not chain to the bundle, is refused in
//! the handshake.
//!
//! Each established connection carries its [`PeerIdentity`] (the node ids
//! its certificate's URI SANs name, through the caller's `identity`
//! function — Kubernetes mode's is `kube_provider::names::node_of_identity`)
//! as tonic connect info; the ADS streams ([`crate::AdsServer`] with
//! [`crate::AdsServer::require_identity`]) serve a stream only when its
//! `node.id` is the one node its certificate names, and refuse it
//! (`PermissionDenied`) otherwise. Since a node's snapshot holds only its
//! Gateway's resources (SDS secrets included), a certificate gets exactly
//! its Gateway's configuration.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

use crate::observer::Observer;

/// How long a client may take to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; a connection beyond is closed at once,
/// so unauthenticated clients cannot pile up tasks and memory.
const MAX_HANDSHAKES: usize = 256;

/// Maps a URI SAN to the node id it entitles (`None`: not an identity).
pub type IdentityFn = fn(&str) -> Option<String>;

/// PEM material of the xDS server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsMaterial {
    /// The server certificate chain (leaf first).
    pub cert_chain_pem: Vec<u8>,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
    /// CA certificates a client certificate must chain to (one or several:
    /// during a CA rotation both the old and the new one).
    pub client_ca_pem: Vec<u8>,
}

/// Why TLS material was refused (the previous config, if any, stays).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("xDS TLS {field}: no PEM certificate found")]
    NoCertificate { field: &'static str },
    #[error("xDS TLS {field}: {message}")]
    Pem { field: &'static str, message: String },
    #[error("xDS TLS key: no PEM private key found")]
    NoKey,
    #[error("xDS TLS client CA: {message}")]
    ClientCa { message: String },
    #[error("xDS TLS certificate and key: {message}")]
    Config { message: String },
}

fn certificates(pem: &[u8], field: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            field,
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { field });
    }
    Ok(certs)
}

fn server_config(m: &TlsMaterial) -> Result<ServerConfig, TlsError> {
    let chain = certificates(&m.cert_chain_pem, "certificate")?;
    let key = PrivateKeyDer::from_pem_slice(&m.key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey,
        e => TlsError::Pem {
            field: "key",
            message: e.to_string(),
        },
    })?;
    let mut roots = RootCertStore::empty();
    for ca in certificates(&m.client_ca_pem, "client CA")? {
        roots.add(ca).map_err(|e| TlsError::ClientCa {
            message: e.to_string(),
        })?;
    }
    // ring explicitly: the process-wide default provider is not chosen.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::ClientCa {
            message: e.to_string(),
        })?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config {
            message: e.to_string(),
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config {
            message: e.to_string(),
        })?;
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The xDS server's TLS: the current config, replaceable at runtime.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<RwLock<Arc<ServerConfig>>>,
    identity: IdentityFn,
}

impl ServerTls {
    pub fn new(material: &TlsMaterial, identity: IdentityFn) -> Result<Self, TlsError> {
        Ok(Self {
            config: Arc::new(RwLock::new(Arc::new(server_config(material)?))),
            identity,
        })
    }

    /// Replaces the certificate, key and client CA bundle for connections
    /// accepted from now on; established connections keep theirs. Invalid
    /// material is refused and the current config kept.
    pub fn reload(&self, material: &TlsMaterial) -> Result<(), TlsError> {
        let next = Arc::new(server_config(material)?);
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    fn current(&self) -> Arc<ServerConfig> {
        self.config.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The node ids `cert` (DER) names through its URI SANs.
    fn nodes(&self, cert: &[u8]) -> (Vec<String>, Vec<String>) {
        let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert) else {
            return (Vec::new(), Vec::new());
        };
        let mut uris = Vec::new();
        if let Ok(Some(san)) = parsed.subject_alternative_name() {
            for name in &san.value.general_names {
                if let x509_parser::extensions::GeneralName::URI(u) = name {
                    uris.push((*u).to_string());
                }
            }
        }
        let nodes = uris.iter().filter_map(|u| (self.identity)(u)).collect();
        (nodes, uris)
    }
}

/// Who is on the other end of a TLS connection (tonic connect info).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub remote: Option<SocketAddr>,
    /// Node ids named by the client certificate's URI SANs.
    pub nodes: Vec<String>,
    /// Every URI SAN of the client certificate (for logs).
    pub uris: Vec<String>,
}

impl PeerIdentity {
    /// The node this peer may be served: the one node its certificate
    /// names; `None` for none or several (ambiguous: refused).
    pub fn node(&self) -> Option<&str> {
        match self.nodes.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// An accepted, handshaken connection.
pub struct TlsConn {
    stream: TlsStream<TcpStream>,
    peer: PeerIdentity,
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = PeerIdentity;

    fn connect_info(&self) -> PeerIdentity {
        self.peer.clone()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Accepts on `listener` and yields the connections whose TLS handshake
/// (client certificate required) succeeded, for
/// `tonic::transport::Server::serve_with_incoming`. Handshakes run
/// concurrently, each bounded by a timeout, so a slow or silent client
/// holds up no other; a failed one is reported to `observer` and dropped.
/// Accepting stops when the returned stream is dropped.
pub fn incoming(
    listener: TcpListener,
    tls: ServerTls,
    observer: Arc<dyn Observer>,
) -> ReceiverStream<Result<TlsConn, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off rather than spin.
                    tracing::warn!(error = %e, "xDS accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                observer.handshake_failed("too many handshakes in progress");
                tracing::warn!(%remote, "xDS connection closed: too many TLS handshakes in progress");
                continue;
            };
            let (tx, tls, observer) = (tx.clone(), tls.clone(), observer.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        observer.handshake_failed(&e.to_string());
                        tracing::warn!(%remote, error = %e, "xDS TLS handshake refused");
                        return;
                    }
                    Err(_) => {
                        observer.handshake_failed("timeout");
                        tracing::warn!(%remote, "xDS TLS handshake timed out");
                        return;
                    }
                };
                let (nodes, uris) = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| tls.nodes(c))
                    .unwrap_or_default();
                let peer = PeerIdentity {
                    remote: Some(remote),
                    nodes,
                    uris,
                };
                let _ = tx.send(Ok(TlsConn { stream, peer })).await;
            });
        }
    });
    ReceiverStream::new(rx)
}
