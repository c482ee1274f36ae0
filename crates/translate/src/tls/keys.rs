//! Keys as BoringSSL reads them: the leaf certificate's public key and the
//! private key of `tls.key`, with the public key each implies, so that a
//! key that does not belong to its certificate is refused here instead of
//! by Envoy (`KEY_TYPE_MISMATCH` / `KEY_VALUES_MISMATCH` from
//! `ssl_compare_public_and_private_key`, ssl/ssl_cert.cc).

use std::fmt;

use num_bigint::BigUint;

use super::der::{self, Der};

const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const ED25519: &[u8] = &[0x2b, 0x65, 0x70];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
    P521,
}

impl Curve {
    pub fn from_oid(oid: &[u8]) -> Option<Curve> {
        match oid {
            [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07] => Some(Curve::P256),
            [0x2b, 0x81, 0x04, 0x00, 0x22] => Some(Curve::P384),
            [0x2b, 0x81, 0x04, 0x00, 0x23] => Some(Curve::P521),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
            Curve::P521 => "P-521",
        }
    }

    /// The group order, big-endian: identifies the curve of explicit
    /// (SpecifiedECDomain) parameters.
    fn order(self) -> &'static [u8] {
        match self {
            Curve::P256 => ORDER_P256,
            Curve::P384 => ORDER_P384,
            Curve::P521 => ORDER_P521,
        }
    }

    /// The uncompressed SEC1 encoding of a point given compressed or
    /// uncompressed (`EC_POINT_oct2point`: on the curve, not infinity).
    pub fn point(self, encoded: &[u8]) -> Option<Vec<u8>> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        // BoringSSL takes neither the hybrid nor the compact form.
        if !matches!(encoded.first(), Some(0x02..=0x04)) {
            return None;
        }
        Some(match self {
            Curve::P256 => p256::PublicKey::from_sec1_bytes(encoded)
                .ok()?
                .to_encoded_point(false)
                .as_bytes()
                .to_vec(),
            Curve::P384 => p384::PublicKey::from_sec1_bytes(encoded)
                .ok()?
                .to_encoded_point(false)
                .as_bytes()
                .to_vec(),
            Curve::P521 => p521::PublicKey::from_sec1_bytes(encoded)
                .ok()?
                .to_encoded_point(false)
                .as_bytes()
                .to_vec(),
        })
    }

    /// The public point of a private scalar (big-endian, any length, as
    /// `BN_bin2bn`); `None` unless 0 < scalar < order
    /// (`EC_KEY_set_private_key`).
    fn public_of(self, scalar: &[u8]) -> Option<Vec<u8>> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        let start = scalar.iter().position(|&b| b != 0).unwrap_or(scalar.len());
        let scalar = &scalar[start..];
        macro_rules! derive {
            ($c:ident) => {{
                let mut bytes = $c::FieldBytes::default();
                // Left-pad to the field size; longer values are out of range.
                let start = bytes.len().checked_sub(scalar.len())?;
                bytes[start..].copy_from_slice(scalar);
                let secret = $c::SecretKey::from_bytes(&bytes).ok()?;
                secret
                    .public_key()
                    .to_encoded_point(false)
                    .as_bytes()
                    .to_vec()
            }};
        }
        Some(match self {
            Curve::P256 => derive!(p256),
            Curve::P384 => derive!(p384),
            Curve::P521 => derive!(p521),
        })
    }
}

impl fmt::Display for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the private key does not belong to the leaf certificate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MismatchError {
    #[error(
        "the private key is on {private} but certificate 0's key is on {cert} (BoringSSL KEY_VALUES_MISMATCH)"
    )]
    Curve { private: Curve, cert: Curve },
    #[error("the private key is {private} but certificate 0's key is {cert} (BoringSSL KEY_TYPE_MISMATCH)")]
    Type {
        private: &'static str,
        cert: &'static str,
    },
    #[error(
        "the {kind} private key does not match certificate 0's public key (BoringSSL KEY_VALUES_MISMATCH)"
    )]
    Value { kind: &'static str },
}

