//! HTTPProxy TLS roots, shared by the file-mode (`httpproxy_e2e.rs`) and
//! Kubernetes-mode (`controller_kinds_e2e.rs`) tests: a Gateway with an
//! HTTPS listener, Contour's certificate delegation and a TLS root, the
//! certificates they use, and a TLS client that reports the certificate
//! presented.

use std::time::Duration;

/// Accepts any server certificate (signatures still checked) and lets the
/// test compare the one presented with the one expected.
#[derive(Debug)]
pub struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// (status, body, DER of the certificate presented) of a GET over TLS
/// with SNI `sni`, or None if the connection or handshake failed.
pub fn tls_get(port: u16, sni: &str, path: &str) -> Option<(u16, String, Vec<u8>)> {
    use std::io::{Read, Write};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).ok()?;
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    {
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").as_bytes())
            .ok()?;
        // Envoy may close without close_notify: keep what was read.
        let _ = tls.read_to_end(&mut buf);
    }
    let cert = conn.peer_certificates()?.first()?.as_ref().to_vec();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string(), cert))
}

/// A self-signed certificate for `name`: (PEM, key PEM, DER).
pub fn certificate(name: &str) -> (String, String, Vec<u8>) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec![name.to_string()]).expect("params");
    let cert = params.self_signed(&key).expect("self-signed");
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// Secret `ns/name` of type `kubernetes.io/tls`, followed by `---`.
pub fn tls_secret(ns: &str, name: &str, cert: &str, key: &str) -> String {
    let indent = |pem: &str| pem.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}---\n",
        indent(cert),
        indent(key)
    )
}

/// GatewayClass `portcullis` and Gateway `infra/gw`: an HTTP listener on
/// `http_port` and an HTTPS one on `https_port` whose own certificate is
/// Secret `infra/listener-cert` (see [`tls_secret`]), both taking routes
/// from every namespace; followed by `---`.
pub fn https_gateway(http_port: u16, https_port: u16) -> String {
    super::gateway_with(&format!(
        "{}{}",
        super::http_listener("http", http_port),
        super::https_listener(https_port, "listener-cert")
    ))
}

/// Secret `certs/secure` delegated to namespace `team`, and HTTPProxy
/// `team/secure`: the TLS root of `secure.example.com` with that Secret,
/// routing to Service `s` (`extra_routes`, YAML list items indented by
/// two, after its catch-all route), followed by `---`.
pub fn delegated_tls_root(extra_routes: &str) -> String {
    format!(
        r#"apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata: {{name: wildcard, namespace: certs}}
spec:
  delegations:
  - {{secretName: secure, targetNamespaces: [team]}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: secure, namespace: team}}
spec:
  virtualhost:
    fqdn: secure.example.com
    tls: {{secretName: certs/secure}}
  routes:
  - services: [{{name: s, port: 80}}]
{extra_routes}---
"#
    )
}
