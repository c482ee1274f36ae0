//! TLS certificate references of HTTPS listeners: resolution, permission
//! and a check of the Secret as Envoy's BoringSSL reads it, so that a bad
//! Secret becomes a listener condition instead of an Envoy NACK: PEM and
//! base64 here, every certificate's TBSCertificate rules in `x509`, the
//! leaf's public key, the private key and whether they belong together in
//! `keys`, on a `CBS`-like DER reader (`der`). Each rule names the
//! BoringSSL function it follows and was checked against Envoy 1.40
//! (`tests/rejections/tls-*.yaml`). Known limits: explicit EC parameters
//! are recognised by their group order only, PKCS#8 attributes are not
//! read, and what x509-parser accepts in names, times and extensions is
//! taken as BoringSSL's verdict.

use api::k8s_openapi::api::core::v1::Secret;
use base64::Engine;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};

mod der;
mod keys;
mod x509;

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

/// Why a Secret cannot be served as a certificate; the text follows
/// "certificateRef Secret ns/name: " (reason `InvalidCertificateRef`).
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("type {0} is not kubernetes.io/tls")]
    Type(String),
    #[error("data[{0}] is missing")]
    Missing(&'static str),
    #[error("data[{key}]: {error}")]
    Pem {
        key: &'static str,
        #[source]
        error: PemError,
    },
    #[error("data[tls.crt]: expected one or more PEM CERTIFICATE blocks")]
    NoCertificate,
    #[error("data[tls.crt]: certificate {index} is not valid X.509: {error}")]
    X509 {
        index: usize,
        #[source]
        error: x509_parser::nom::Err<x509_parser::error::X509Error>,
    },
    #[error("data[tls.crt]: certificate {index}: {error}")]
    Tbs {
        index: usize,
        #[source]
        error: x509::TbsError,
    },
    #[error("data[tls.crt]: {0}")]
    LeafKey(#[source] keys::CertKeyError),
    #[error("data[tls.key]: expected exactly one PEM PRIVATE KEY block")]
    KeyCount,
    #[error("data[tls.key]: the private key is encrypted; Envoy cannot read it (it has no passphrase)")]
    Encrypted,
    #[error("data[tls.key]: {0}")]
    PrivateKey(#[source] keys::PrivateKeyError),
    #[error("data[tls.key]: {0}")]
    Mismatch(#[source] keys::MismatchError),
}

/// What BoringSSL's PEM reader refuses. The block's lines are never
/// quoted: they may be key material.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    #[error("PEM block {label} has a header line (a line with ':'); Envoy does not accept PEM headers")]
    Header { label: String },
    #[error("PEM block {label} is not terminated")]
    Unterminated { label: String },
    #[error("PEM block {label}: {error}")]
    Base64 {
        label: String,
        #[source]
        error: base64::DecodeError,
    },
}

/// Why a listener's certificate reference cannot be used; [`reason`]
/// is the listener's `ResolvedRefs=False` reason.
///
/// [`reason`]: CertificateRefError::reason
#[derive(Debug, thiserror::Error)]
pub enum CertificateRefError {
    #[error("certificateRef {group}/{kind} {name}: only core Secrets are supported")]
    Unsupported {
        group: String,
        kind: String,
        name: String,
    },
    #[error(
        "certificateRef Secret {namespace}/{name}: no ReferenceGrant in {namespace} allows {from_kind}s from {from_namespace}"
    )]
    NotPermitted {
        namespace: String,
        name: String,
        from_kind: &'static str,
        from_namespace: String,
    },
    #[error("certificateRef Secret {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("certificateRef Secret {namespace}/{name}: {error}")]
    Invalid {
        namespace: String,
        name: String,
        #[source]
        error: SecretError,
    },
}

impl CertificateRefError {
    /// The Gateway API reason of the listener's `ResolvedRefs` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            CertificateRefError::NotPermitted { .. } => reason::REF_NOT_PERMITTED,
            CertificateRefError::Unsupported { .. }
            | CertificateRefError::NotFound { .. }
            | CertificateRefError::Invalid { .. } => reason::INVALID_CERTIFICATE_REF,
        }
    }
}

