//! TLS certificate references of HTTPS listeners: resolution, permission
//! and a structural check of the PEM data, so that a bad Secret becomes a
//! listener condition instead of an Envoy NACK.

use api::k8s_openapi::api::core::v1::Secret;
use base64::Engine;

use crate::index::Index;
use crate::reference_grant::{self, From, To};
use crate::status::reason;

/// A certificate ready to be served over SDS.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Certificate {
    /// SDS resource name: `namespace/name`.
    pub sds_name: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Why a certificate reference cannot be used: (reason, message).
pub type RefError = (&'static str, String);

pub fn resolve(
    index: &Index<'_>,
    gateway_ns: &str,
    group: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Certificate, RefError> {
    if !(group.is_empty() || group == "core") || kind != "Secret" {
        return Err((
            reason::INVALID_CERTIFICATE_REF,
            format!("certificateRef {group}/{kind} {name}: only core Secrets are supported"),
        ));
    }
    let ns = namespace.unwrap_or(gateway_ns);
    let from = From {
        group: "gateway.networking.k8s.io",
        kind: "Gateway",
        namespace: gateway_ns,
    };
    let to = To {
        group: "",
        kind: "Secret",
        namespace: ns,
        name,
    };
    if !reference_grant::permitted(index, &from, &to) {
        return Err((
            reason::REF_NOT_PERMITTED,
            format!(
                "certificateRef Secret {ns}/{name}: no ReferenceGrant in {ns} allows Gateways from {gateway_ns}"
            ),
        ));
    }
    let Some(secret) = index.secret(ns, name) else {
        return Err((
            reason::INVALID_CERTIFICATE_REF,
            format!("certificateRef Secret {ns}/{name} not found"),
        ));
    };
    let (cert_pem, key_pem) = check_secret(secret).map_err(|e| {
        (
            reason::INVALID_CERTIFICATE_REF,
            format!("certificateRef Secret {ns}/{name}: {e}"),
        )
    })?;
    Ok(Certificate {
        sds_name: format!("{ns}/{name}"),
        cert_pem,
        key_pem,
    })
}

fn data_string(secret: &Secret, key: &str) -> Option<String> {
    if let Some(v) = secret.string_data.as_ref().and_then(|d| d.get(key)) {
        return Some(v.clone());
    }
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

fn check_secret(secret: &Secret) -> Result<(String, String), String> {
    if let Some(t) = secret.type_.as_deref()
        && t != "kubernetes.io/tls"
    {
        return Err(format!("type {t} is not kubernetes.io/tls"));
    }
    let cert = data_string(secret, "tls.crt").ok_or("data[tls.crt] is missing")?;
    let key = data_string(secret, "tls.key").ok_or("data[tls.key] is missing")?;
    // Envoy skips blocks with other labels (a key pasted into tls.crt).
    let certs: Vec<(String, Vec<u8>)> = pem_blocks(&cert)
        .map_err(|e| format!("data[tls.crt]: {e}"))?
        .into_iter()
        .filter(|(label, _)| label == "CERTIFICATE")
        .collect();
    if certs.is_empty() {
        return Err("data[tls.crt]: expected one or more PEM CERTIFICATE blocks".into());
    }
    for (i, (_, der)) in certs.iter().enumerate() {
        let (_, c) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("data[tls.crt]: certificate {i} is not valid X.509: {e}"))?;
        if i == 0 {
            leaf_key(&c).map_err(|e| format!("data[tls.crt]: {e}"))?;
        }
    }
    // Other blocks (`openssl ecparam -genkey` writes EC PARAMETERS first)
    // are skipped, as Envoy does.
    let keys: Vec<(String, Vec<u8>)> = pem_blocks(&key)
        .map_err(|e| format!("data[tls.key]: {e}"))?
        .into_iter()
        .filter(|(label, _)| label.ends_with("PRIVATE KEY"))
        .collect();
    match keys.as_slice() {
        [(label, der)] => private_key(label, der).map_err(|e| format!("data[tls.key]: {e}"))?,
        _ => return Err("data[tls.key]: expected exactly one PEM PRIVATE KEY block".into()),
    }
    Ok((cert, key))
}

/// The leaf certificate's key as Envoy (BoringSSL) takes it: RSA of at
/// least 2048 bits, ECDSA on P-256/P-384/P-521, or Ed25519. Anything else
/// fails "Failed to load certificate chain" (a NACK of the listener).
fn leaf_key(cert: &x509_parser::certificate::X509Certificate<'_>) -> Result<(), String> {
    let spki = cert.public_key();
    let algorithm = spki.algorithm.algorithm.to_id_string();
    match algorithm.as_str() {
        // rsaEncryption
        "1.2.840.113549.1.1.1" => {
            let Ok(x509_parser::public_key::PublicKey::RSA(rsa)) = spki.parsed() else {
                return Err("the certificate's RSA public key does not parse".into());
            };
            let bits = rsa.key_size();
            if bits < 2048 {
                return Err(format!(
                    "the certificate's RSA key has {bits} bits; Envoy only takes RSA keys of 2048 bits or more"
                ));
            }
            Ok(())
        }
        // id-ecPublicKey: the named curve is the algorithm's parameter.
        "1.2.840.10045.2.1" => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|o| o.to_id_string())
                .unwrap_or_default();
            match curve.as_str() {
                "1.2.840.10045.3.1.7" | "1.3.132.0.34" | "1.3.132.0.35" => Ok(()),
                other => Err(format!(
                    "the certificate's ECDSA key is on curve {other:?}; Envoy only takes P-256, P-384 and P-521"
                )),
            }
        }
        // Ed25519
        "1.3.101.112" => Ok(()),
        other => Err(format!(
            "the certificate's key algorithm {other} is not supported by Envoy (RSA, ECDSA P-256/P-384/P-521 or Ed25519)"
        )),
    }
}