/// What BoringSSL's `rsa_check_public_key` refuses in an RSA public key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RsaPublicError {
    #[error("the RSA modulus has {bits} bits; BoringSSL takes at most 16384")]
    ModulusTooLarge { bits: usize },
    #[error("the RSA modulus has {bits} bits; BoringSSL takes at least 512")]
    ModulusTooSmall { bits: usize },
    #[error("the RSA modulus is even; BoringSSL refuses it")]
    EvenModulus,
    #[error("the RSA public exponent is not an odd number greater than 1; BoringSSL refuses it")]
    Exponent,
    #[error("the RSA public exponent has {bits} bits; BoringSSL takes at most 33")]
    ExponentTooLarge { bits: usize },
}

/// Why the leaf certificate's public key cannot be served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertKeyError {
    #[error("the certificate's SubjectPublicKeyInfo is not DER as BoringSSL reads it")]
    Malformed,
    #[error("the certificate's public key BIT STRING has unused bits")]
    UnusedBits,
    #[error("the certificate's RSA key parameters are not NULL")]
    RsaParameters,
    #[error("the certificate's RSA public key does not parse")]
    RsaSyntax,
    #[error("the certificate's RSA key has {bits} bits; Envoy only takes RSA keys of 2048 bits or more")]
    RsaTooShort { bits: usize },
    #[error("the certificate's key: {0}")]
    Rsa(#[source] RsaPublicError),
    /// `curve` is the dotted OID, empty when the parameters are no OID.
    #[error("the certificate's ECDSA key is on curve {curve:?}; Envoy only takes P-256, P-384 and P-521")]
    EcCurve { curve: String },
    #[error("the certificate's ECDSA public key is not a valid {curve} point")]
    EcPoint { curve: Curve },
    #[error("the certificate's Ed25519 key has parameters")]
    Ed25519Parameters,
    #[error("the certificate's Ed25519 public key is not 32 bytes")]
    Ed25519Length,
    #[error(
        "the certificate's key algorithm {oid} is not supported by Envoy (RSA, ECDSA P-256/P-384/P-521 or Ed25519)"
    )]
    Algorithm { oid: String },
}

/// Why `tls.key` holds no private key BoringSSL would load.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrivateKeyError {
    #[error("the {label} block does not hold a {label}: {reason}")]
    Malformed {
        label: String,
        #[source]
        reason: KeyFormatError,
    },
    #[error("unknown PEM label {label:?} (expected PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")]
    Label { label: String },
}

