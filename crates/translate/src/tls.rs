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
    let certs = pem_blocks(&cert).map_err(|e| format!("data[tls.crt]: {e}"))?;
    if certs.is_empty() || certs.iter().any(|(label, _)| label != "CERTIFICATE") {
        return Err("data[tls.crt]: expected one or more PEM CERTIFICATE blocks".into());
    }
    for (i, (_, der)) in certs.iter().enumerate() {
        x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("data[tls.crt]: certificate {i} is not valid X.509: {e}"))?;
    }
    let keys = pem_blocks(&key).map_err(|e| format!("data[tls.key]: {e}"))?;
    match keys.as_slice() {
        [(label, der)] if label.ends_with("PRIVATE KEY") && der.first() == Some(&0x30) => {}
        _ => return Err("data[tls.key]: expected exactly one PEM PRIVATE KEY block".into()),
    }
    Ok((cert, key))
}

/// `(label, DER)` for every PEM block.
fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().map(str::trim);
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
            if !l.contains(':') {
                body.push_str(l);
            }
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