/// `from_kind` is the kind holding the listener (`Gateway` or
/// `ListenerSet`): a ReferenceGrant names the kind it admits.
pub fn resolve(
    index: &Index<'_>,
    from_kind: &'static str,
    gateway_ns: &str,
    group: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Certificate, CertificateRefError> {
    if !(group.is_empty() || group == "core") || kind != "Secret" {
        return Err(CertificateRefError::Unsupported {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
        });
    }
    let ns = namespace.unwrap_or(gateway_ns);
    let from = From {
        group: "gateway.networking.k8s.io",
        kind: from_kind,
        namespace: gateway_ns,
    };
    let to = To {
        group: "",
        kind: "Secret",
        namespace: ns,
        name,
    };
    if !reference_grant::permitted(index, &from, &to) {
        return Err(CertificateRefError::NotPermitted {
            namespace: ns.to_string(),
            name: name.to_string(),
            from_kind,
            from_namespace: gateway_ns.to_string(),
        });
    }
    let Some(secret) = index.secret(ns, name) else {
        return Err(CertificateRefError::NotFound {
            namespace: ns.to_string(),
            name: name.to_string(),
        });
    };
    let (cert_pem, key_pem) = check_secret(secret).map_err(|error| CertificateRefError::Invalid {
        namespace: ns.to_string(),
        name: name.to_string(),
        error,
    })?;
    Ok(Certificate {
        sds_name: crate::naming::secret(ns, name),
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

pub(crate) fn check_secret(secret: &Secret) -> Result<(String, String), SecretError> {
    if let Some(t) = secret.type_.as_deref()
        && t != "kubernetes.io/tls"
    {
        return Err(SecretError::Type(t.to_string()));
    }
    let cert = data_string(secret, "tls.crt").ok_or(SecretError::Missing("tls.crt"))?;
    let key = data_string(secret, "tls.key").ok_or(SecretError::Missing("tls.key"))?;
    // Envoy skips blocks with other labels (a key pasted into tls.crt).
    let certs: Vec<(String, Vec<u8>)> = pem_blocks(&cert)
        .map_err(|error| SecretError::Pem {
            key: "tls.crt",
            error,
        })?
        .into_iter()
        .filter(|(label, _)| label == "CERTIFICATE")
        .collect();
    if certs.is_empty() {
        return Err(SecretError::NoCertificate);
    }
    // Envoy (BoringSSL) parses every certificate of the chain, but only
    // takes the leaf's public key.
    let mut leaf = None;
    for (index, (_, der)) in certs.iter().enumerate() {
        x509_parser::parse_x509_certificate(der).map_err(|error| SecretError::X509 { index, error })?;
        let spki = x509::check_tbs(der).map_err(|error| SecretError::Tbs { index, error })?;
        if index == 0 {
            leaf = Some(keys::leaf_public_key(spki).map_err(SecretError::LeafKey)?);
        }
    }
    // Other blocks (`openssl ecparam -genkey` writes EC PARAMETERS first)
    // are skipped, as Envoy does.
    let keys: Vec<(String, Vec<u8>)> = pem_blocks(&key)
        .map_err(|error| SecretError::Pem {
            key: "tls.key",
            error,
        })?
        .into_iter()
        .filter(|(label, _)| label.ends_with("PRIVATE KEY"))
        .collect();
    let [(label, der)] = keys.as_slice() else {
        return Err(SecretError::KeyCount);
    };
    if label == "ENCRYPTED PRIVATE KEY" {
        return Err(SecretError::Encrypted);
    }
    let private = keys::private_key(label, der).map_err(SecretError::PrivateKey)?;
    if let Some(leaf) = &leaf {
        keys::check_match(leaf, &private).map_err(SecretError::Mismatch)?;
    }
    Ok((cert, key))
}

/// BoringSSL's PEM base64 (`EVP_DecodeUpdate`, crypto/base64/base64.cc):
/// padded to a multiple of four, but non-zero bits after the last byte
/// (non-canonical encoding) are accepted, as OpenSSL and Go accept them.
const PEM_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// `(label, DER)` for every PEM block.
fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, PemError> {
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
            // The line is not quoted: it may be key material.
            if l.contains(':') {
                return Err(PemError::Header {
                    label: label.to_string(),
                });
            }
            // BoringSSL's base64 skips spaces and tabs inside a block.
            body.extend(l.chars().filter(|c| !matches!(c, ' ' | '\t' | '\r')));
        }
        if !closed {
            return Err(PemError::Unterminated {
                label: label.to_string(),
            });
        }
        let der = PEM_BASE64
            .decode(body.as_bytes())
            .map_err(|error| PemError::Base64 {
                label: label.to_string(),
                error,
            })?;
        out.push((label.to_string(), der));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::keys::{self, PublicKey};
    use super::{pem_blocks, x509};

    const ED25519_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBQDCB86ADAgECAhR5QNOtS5asxzI6NAJbd4v9Xr3LUTAFBgMrZXAwFjEUMBIG
A1UEAwwLZXhhbXBsZS5jb20wHhcNMjYxMTIzMDg1MzQ5WhcNMjYxMjIzMDg1MzQ5
WjAWMRQwEgYDVQQDDAtleGFtcGxlLmNvbTAqMAUGAytlcAMhAJxkxRdcJA+VUMOQ
NZV1njEEqAFlkjD1bBPDjzTmEJlwo1MwUTAdBgNVHQ4EFgQUt8N74+ZmFYI10+ja
gkXWS7purnUwHwYDVR0jBBgwFoAUt8N74+ZmFYI10+jagkXWS7purnUwDwYDVR0T
AQH/BAUwAwEB/zAFBgMrZXADQQAmTxBjQXpHq4X60CZ8R8wMwI6SnEKYnvimKMYh
Gj2I4W+fvAW/22HM7S8EJ1pRaXHvUeFHrtPeGuQi0PnbE4wL
-----END CERTIFICATE-----
";
    const ED25519_KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEILfUSG/DOGItSF8IL4uUf9EXplP9tuz6cPSzktnTHCLg
-----END PRIVATE KEY-----
";
    /// SEC1 P-256 key with scalar 1: its public key is the generator.
    const P256_ONE: &str = "307702010104200000000000000000000000000000000000000000000000000000000000000001a00a06082a8648ce3d030107a144034200046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_default())
            .collect()
    }

    fn der(pem: &str) -> Vec<u8> {
        pem_blocks(pem)
            .ok()
            .and_then(|mut blocks| blocks.pop())
            .map(|(_, der)| der)
            .unwrap_or_default()
    }

    #[test]
    fn tls_ed25519_key_matches_its_certificate() -> Result<(), Box<dyn std::error::Error>> {
        let cert = der(ED25519_CERT);
        let spki = x509::check_tbs(&cert)?;
        let public = keys::leaf_public_key(spki)?;
        let private = keys::private_key("PRIVATE KEY", &der(ED25519_KEY))?;
        assert_eq!(public, private);
        Ok(keys::check_match(&public, &private)?)
    }

    #[test]
    fn tls_ed25519_public_key_is_derived_from_the_seed() -> Result<(), &'static str> {
        // RFC 8032, 7.1, test 1.
        let mut pkcs8 = hex("302e020100300506032b657004220420");
        pkcs8.extend(hex(
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        ));
        let want = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
        assert_eq!(
            keys::private_key("PRIVATE KEY", &pkcs8),
            Ok(PublicKey::Ed25519(
                <[u8; 32]>::try_from(want).map_err(|_| "not 32 bytes")?
            ))
        );
        pkcs8[4] = 1; // PKCS#8 version 1
        let Err(err) = keys::private_key("PRIVATE KEY", &pkcs8) else {
            panic!("PKCS#8 version 1 accepted");
        };
        assert_eq!(
            err,
            keys::PrivateKeyError::Malformed {
                label: "PRIVATE KEY".into(),
                reason: keys::KeyFormatError::Pkcs8Version { version: 1 },
            }
        );
        assert_eq!(
            err.to_string(),
            "the PRIVATE KEY block does not hold a PRIVATE KEY: PKCS#8 version 1; BoringSSL only takes version 0"
        );
        Ok(())
    }

    #[test]
    fn tls_a_key_of_another_type_is_a_type_mismatch() {
        let ed = PublicKey::Ed25519([1; 32]);
        let ec = PublicKey::Ec {
            curve: keys::Curve::P256,
            point: vec![4],
        };
        let err = keys::check_match(&ed, &ec).err();
        assert_eq!(
            err,
            Some(keys::MismatchError::Type {
                private: "ECDSA",
                cert: "Ed25519"
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("the private key is ECDSA but certificate 0's key is Ed25519 (BoringSSL KEY_TYPE_MISMATCH)")
        );
    }

    #[test]
    fn tls_ec_public_key_is_derived_when_absent_and_checked_when_present() {
        let full = hex(P256_ONE);
        let Ok(PublicKey::Ec { point, .. }) = keys::private_key("EC PRIVATE KEY", &full) else {
            panic!("P-256 key with scalar 1 does not parse");
        };
        assert_eq!(point, full[full.len() - 65..]);
        // Without the public key ([1]): derived, same point.
        let mut bare = full[..full.len() - 70].to_vec();
        bare[1] -= 70;
        assert_eq!(
            keys::private_key("EC PRIVATE KEY", &bare),
            keys::private_key("EC PRIVATE KEY", &full)
        );
        // Scalar 2 with the generator as its public key: refused.
        let mut wrong = full.clone();
        wrong[38] = 2;
        let Err(err) = keys::private_key("EC PRIVATE KEY", &wrong) else {
            panic!("a public key not the scalar's accepted");
        };
        assert!(
            matches!(
                &err,
                keys::PrivateKeyError::Malformed {
                    reason: keys::KeyFormatError::EcPublicMismatch,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("embedded public key"), "{err}");
        // Scalar 0: refused.
        let mut zero = bare.clone();
        zero[38] = 0;
        assert!(keys::private_key("EC PRIVATE KEY", &zero).is_err());
    }

    #[test]
    fn tls_no_panic_on_truncated_or_altered_input() {
        let inputs = [
            ("c", der(ED25519_CERT)),
            ("PRIVATE KEY", der(ED25519_KEY)),
            ("EC PRIVATE KEY", hex(P256_ONE)),
        ];
        for (what, bytes) in inputs {
            let check = |b: &[u8]| {
                if what == "c" {
                    if let Ok(spki) = x509::check_tbs(b) {
                        let _ = keys::leaf_public_key(spki);
                    }
                } else {
                    for label in ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"] {
                        let _ = keys::private_key(label, b);
                    }
                }
            };
            for n in 0..bytes.len() {
                check(&bytes[..n]);
                for flip in [0x01, 0x80, 0xff] {
                    let mut b = bytes.clone();
                    b[n] ^= flip;
                    check(&b);
                }
            }
        }
    }
}

#[cfg(test)]
mod ref_error_tests {
    use super::*;

    #[test]
    fn a_certificate_ref_error_carries_its_reason_and_text() {
        let unsupported = CertificateRefError::Unsupported {
            group: "example.com".into(),
            kind: "Cert".into(),
            name: "c".into(),
        };
        assert_eq!(unsupported.reason(), reason::INVALID_CERTIFICATE_REF);
        assert_eq!(
            unsupported.to_string(),
            "certificateRef example.com/Cert c: only core Secrets are supported"
        );
        let not_permitted = CertificateRefError::NotPermitted {
            namespace: "certs".into(),
            name: "c".into(),
            from_kind: "Gateway",
            from_namespace: "infra".into(),
        };
        assert_eq!(not_permitted.reason(), reason::REF_NOT_PERMITTED);
        assert_eq!(
            not_permitted.to_string(),
            "certificateRef Secret certs/c: no ReferenceGrant in certs allows Gateways from infra"
        );
        let invalid = CertificateRefError::Invalid {
            namespace: "certs".into(),
            name: "c".into(),
            error: SecretError::Missing("tls.key"),
        };
        assert_eq!(invalid.reason(), reason::INVALID_CERTIFICATE_REF);
        assert_eq!(
            invalid.to_string(),
            "certificateRef Secret certs/c: data[tls.key] is missing"
        );
    }
}