/// What is wrong inside a PKCS#8, SEC1 or PKCS#1 private key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("not a DER SEQUENCE")]
    NotSequence,
    #[error("PKCS#8 version {version}; BoringSSL only takes version 0")]
    Pkcs8Version { version: u64 },
    #[error("not PKCS#8 (no version INTEGER)")]
    Pkcs8NoVersion,
    #[error("not PKCS#8 (no algorithm)")]
    Pkcs8NoAlgorithm,
    #[error("not PKCS#8 (no algorithm OID)")]
    Pkcs8NoAlgorithmOid,
    #[error("not PKCS#8 (no private key OCTET STRING)")]
    Pkcs8NoKey,
    #[error("PKCS#8 attributes are not DER")]
    Pkcs8Attributes,
    #[error("PKCS#8 has fields after the private key and attributes")]
    Pkcs8Trailing,
    #[error("private key algorithm {oid} is not RSA, ECDSA or Ed25519")]
    Algorithm { oid: String },
    #[error("the RSA key's algorithm parameters are not NULL")]
    RsaParameters,
    #[error("the EC key's algorithm parameters have trailing data")]
    EcAlgorithmTrailing,
    #[error("the Ed25519 key has algorithm parameters")]
    Ed25519Parameters,
    #[error("the Ed25519 key is not an OCTET STRING")]
    Ed25519NotOctetString,
    #[error("the Ed25519 key is not 32 bytes")]
    Ed25519Length,
    #[error("the EC key's parameters are not a named curve")]
    EcNotNamedCurve,
    #[error("the EC key is on curve {oid:?}; Envoy only takes P-256, P-384 and P-521")]
    EcCurve { oid: String },
    #[error("the EC key's explicit parameters do not parse")]
    EcExplicitSyntax,
    #[error("the EC key's explicit parameters are not P-256, P-384 or P-521")]
    EcExplicitCurve,
    #[error("not an ECPrivateKey (version is not 1)")]
    Sec1Version,
    #[error("not an ECPrivateKey (no private key OCTET STRING)")]
    Sec1NoKey,
    #[error("the EC key's parameters are not DER")]
    EcParametersSyntax,
    #[error("the EC key's parameters have trailing data")]
    EcParametersTrailing,
    #[error("the EC key's parameters name {inner} but its PKCS#8 algorithm {outer}")]
    EcCurveDisagrees { inner: Curve, outer: Curve },
    #[error("the EC key names no curve")]
    EcNoCurve,
    #[error("the EC private key is not a valid {curve} scalar (zero or not below the group order)")]
    EcScalar { curve: Curve },
    #[error("the EC key's public key is not DER")]
    EcPublicSyntax,
    #[error("the EC key's public key is not a BIT STRING")]
    EcPublicNotBitString,
    #[error("the EC key's public key BIT STRING has unused bits")]
    EcPublicUnusedBits,
    #[error("the EC key's public key is not a valid {curve} point")]
    EcPublicPoint { curve: Curve },
    #[error("the ECPrivateKey has trailing data")]
    Sec1Trailing,
    #[error(
        "the EC key's embedded public key is not the one of its private scalar (BoringSSL EC_KEY_check_key)"
    )]
    EcPublicMismatch,
    #[error("RSAPrivateKey version {version}; BoringSSL only takes two-prime keys (version 0)")]
    RsaVersion { version: u64 },
    #[error("not an RSAPrivateKey (no version INTEGER)")]
    RsaNoVersion,
    #[error("not an RSAPrivateKey (expected eight non-negative minimal INTEGERs)")]
    RsaIntegers,
    #[error("the RSAPrivateKey has trailing data")]
    RsaTrailing,
    #[error("the private key: {0}")]
    RsaPublic(#[source] RsaPublicError),
    /// `what` says which of `RSA_check_key`'s relations fails.
    #[error("the RSA private key is inconsistent: {what}")]
    RsaInconsistent { what: &'static str },
}

/// A public key, as compared by `EVP_PKEY_eq`: RSA by modulus and
/// exponent, EC by curve and point, Ed25519 by its 32 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    Rsa { n: Vec<u8>, e: Vec<u8> },
    Ec { curve: Curve, point: Vec<u8> },
    Ed25519([u8; 32]),
}

impl PublicKey {
    fn kind(&self) -> &'static str {
        match self {
            PublicKey::Rsa { .. } => "RSA",
            PublicKey::Ec { .. } => "ECDSA",
            PublicKey::Ed25519(_) => "Ed25519",
        }
    }
}

/// Whether the private key (given as its public key) belongs to the leaf
/// certificate's key.
pub fn check_match(cert: &PublicKey, private: &PublicKey) -> Result<(), MismatchError> {
    match (cert, private) {
        (a, b) if a == b => Ok(()),
        (PublicKey::Ec { curve: a, .. }, PublicKey::Ec { curve: b, .. }) if a != b => {
            Err(MismatchError::Curve {
                private: *b,
                cert: *a,
            })
        }
        (a, b) if a.kind() != b.kind() => Err(MismatchError::Type {
            private: b.kind(),
            cert: a.kind(),
        }),
        (a, _) => Err(MismatchError::Value { kind: a.kind() }),
    }
}

/// The RSA public key checks of BoringSSL's `rsa_check_public_key`
/// (crypto/fipsmodule/rsa/rsa_impl.cc.inc): an odd modulus of 512 to
/// 16384 bits, an odd exponent of 2 to 33 bits.
fn check_rsa_public(n: &[u8], e: &[u8]) -> Result<(), RsaPublicError> {
    let n_bits = der::bits(n);
    if n_bits > 16384 {
        return Err(RsaPublicError::ModulusTooLarge { bits: n_bits });
    }
    if n_bits < 512 {
        return Err(RsaPublicError::ModulusTooSmall { bits: n_bits });
    }
    if n.last().is_none_or(|b| b & 1 == 0) {
        return Err(RsaPublicError::EvenModulus);
    }
    let e_bits = der::bits(e);
    if e_bits < 2 || e.last().is_none_or(|b| b & 1 == 0) {
        return Err(RsaPublicError::Exponent);
    }
    if e_bits > 33 {
        return Err(RsaPublicError::ExponentTooLarge { bits: e_bits });
    }
    Ok(())
}

