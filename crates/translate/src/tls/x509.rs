//! What BoringSSL (inside Envoy) refuses in a certificate that x509-parser
//! takes, and the leaf certificate's public key as BoringSSL reads it.

use super::der::{self, Der};

/// What BoringSSL refuses in one certificate's TBSCertificate; the text
/// follows "certificate N: ".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TbsError {
    #[error("is not DER as BoringSSL reads it")]
    Malformed,
    #[error("its version is not a minimally encoded INTEGER")]
    VersionEncoding,
    #[error("its version field is {version} (X.509 v{shown}); BoringSSL only takes v1, v2 and v3", shown = version.saturating_add(1))]
    Version { version: u64 },
    #[error(
        "its serial number is not a minimally encoded DER INTEGER (e.g. a needless leading 00 byte); BoringSSL refuses it"
    )]
    Serial,
    /// `what` names the fields the version does not allow.
    #[error("it is X.509 v{shown} but has {what}; BoringSSL refuses it", shown = version + 1)]
    FieldsForVersion { version: u64, what: &'static str },
}

/// The TBSCertificate rules of BoringSSL's `X509_parse_with_algorithms`
/// (crypto/x509/x_x509.cc), which Envoy applies to every certificate of
/// the chain: the version is v1, v2 or v3 (a minimal INTEGER); the serial
/// number is a minimally encoded INTEGER (negative and zero are fine);
/// issuer/subject unique IDs need v2 or v3, extensions need v3 (RFC 5280
/// 4.1.2.8, 4.1.2.9), and nothing else follows. Returns the
/// SubjectPublicKeyInfo element.
pub fn check_tbs(cert: &[u8]) -> Result<&[u8], TbsError> {
    const MALFORMED: TbsError = TbsError::Malformed;
    let mut outer = Der::new(cert);
    let mut tbs = outer
        .get(der::SEQUENCE)
        .map(Der::new)
        .and_then(|mut c| c.get(der::SEQUENCE))
        .map(Der::new)
        .ok_or(MALFORMED)?;
    let mut version = 0;
    if tbs.peek_tag() == Some(der::explicit(0)) {
        let mut wrapper = tbs.get(der::explicit(0)).map(Der::new).ok_or(MALFORMED)?;
        let v = wrapper
            .uint64()
            .filter(|_| wrapper.is_empty())
            .ok_or(TbsError::VersionEncoding)?;
        if v > 2 {
            return Err(TbsError::Version { version: v });
        }
        version = v;
    }
    let serial = tbs.get(der::INTEGER).ok_or(MALFORMED)?;
    if !der::is_valid_integer(serial) {
        return Err(TbsError::Serial);
    }
    // signature, issuer, validity, subject: x509-parser has read them.
    for _ in 0..4 {
        tbs.get(der::SEQUENCE).ok_or(MALFORMED)?;
    }
    let spki = tbs.element(der::SEQUENCE).ok_or(MALFORMED)?;
    if version >= 1 {
        for uid in [der::implicit(1), der::implicit(2)] {
            tbs.optional(uid).map_err(|()| MALFORMED)?;
        }
    }
    if version >= 2 {
        tbs.optional(der::explicit(3)).map_err(|()| MALFORMED)?;
    }
    if !tbs.is_empty() {
        let what = match tbs.peek_tag() {
            Some(t) if t == der::explicit(3) => "extensions, which need v3",
            Some(t) if t == der::implicit(1) || t == der::implicit(2) => {
                "a unique identifier, which needs v2 or v3"
            }
            _ => "unexpected fields after the public key",
        };
        return Err(TbsError::FieldsForVersion { version, what });
    }
    Ok(spki)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbs_errors_name_the_variant_and_keep_their_text() {
        assert_eq!(check_tbs(b""), Err(TbsError::Malformed));
        assert_eq!(
            TbsError::Malformed.to_string(),
            "is not DER as BoringSSL reads it"
        );
        assert_eq!(
            TbsError::Version { version: 3 }.to_string(),
            "its version field is 3 (X.509 v4); BoringSSL only takes v1, v2 and v3"
        );
        assert_eq!(
            TbsError::FieldsForVersion {
                version: 0,
                what: "extensions, which need v3"
            }
            .to_string(),
            "it is X.509 v1 but has extensions, which need v3; BoringSSL refuses it"
        );
    }
}