/// The private key block as BoringSSL reads it: an unencrypted PKCS#8
/// (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`)
/// key whose DER matches its label.
fn private_key(label: &str, der: &[u8]) -> Result<(), String> {
    use x509_parser::der_parser::ber::BerObjectContent as C;
    if label == "ENCRYPTED PRIVATE KEY" {
        return Err("the private key is encrypted; Envoy cannot read it (it has no passphrase)".into());
    }
    let (_, seq) = x509_parser::der_parser::der::parse_der_sequence(der)
        .map_err(|_| format!("the {label} block is not DER"))?;
    let items = seq
        .as_sequence()
        .map_err(|_| format!("the {label} block is not a DER sequence"))?;
    // Each format's second element tells them apart; BoringSSL falls back
    // to PKCS#8 under the RSA and EC labels, but not the other way round.
    let second = items.get(1).map(|o| &o.content);
    let pkcs8 = matches!(second, Some(C::Sequence(_)));
    let fits = match label {
        "PRIVATE KEY" => pkcs8,
        "RSA PRIVATE KEY" => pkcs8 || matches!(second, Some(C::Integer(_))),
        "EC PRIVATE KEY" => pkcs8 || matches!(second, Some(C::OctetString(_))),
        other => {
            return Err(format!(
                "unknown PEM label {other:?} (expected PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
            ));
        }
    };
    if !fits {
        return Err(format!(
            "the {label} block does not hold a {label} (wrong label or malformed DER)"
        ));
    }
    Ok(())
}

/// `(label, DER)` for every PEM block.
fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    // As BoringSSL's reader (checked against Envoy 1.40): a BEGIN line
    // starts at column 0 (an indented block is not found at all) and block
    // lines carry no `Name: value` headers; indented or trailing spaces in
    // the base64, CRLF, a BOM and text around the blocks are fine.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().map(str::trim_end);
    while let Some(line) = lines.next() {
        let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l == end {
                closed = true;
                break;
            }
            if l.contains(':') {
                return Err(format!(
                    "PEM block {label} has a header line ({l:?}); Envoy does not accept PEM headers"
                ));
            }
            // BoringSSL's base64 skips spaces inside a block.
            body.extend(l.chars().filter(|c| !c.is_whitespace()));
        }
        if !closed {
            return Err(format!("PEM block {label} is not terminated"));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|e| format!("PEM block {label}: {e}"))?;
        out.push((label.to_string(), der));
    }
    Ok(out)
}