/// The SubjectPublicKeyInfo as `EVP_PKEY_from_subject_public_key_info`
/// reads it, for the algorithms Envoy serves with (RSA, ECDSA on
/// P-256/P-384/P-521, Ed25519); anything else fails "Failed to load
/// certificate chain" (a NACK of the listener).
pub fn leaf_public_key(spki: &[u8]) -> Result<PublicKey, CertKeyError> {
    const MALFORMED: CertKeyError = CertKeyError::Malformed;
    let mut outer = Der::new(spki);
    let mut spki = outer.get(der::SEQUENCE).map(Der::new).ok_or(MALFORMED)?;
    let mut algorithm = spki.get(der::SEQUENCE).map(Der::new).ok_or(MALFORMED)?;
    let oid = algorithm.get(der::OID).ok_or(MALFORMED)?;
    let key = spki.get(der::BIT_STRING).ok_or(MALFORMED)?;
    if !spki.is_empty() || !outer.is_empty() {
        return Err(MALFORMED);
    }
    let key = match key {
        [0, key @ ..] => key,
        _ => return Err(CertKeyError::UnusedBits),
    };
    match oid {
        RSA_ENCRYPTION => {
            const BAD: CertKeyError = CertKeyError::RsaSyntax;
            // The parameters must be NULL (RFC 3279 2.3.1).
            if algorithm.get(der::NULL) != Some(&[]) || !algorithm.is_empty() {
                return Err(CertKeyError::RsaParameters);
            }
            let mut key = Der::new(key);
            let mut seq = key.get(der::SEQUENCE).map(Der::new).ok_or(BAD)?;
            let n = seq.unsigned().ok_or(BAD)?;
            let e = seq.unsigned().ok_or(BAD)?;
            if !seq.is_empty() || !key.is_empty() {
                return Err(BAD);
            }
            // Envoy's own rule, checked before BoringSSL's.
            let bits = der::bits(n);
            if bits < 2048 {
                return Err(CertKeyError::RsaTooShort { bits });
            }
            check_rsa_public(n, e).map_err(CertKeyError::Rsa)?;
            Ok(PublicKey::Rsa {
                n: n.to_vec(),
                e: e.to_vec(),
            })
        }
        EC_PUBLIC_KEY => {
            // A named curve only (`ec_key_parse_curve_name`).
            let named = algorithm.get(der::OID).filter(|_| algorithm.is_empty());
            let Some(curve) = named.and_then(Curve::from_oid) else {
                let shown = named.map(oid_string).unwrap_or_default();
                return Err(CertKeyError::EcCurve { curve: shown });
            };
            let point = curve.point(key).ok_or(CertKeyError::EcPoint { curve })?;
            Ok(PublicKey::Ec { curve, point })
        }
        ED25519 => {
            if !algorithm.is_empty() {
                return Err(CertKeyError::Ed25519Parameters);
            }
            let key = <[u8; 32]>::try_from(key).map_err(|_| CertKeyError::Ed25519Length)?;
            Ok(PublicKey::Ed25519(key))
        }
        other => Err(CertKeyError::Algorithm {
            oid: oid_string(other),
        }),
    }
}

fn oid_string(der: &[u8]) -> String {
    x509_parser::der_parser::oid::Oid::new(der.into()).to_id_string()
}

