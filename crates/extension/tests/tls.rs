//! TLS and mTLS to the extension server, configured as a user would
//! (`service.tls.caFile`, `clientCertificateFile`, `clientKeyFile`), with
//! certificates generated here.

mod common;

use std::path::Path;

use common::{Mode, Tagger, serve_tcp, temp_dir};
use envoy_types::pb::envoy::config::route::v3::Route;
use extension::config::{ExtensionConfig, ExtensionManagerSpec, ServiceAddress};
use extension::{Chain, ChainOptions};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use translate::extension::{HookFailure, Hooks, RouteCall};

struct Pki {
    ca_pem: String,
    server: (String, String),
    client: (String, String),
    other_ca_pem: String,
}

fn leaf(names: Vec<String>, ca: &CertifiedIssuer<'_, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(names)
        .expect("params")
        .signed_by(&key, ca)
        .expect("sign");
    (cert.pem(), key.serialize_pem())
}

fn new_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(p, KeyPair::generate().expect("key")).expect("ca")
}

fn pki() -> Pki {
    let ca = new_ca();
    let other = new_ca();
    Pki {
        ca_pem: ca.pem(),
        server: leaf(vec!["localhost".into(), "127.0.0.1".into()], &ca),
        client: leaf(vec!["portcullis".into()], &ca),
        other_ca_pem: other.pem(),
    }
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write");
    p.display().to_string()
}

/// A chain from the YAML a user would write.
fn chain_from(yaml: &str) -> Chain {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        extension_manager: ExtensionManagerSpec,
    }
    let f: File = serde_saphyr::from_str(yaml).expect("yaml");
    let config = ExtensionConfig::from_spec(Some(&f.extension_manager), None).expect("valid");
    Chain::new(&config, ChainOptions::default()).expect("chain")
}

fn port(s: &common::Server) -> u16 {
    match s.address {
        ServiceAddress::Ip { port, .. } => port,
        _ => unreachable!("tcp server"),
    }
}

fn call(c: &Chain) -> Result<Option<Route>, translate::extension::HookError> {
    c.post_route_modify(vec![RouteCall {
        route: Route {
            name: "r".into(),
            ..Default::default()
        },
        hostnames: vec![],
        extension_resources: vec![],
        extension_policies: vec![],
    }])
    .pop()
    .expect("one reply")
}

#[test]
fn tls_verifies_the_server_against_the_configured_ca() {
    let dir = temp_dir("tls");
    let pki = pki();
    let tls = ServerTlsConfig::new().identity(Identity::from_pem(&pki.server.0, &pki.server.1));
    let server = serve_tcp(Tagger::new("+tls", Mode::Tag), Some(tls));
    let ca = write(&dir, "ca.pem", &pki.ca_pem);
    let other = write(&dir, "other.pem", &pki.other_ca_pem);
    let yaml = |ca: &str, extra: &str| {
        format!(
            "extensionManager:\n  hooks: {{xdsTranslator: {{post: [Route]}}}}\n  timeout: 1s\n  service:\n    fqdn: {{hostname: localhost, port: {}}}\n    retry: {{maxAttempts: 1}}\n    tls:\n      caFile: {ca}\n{extra}",
            port(&server)
        )
    };

    let ok = chain_from(&yaml(&ca, ""));
    assert_eq!(
        call(&ok).expect("tls call").map(|r| r.name).as_deref(),
        Some("r+tls")
    );

    // A server certificate from another CA is refused.
    let wrong = chain_from(&yaml(&other, ""));
    let e = call(&wrong).expect_err("untrusted server");
    assert!(matches!(e.failure, HookFailure::Unreachable { .. }), "{e}");

    // A name the certificate is not valid for is refused.
    let name = chain_from(&yaml(&ca, "      serverName: ext.example\n"));
    assert!(
        call(&name).is_err(),
        "certificate is for localhost and 127.0.0.1 only"
    );

    // An IP address is checked against the certificate's IP SAN.
    let by_ip = format!(
        "extensionManager:\n  hooks: {{xdsTranslator: {{post: [Route]}}}}\n  service:\n    ip: {{address: 127.0.0.1, port: {}}}\n    tls: {{caFile: {ca}}}\n",
        port(&server)
    );
    assert!(call(&chain_from(&by_ip)).expect("by ip").is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mtls_presents_the_configured_client_certificate() {
    let dir = temp_dir("mtls");
    let pki = pki();
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&pki.server.0, &pki.server.1))
        .client_ca_root(Certificate::from_pem(&pki.ca_pem));
    let server = serve_tcp(Tagger::new("+mtls", Mode::Tag), Some(tls));
    let ca = write(&dir, "ca.pem", &pki.ca_pem);
    let cert = write(&dir, "client.pem", &pki.client.0);
    let key = write(&dir, "client.key", &pki.client.1);
    let base = format!(
        "extensionManager:\n  hooks: {{xdsTranslator: {{post: [Route]}}}}\n  timeout: 1s\n  service:\n    fqdn: {{hostname: localhost, port: {}}}\n    retry: {{maxAttempts: 1}}\n    tls:\n      caFile: {ca}\n",
        port(&server)
    );

    let with = chain_from(&format!(
        "{base}      clientCertificateFile: {cert}\n      clientKeyFile: {key}\n"
    ));
    assert_eq!(
        call(&with).expect("mtls call").map(|r| r.name).as_deref(),
        Some("r+mtls")
    );

    let without = chain_from(&base);
    assert!(
        call(&without).is_err(),
        "the server requires a client certificate"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_file_that_is_not_pem_is_a_startup_error() {
    let dir = temp_dir("badpem");
    let ca = write(&dir, "ca.pem", "not a certificate");
    let yaml = format!(
        "extensionManager:\n  hooks: {{xdsTranslator: {{post: [Route]}}}}\n  service:\n    unix: {{path: /x}}\n    tls: {{caFile: {ca}}}\n"
    );
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        extension_manager: ExtensionManagerSpec,
    }
    let f: File = serde_saphyr::from_str(&yaml).expect("yaml");
    let e = ExtensionConfig::from_spec(Some(&f.extension_manager), None).expect_err("not PEM");
    assert_eq!(e.field(), "extensionManager.service.tls.caFile");
    let _ = std::fs::remove_dir_all(&dir);
}
