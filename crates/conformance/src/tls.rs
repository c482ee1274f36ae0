//! The TLS material the upstream suite generates at run time, and a client
//! that checks it the way the suite's Go client does.
//!
//! The suite trusts its own self-signed certificate and lets Go's
//! crypto/x509 match the host name, which accepts `*.org` for
//! `example.org`. rustls's verifier (rightly, for the web) refuses wildcards
//! that cover a whole TLD, so the client here pins the exact certificate we
//! generated and matches names with Go's rules: it still fails if Envoy
//! presents any other certificate or a name the certificate does not cover.

use std::sync::Arc;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

pub struct Secret {
    pub namespace: String,
    pub name: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
    pub names: Vec<String>,
}

pub struct Certs {
    pub secrets: Vec<Secret>,
}

/// `(namespace, name, DNS names)` of the Secrets the suite creates that our
/// listeners use (base-manifests.summary.json,
/// `programmatic_resources_created_by_suite`).
const SUITE_SECRETS: &[(&str, &str, &[&str])] = &[
    (
        "gateway-conformance-infra",
        "tls-validity-checks-certificate",
        &["*", "*.org", "*.wildcard.org"],
    ),
    ("gateway-conformance-web-backend", "certificate", &["*"]),
];

pub fn generate() -> anyhow::Result<Certs> {
    let mut secrets = Vec::new();
    for (namespace, name, names) in SUITE_SECRETS {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let key = rcgen::KeyPair::generate().context("key generation")?;
        let mut params = rcgen::CertificateParams::new(names.clone()).context("certificate names")?;
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "portcullis conformance");
        let cert = params.self_signed(&key).context("self-signing")?;
        secrets.push(Secret {
            namespace: namespace.to_string(),
            name: name.to_string(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            names,
        });
    }
    Ok(Certs { secrets })
}

/// crypto/x509's `matchHostnames`: same number of labels, a `*` first
/// label matches any one label, the rest compare case-insensitively.
pub fn go_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if pattern.is_empty() || host.is_empty() {
        return false;
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let h: Vec<&str> = host.split('.').collect();
    p.len() == h.len()
        && p.iter()
            .zip(&h)
            .enumerate()
            .all(|(i, (p, h))| (i == 0 && *p == "*" && !h.is_empty()) || p == h)
}

#[derive(Debug)]
struct Pinned {
    certs: Vec<(CertificateDer<'static>, Vec<String>)>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some((_, names)) = self
            .certs
            .iter()
            .find(|(der, _)| der.as_ref() == end_entity.as_ref())
        else {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ));
        };
        let host = match server_name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            other => other.to_str().into_owned(),
        };
        if names.iter().any(|n| go_matches(n, &host)) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client config that trusts exactly the generated certificates.
pub fn client_config(certs: &Certs) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        certs: certs
            .secrets
            .iter()
            .map(|s| (s.der.clone(), s.names.clone()))
            .collect(),
        provider: provider.clone(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::go_matches;

    #[test]
    fn go_hostname_rules() {
        assert!(go_matches("*.org", "example.org"));
        assert!(go_matches("*.wildcard.org", "fourth-example.wildcard.org"));
        assert!(!go_matches("*.org", "a.example.org"));
        assert!(!go_matches("*", "example.org"));
        assert!(go_matches("Example.ORG", "example.org"));
        assert!(!go_matches("*.org", "org"));
    }
}