/// The private key of a PEM block with `label`, read as BoringSSL's
/// `PEM_read_bio_PrivateKey` does (crypto/pem/pem_pkey.cc): `PRIVATE KEY`
/// is PKCS#8; `RSA PRIVATE KEY` is PKCS#1 and `EC PRIVATE KEY` SEC1, each
/// falling back to PKCS#8 of the same type (`d2i_PrivateKey`,
/// crypto/evp/evp_asn1.cc). Returns the public key the private key
/// implies.
pub fn private_key(label: &str, der: &[u8]) -> Result<PublicKey, PrivateKeyError> {
    let malformed = |reason: KeyFormatError| PrivateKeyError::Malformed {
        label: label.to_string(),
        reason,
    };
    match label {
        "PRIVATE KEY" => pkcs8(der).map_err(malformed),
        "RSA PRIVATE KEY" => rsa_private(der, Nested::No).or_else(|why| match pkcs8(der) {
            Ok(key @ PublicKey::Rsa { .. }) => Ok(key),
            _ => Err(malformed(why)),
        }),
        "EC PRIVATE KEY" => sec1(der, None, Nested::No).or_else(|why| match pkcs8(der) {
            Ok(key @ PublicKey::Ec { .. }) => Ok(key),
            _ => Err(malformed(why)),
        }),
        other => Err(PrivateKeyError::Label {
            label: other.to_string(),
        }),
    }
}

/// Where a PKCS#1 or SEC1 key is read: at the top of a PEM block, bytes
/// after it are ignored (the `d2i_*` functions stop after one element);
/// inside PKCS#8 the key must fill its OCTET STRING.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nested {
    No,
    InPkcs8,
}

/// PKCS#8 PrivateKeyInfo (`EVP_PKEY_from_private_key_info`): version 0
/// (a v2 OneAsymmetricKey with its public key is refused), an algorithm,
/// the key, optional attributes; bytes after it in the PEM block are
/// ignored, as `d2i_PKCS8_PRIV_KEY_INFO` ignores them.
fn pkcs8(der: &[u8]) -> Result<PublicKey, KeyFormatError> {
    let mut outer = Der::new(der);
    let mut info = outer
        .get(der::SEQUENCE)
        .map(Der::new)
        .ok_or(KeyFormatError::NotSequence)?;
    match info.uint64() {
        Some(0) => {}
        Some(version) => return Err(KeyFormatError::Pkcs8Version { version }),
        None => return Err(KeyFormatError::Pkcs8NoVersion),
    }
    let mut algorithm = info
        .get(der::SEQUENCE)
        .map(Der::new)
        .ok_or(KeyFormatError::Pkcs8NoAlgorithm)?;
    let oid = algorithm
        .get(der::OID)
        .ok_or(KeyFormatError::Pkcs8NoAlgorithmOid)?;
    let key = info.get(der::OCTET_STRING).ok_or(KeyFormatError::Pkcs8NoKey)?;
    info.optional(der::explicit(0))
        .map_err(|()| KeyFormatError::Pkcs8Attributes)?;
    if !info.is_empty() {
        return Err(KeyFormatError::Pkcs8Trailing);
    }
    match oid {
        RSA_ENCRYPTION => {
            if algorithm.get(der::NULL) != Some(&[]) || !algorithm.is_empty() {
                return Err(KeyFormatError::RsaParameters);
            }
            rsa_private(key, Nested::InPkcs8)
        }
        EC_PUBLIC_KEY => {
            let curve = ec_parameters(&mut algorithm)?;
            if !algorithm.is_empty() {
                return Err(KeyFormatError::EcAlgorithmTrailing);
            }
            sec1(key, Some(curve), Nested::InPkcs8)
        }
        ED25519 => {
            if !algorithm.is_empty() {
                return Err(KeyFormatError::Ed25519Parameters);
            }
            let mut key = Der::new(key);
            let seed = key
                .get(der::OCTET_STRING)
                .filter(|_| key.is_empty())
                .ok_or(KeyFormatError::Ed25519NotOctetString)?;
            let seed = <[u8; 32]>::try_from(seed).map_err(|_| KeyFormatError::Ed25519Length)?;
            let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
            Ok(PublicKey::Ed25519(public.to_bytes()))
        }
        other => Err(KeyFormatError::Algorithm {
            oid: oid_string(other),
        }),
    }
}

/// A named curve or explicit parameters of a known curve
/// (`ec_key_parse_parameters`). Explicit parameters are recognised by
/// their group order alone; BoringSSL compares every field.
fn ec_parameters(params: &mut Der<'_>) -> Result<Curve, KeyFormatError> {
    if params.peek_tag() != Some(der::SEQUENCE) {
        let oid = params.get(der::OID).ok_or(KeyFormatError::EcNotNamedCurve)?;
        return Curve::from_oid(oid).ok_or_else(|| KeyFormatError::EcCurve { oid: oid_string(oid) });
    }
    const BAD: KeyFormatError = KeyFormatError::EcExplicitSyntax;
    let mut explicit = params.get(der::SEQUENCE).map(Der::new).ok_or(BAD)?;
    explicit.uint64().filter(|&v| v == 1).ok_or(BAD)?;
    explicit.get(der::SEQUENCE).ok_or(BAD)?; // fieldID
    explicit.get(der::SEQUENCE).ok_or(BAD)?; // curve
    explicit.get(der::OCTET_STRING).ok_or(BAD)?; // base
    let order = explicit.unsigned().ok_or(BAD)?;
    [Curve::P256, Curve::P384, Curve::P521]
        .into_iter()
        .find(|c| c.order() == order)
        .ok_or(KeyFormatError::EcExplicitCurve)
}

/// SEC1 ECPrivateKey (`EC_KEY_parse_private_key`, crypto/ec/ec_asn1.cc):
/// version 1, the scalar, the curve (here or from PKCS#8; both must
/// agree), an optional public key that must be the scalar's
/// (`EC_KEY_check_key`), which is derived when absent.
fn sec1(der: &[u8], outer: Option<Curve>, nested: Nested) -> Result<PublicKey, KeyFormatError> {
    let mut input = Der::new(der);
    let mut key = input
        .get(der::SEQUENCE)
        .map(Der::new)
        .ok_or(KeyFormatError::NotSequence)?;
    if key.uint64() != Some(1) {
        return Err(KeyFormatError::Sec1Version);
    }
    let scalar = key.get(der::OCTET_STRING).ok_or(KeyFormatError::Sec1NoKey)?;
    let inner = match key.optional(der::explicit(0)) {
        Err(()) => return Err(KeyFormatError::EcParametersSyntax),
        Ok(None) => None,
        Ok(Some(params)) => {
            let mut params = Der::new(params);
            let curve = ec_parameters(&mut params)?;
            if !params.is_empty() {
                return Err(KeyFormatError::EcParametersTrailing);
            }
            Some(curve)
        }
    };
    let curve = match (outer, inner) {
        (Some(a), Some(b)) if a != b => {
            return Err(KeyFormatError::EcCurveDisagrees { inner: b, outer: a });
        }
        (Some(c), _) | (None, Some(c)) => c,
        (None, None) => return Err(KeyFormatError::EcNoCurve),
    };
    let derived = curve
        .public_of(scalar)
        .ok_or(KeyFormatError::EcScalar { curve })?;
    let embedded = match key.optional(der::explicit(1)) {
        Err(()) => return Err(KeyFormatError::EcPublicSyntax),
        Ok(None) => None,
        Ok(Some(wrapper)) => {
            let mut wrapper = Der::new(wrapper);
            let bits = wrapper
                .get(der::BIT_STRING)
                .filter(|_| wrapper.is_empty())
                .ok_or(KeyFormatError::EcPublicNotBitString)?;
            let point = match bits {
                [0, point @ ..] => point,
                _ => return Err(KeyFormatError::EcPublicUnusedBits),
            };
            Some(
                curve
                    .point(point)
                    .ok_or(KeyFormatError::EcPublicPoint { curve })?,
            )
        }
    };
    if !key.is_empty() || (nested == Nested::InPkcs8 && !input.is_empty()) {
        return Err(KeyFormatError::Sec1Trailing);
    }
    if embedded.is_some_and(|p| p != derived) {
        return Err(KeyFormatError::EcPublicMismatch);
    }
    Ok(PublicKey::Ec {
        curve,
        point: derived,
    })
}

/// PKCS#1 RSAPrivateKey (`RSA_parse_private_key`, crypto/rsa/rsa_asn1.cc,
/// then `RSA_check_key`): two-prime version 0, eight non-negative minimal
/// INTEGERs that agree with each other.
fn rsa_private(der: &[u8], nested: Nested) -> Result<PublicKey, KeyFormatError> {
    let mut input = Der::new(der);
    let mut key = input
        .get(der::SEQUENCE)
        .map(Der::new)
        .ok_or(KeyFormatError::NotSequence)?;
    match key.uint64() {
        Some(0) => {}
        Some(version) => return Err(KeyFormatError::RsaVersion { version }),
        None => return Err(KeyFormatError::RsaNoVersion),
    }
    let mut fields = [&[][..]; 8];
    for f in &mut fields {
        *f = key.unsigned().ok_or(KeyFormatError::RsaIntegers)?;
    }
    if !key.is_empty() || (nested == Nested::InPkcs8 && !input.is_empty()) {
        return Err(KeyFormatError::RsaTrailing);
    }
    let [n, e, d, p, q, dmp1, dmq1, iqmp] = fields;
    check_rsa_public(n, e).map_err(KeyFormatError::RsaPublic)?;
    let big = BigUint::from_bytes_be;
    let (n_, e_, d_, p_, q_) = (big(n), big(e), big(d), big(p), big(q));
    let inconsistent = |what: &'static str| KeyFormatError::RsaInconsistent { what };
    if d_ >= n_ {
        return Err(inconsistent("d is not below n"));
    }
    if p_ >= n_ || q_ >= n_ || &p_ * &q_ != n_ {
        return Err(inconsistent("p * q is not n"));
    }
    let one = BigUint::from(1u8);
    // p and q are odd here (n is odd and their product), so p - 1 >= 0.
    let (pm1, qm1) = (&p_ - &one, &q_ - &one);
    let de = &d_ * &e_;
    if pm1 == BigUint::ZERO || qm1 == BigUint::ZERO || &de % &pm1 != one || &de % &qm1 != one {
        return Err(inconsistent("d * e is not 1 mod p - 1 and q - 1"));
    }
    let inverse = |a: &BigUint, ainv: &BigUint, m: &BigUint| ainv < m && (a * ainv) % m == one;
    if !inverse(&e_, &big(dmp1), &pm1) || !inverse(&e_, &big(dmq1), &qm1) || !inverse(&q_, &big(iqmp), &p_) {
        return Err(inconsistent("the CRT values are incorrect"));
    }
    Ok(PublicKey::Rsa {
        n: n.to_vec(),
        e: e.to_vec(),
    })
}

const ORDER_P256: &[u8] = &[
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc,
    0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];
const ORDER_P384: &[u8] = &[
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc7, 0x63, 0x4d, 0x81, 0xf4, 0x37, 0x2d, 0xdf, 0x58, 0x1a,
    0x0d, 0xb2, 0x48, 0xb0, 0xa7, 0x7a, 0xec, 0xec, 0x19, 0x6a, 0xcc, 0xc5, 0x29, 0x73,
];
const ORDER_P521: &[u8] = &[
    0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfa,
    0x51, 0x86, 0x87, 0x83, 0xbf, 0x2f, 0x96, 0x6b, 0x7f, 0xcc, 0x01, 0x48, 0xf7, 0x09, 0xa5, 0xd0, 0x3b,
    0xb5, 0xc9, 0xb8, 0x89, 0x9c, 0x47, 0xae, 0xbb, 0x6f, 0xb7, 0x1e, 0x91, 0x38, 0x64, 0x09,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_curve_orders_are_exact() {
        for curve in [Curve::P256, Curve::P384, Curve::P521] {
            let order = curve.order();
            assert!(curve.public_of(order).is_none(), "{curve:?}");
            let mut below = order.to_vec();
            if let Some(last) = below.last_mut() {
                *last -= 1;
            }
            assert!(curve.public_of(&below).is_some(), "{curve:?}");
            // Leading zeros are fine (BN_bin2bn), a longer value is not.
            let mut padded = vec![0, 0];
            padded.extend_from_slice(&below);
            assert!(curve.public_of(&padded).is_some(), "{curve:?}");
            assert!(curve.public_of(&[1; 70]).is_none(), "{curve:?}");
        }
    }
}
