//! The certificate logic of Kubernetes mode's xDS CA, without Kubernetes
//! I/O (that is [`crate::xds_issuer`]): issue a CA, a server certificate
//! with DNS SANs, a client certificate with a Gateway's identity URI SAN
//! ([`crate::names::xds_identity`]), decide whether a certificate must be
//! issued again, and how the CA itself rotates.
//!
//! # Data model
//!
//! A [`CaSet`] is what the CA Secret holds: the `current` CA (certificate
//! and key) that signs, optionally a `next` CA (generated ahead of the
//! current one's expiry, already trusted, not yet signing) and a
//! `previous` CA certificate (no key: it signs nothing any more, but
//! certificates it signed are still trusted until they are re-issued).
//! The trust bundle ([`CaSet::bundle`]) is all three; it is what the xDS
//! server checks client certificates against and what each client Secret's
//! `ca.crt` carries (the Envoy checks the server's certificate with it).
//!
//! # CA rotation ([`plan_rotation`])
//!
//! 1. `current` has less than `ca_renew_before` left: a `next` CA is
//!    generated and added to the bundle (every Secret and the server pick
//!    up the new bundle; nothing is signed by it yet).
//! 2. `next` has been in the bundle for `ca_renew_before / 2`: it becomes
//!    `current`, the old one `previous`; every certificate is re-issued
//!    (its issuer is no longer the signing CA).
//! 3. `previous` is dropped once it has expired (certificates are never
//!    issued beyond their signer's expiry, so nothing it signed is valid
//!    then either).
//!
//! All times are passed in (`now`), so the logic is tested without
//! waiting.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};

/// Keys of the CA Secret (type `Opaque`: it stays out of the provider's
/// watch of `kubernetes.io/tls` Secrets, which listeners may reference).
pub const CA_CERT_KEY: &str = "ca.crt";
pub const CA_KEY_KEY: &str = "ca.key";
pub const NEXT_CERT_KEY: &str = "next.crt";
pub const NEXT_KEY_KEY: &str = "next.key";
pub const PREVIOUS_CERT_KEY: &str = "previous.crt";

/// Certificates are valid from this long before they are issued, so a
/// peer whose clock is a little behind accepts them.
const BACKDATE: Duration = Duration::from_secs(60);

/// Lifetimes and renewal margins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub ca_validity: Duration,
    /// A `next` CA is generated when the current one has less than this.
    pub ca_renew_before: Duration,
    /// Server and client certificates.
    pub cert_validity: Duration,
    /// A certificate is issued again when it has less than this left.
    pub cert_renew_before: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        const DAY: u64 = 86_400;
        Self {
            ca_validity: Duration::from_secs(365 * DAY),
            ca_renew_before: Duration::from_secs(30 * DAY),
            cert_validity: Duration::from_secs(DAY),
            cert_renew_before: Duration::from_secs(8 * 3600),
        }
    }
}

/// Why a certificate could not be issued or read; `what` names the object
/// and field (e.g. `Secret portcullis/portcullis-xds-ca ca.key`).
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("{what}: cannot generate a key: {message}")]
    Key { what: String, message: String },
    #[error("{what}: cannot issue the certificate: {message}")]
    Issue { what: String, message: String },
    #[error("{what}: not a PEM certificate: {message}")]
    Certificate { what: String, message: String },
    #[error("{what}: not a PEM private key: {message}")]
    PrivateKey { what: String, message: String },
    #[error("{what}: missing")]
    Missing { what: String },
    #[error("invalid timing: {message}")]
    Timing { message: String },
}

impl Timing {
    /// Margins must be shorter than what they are margins of, or every
    /// certificate would be due at once, forever.
    pub fn validate(&self) -> Result<(), CaError> {
        if self.cert_renew_before >= self.cert_validity {
            return Err(CaError::Timing {
                message: format!(
                    "certificate renew-before ({:?}) must be shorter than its validity ({:?})",
                    self.cert_renew_before, self.cert_validity
                ),
            });
        }
        if self.ca_renew_before >= self.ca_validity {
            return Err(CaError::Timing {
                message: format!(
                    "CA renew-before ({:?}) must be shorter than its validity ({:?})",
                    self.ca_renew_before, self.ca_validity
                ),
            });
        }
        if self.cert_validity > self.ca_renew_before / 2 {
            // Else a certificate issued just before the promotion of a new
            // CA could outlive the old CA's place in the bundle.
            return Err(CaError::Timing {
                message: format!(
                    "certificate validity ({:?}) must be at most half the CA renew-before ({:?})",
                    self.cert_validity, self.ca_renew_before
                ),
            });
        }
        Ok(())
    }
}

fn offset(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn system_time(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64)
}

/// What a PEM certificate says, as far as issuing is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub subject: String,
    pub uris: Vec<String>,
    pub dns_names: Vec<String>,
    der: Vec<u8>,
}

/// Reads the first certificate of `pem`; `what` names it in errors.
pub fn inspect(pem: &str, what: &str) -> Result<CertInfo, CaError> {
    let err = |message: String| CaError::Certificate {
        what: what.to_string(),
        message,
    };
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| err(e.to_string()))?;
    let (_, c) = x509_parser::parse_x509_certificate(&p.contents).map_err(|e| err(e.to_string()))?;
    let mut uris = Vec::new();
    let mut dns_names = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::URI(u) => uris.push((*u).to_string()),
                x509_parser::extensions::GeneralName::DNSName(d) => dns_names.push((*d).to_string()),
                _ => {}
            }
        }
    }
    Ok(CertInfo {
        not_before: system_time(c.validity().not_before.timestamp()),
        not_after: system_time(c.validity().not_after.timestamp()),
        subject: c.subject().to_string(),
        uris,
        dns_names,
        der: p.contents.clone(),
    })
}

/// A CA that can sign.
#[derive(Clone, Debug)]
pub struct Ca {
    pub cert_pem: String,
    key_pem: String,
    pub info: CertInfo,
}

/// A certificate issued by a [`Ca`], with its key.
#[derive(Clone, Debug)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub not_after: SystemTime,
}

fn new_key(what: &str) -> Result<KeyPair, CaError> {
    KeyPair::generate().map_err(|e| CaError::Key {
        what: what.to_string(),
        message: e.to_string(),
    })
}

impl Ca {
    /// A new self-signed CA valid from `now` for `validity`. Its common
    /// name carries the time (nanoseconds), so two CAs never share a
    /// subject (issuer checks compare signatures, logs show subjects).
    pub fn generate(now: SystemTime, validity: Duration) -> Result<Ca, CaError> {
        let what = "xDS CA";
        let key = new_key(what)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "portcullis");
        let stamp = now.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        dn.push(DnType::CommonName, format!("portcullis xDS CA {stamp}"));
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = offset(now.checked_sub(BACKDATE).unwrap_or(now));
        params.not_after = offset(now + validity);
        let cert = params.self_signed(&key).map_err(|e| CaError::Issue {
            what: what.to_string(),
            message: e.to_string(),
        })?;
        let cert_pem = cert.pem();
        Ok(Ca {
            info: inspect(&cert_pem, what)?,
            cert_pem,
            key_pem: key.serialize_pem(),
        })
    }

    /// A CA from its PEM certificate and key (`what`: where they were read).
    pub fn from_pem(cert_pem: &str, key_pem: &str, what: &str) -> Result<Ca, CaError> {
        let info = inspect(cert_pem, &format!("{what} certificate"))?;
        let ca = Ca {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            info,
        };
        // Refuse a key that is not this certificate's now rather than
        // sign certificates nobody can verify.
        ca.issuer(what)?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| CaError::PrivateKey {
            what: format!("{what} key"),
            message: e.to_string(),
        })?;
        let matches = x509_parser::parse_x509_certificate(&ca.info.der)
            .is_ok_and(|(_, c)| c.public_key().subject_public_key.data.as_ref() == key.public_key_raw());
        if !matches {
            return Err(CaError::PrivateKey {
                what: format!("{what} key"),
                message: "it is not the key of the certificate".into(),
            });
        }
        Ok(ca)
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    fn issuer(&self, what: &str) -> Result<Issuer<'static, KeyPair>, CaError> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(|e| CaError::PrivateKey {
            what: format!("{what} key"),
            message: e.to_string(),
        })?;
        Issuer::from_ca_cert_pem(&self.cert_pem, key).map_err(|e| CaError::Certificate {
            what: format!("{what} certificate"),
            message: e.to_string(),
        })
    }

    /// Whether `cert` (from [`inspect`]) was signed by this CA.
    pub fn signed(&self, cert: &CertInfo) -> bool {
        let Ok((_, ca)) = x509_parser::parse_x509_certificate(&self.info.der) else {
            return false;
        };
        let Ok((_, c)) = x509_parser::parse_x509_certificate(&cert.der) else {
            return false;
        };
        c.verify_signature(Some(ca.public_key())).is_ok()
    }

    fn issue(
        &self,
        sans: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
        now: SystemTime,
        validity: Duration,
        what: &str,
    ) -> Result<Issued, CaError> {
        let key = new_key(what)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "portcullis");
        params.distinguished_name = dn;
        params.subject_alt_names = sans;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now.checked_sub(BACKDATE).unwrap_or(now));
        // Never beyond the signer: a rotated-out CA leaves nothing valid.
        let not_after = (now + validity).min(self.info.not_after);
        params.not_after = offset(not_after);
        let cert = params
            .signed_by(&key, &self.issuer(what)?)
            .map_err(|e| CaError::Issue {
                what: what.to_string(),
                message: e.to_string(),
            })?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            not_after: system_time(offset(not_after).unix_timestamp()),
        })
    }

    /// An xDS server certificate for `dns_names` (server auth only).
    pub fn issue_server(
        &self,
        dns_names: &[String],
        now: SystemTime,
        validity: Duration,
    ) -> Result<Issued, CaError> {
        let what = "xDS server certificate";
        let sans = dns_names
            .iter()
            .map(|n| {
                n.clone()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(|e: rcgen::Error| CaError::Issue {
                        what: format!("{what} DNS name {n:?}"),
                        message: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.issue(sans, ExtendedKeyUsagePurpose::ServerAuth, now, validity, what)
    }

    /// A client certificate carrying `identity` as its one URI SAN (client
    /// auth only: it cannot serve as an xDS server certificate).
    pub fn issue_client(
        &self,
        identity: &str,
        now: SystemTime,
        validity: Duration,
    ) -> Result<Issued, CaError> {
        let what = format!("xDS client certificate {identity}");
        let uri = identity
            .to_string()
            .try_into()
            .map_err(|e: rcgen::Error| CaError::Issue {
                what: what.clone(),
                message: e.to_string(),
            })?;
        self.issue(
            vec![SanType::URI(uri)],
            ExtendedKeyUsagePurpose::ClientAuth,
            now,
            validity,
            &what,
        )
    }
}

/// What the CA Secret holds (see the module documentation).
#[derive(Clone, Debug)]
pub struct CaSet {
    pub current: Ca,
    pub next: Option<Ca>,
    /// Certificate only.
    pub previous: Option<String>,
}

fn text(data: &BTreeMap<String, Vec<u8>>, key: &str, what: &str) -> Result<Option<String>, CaError> {
    data.get(key)
        .map(|b| {
            String::from_utf8(b.clone()).map_err(|e| CaError::Certificate {
                what: format!("{what} {key}"),
                message: e.to_string(),
            })
        })
        .transpose()
}

impl CaSet {
    pub fn new(current: Ca) -> Self {
        Self {
            current,
            next: None,
            previous: None,
        }
    }

    /// The trust bundle: current, next, previous (PEM, concatenated).
    pub fn bundle(&self) -> String {
        let mut out = self.current.cert_pem.clone();
        for pem in self
            .next
            .iter()
            .map(|n| &n.cert_pem)
            .chain(self.previous.as_ref())
        {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(pem);
        }
        out
    }

    /// The Secret's `data`.
    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        let mut d = BTreeMap::new();
        d.insert(CA_CERT_KEY.into(), self.current.cert_pem.clone().into_bytes());
        d.insert(CA_KEY_KEY.into(), self.current.key_pem.clone().into_bytes());
        if let Some(n) = &self.next {
            d.insert(NEXT_CERT_KEY.into(), n.cert_pem.clone().into_bytes());
            d.insert(NEXT_KEY_KEY.into(), n.key_pem.clone().into_bytes());
        }
        if let Some(p) = &self.previous {
            d.insert(PREVIOUS_CERT_KEY.into(), p.clone().into_bytes());
        }
        d
    }

    /// Reads the Secret's `data`; `what` names the Secret in errors.
    pub fn from_data(data: &BTreeMap<String, Vec<u8>>, what: &str) -> Result<CaSet, CaError> {
        let need = |key: &str| -> Result<String, CaError> {
            text(data, key, what)?.ok_or_else(|| CaError::Missing {
                what: format!("{what} {key}"),
            })
        };
        let current = Ca::from_pem(
            &need(CA_CERT_KEY)?,
            &need(CA_KEY_KEY)?,
            &format!("{what} {CA_CERT_KEY}"),
        )?;
        let next = match (text(data, NEXT_CERT_KEY, what)?, text(data, NEXT_KEY_KEY, what)?) {
            (Some(c), Some(k)) => Some(Ca::from_pem(&c, &k, &format!("{what} {NEXT_CERT_KEY}"))?),
            _ => None,
        };
        let previous = text(data, PREVIOUS_CERT_KEY, what)?;
        if let Some(p) = &previous {
            inspect(p, &format!("{what} {PREVIOUS_CERT_KEY}"))?;
        }
        Ok(CaSet {
            current,
            next,
            previous,
        })
    }
}

/// A step of the CA rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// Generate `next` and trust it.
    AddNext,
    /// `next` signs from now on; `current` becomes `previous`.
    Promote,
    /// `previous` has expired: drop it from the bundle.
    DropPrevious,
}

/// The rotation step due at `now`, if any (module documentation).
pub fn plan_rotation(set: &CaSet, now: SystemTime, timing: &Timing) -> Option<Rotation> {
    if let Some(p) = &set.previous
        && inspect(p, "previous").is_ok_and(|i| now >= i.not_after)
    {
        return Some(Rotation::DropPrevious);
    }
    match &set.next {
        Some(next) => {
            let trusted_since = next.info.not_before + BACKDATE;
            // Promote once the bundle had time to spread, or at the latest
            // when the current CA is about to expire.
            let spread = now >= trusted_since + timing.ca_renew_before / 2;
            let expiring = now + timing.cert_validity >= set.current.info.not_after;
            (spread || expiring).then_some(Rotation::Promote)
        }
        None => (now + timing.ca_renew_before >= set.current.info.not_after).then_some(Rotation::AddNext),
    }
}

/// `set` after `step`.
pub fn rotate(set: &CaSet, step: Rotation, now: SystemTime, timing: &Timing) -> Result<CaSet, CaError> {
    Ok(match step {
        Rotation::AddNext => CaSet {
            next: Some(Ca::generate(now, timing.ca_validity)?),
            ..set.clone()
        },
        Rotation::Promote => match &set.next {
            Some(next) => CaSet {
                current: next.clone(),
                next: None,
                previous: Some(set.current.cert_pem.clone()),
            },
            None => set.clone(),
        },
        Rotation::DropPrevious => CaSet {
            previous: None,
            ..set.clone()
        },
    })
}

/// Why a certificate must be issued (again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reissue {
    Missing,
    Unreadable,
    /// Less than `cert_renew_before` left (or expired).
    Expiring,
    /// Not signed by the signing CA (a CA rotation happened).
    Issuer,
    /// Its SANs are not the expected ones.
    Names,
    /// The trust bundle shipped beside it changed.
    Bundle,
}

impl Reissue {
    pub fn as_str(self) -> &'static str {
        match self {
            Reissue::Missing => "missing",
            Reissue::Unreadable => "unreadable",
            Reissue::Expiring => "expiring",
            Reissue::Issuer => "issuer",
            Reissue::Names => "names",
            Reissue::Bundle => "bundle",
        }
    }
}

/// What a certificate should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected<'a> {
    /// A client certificate with exactly this URI SAN.
    Client { identity: &'a str },
    /// A server certificate with exactly these DNS SANs (any order).
    Server { dns_names: &'a [String] },
}

/// Whether (and why) a certificate must be issued again: `cert_pem` and
/// the `bundle_pem` shipped beside it (`None`: absent).
pub fn reissue(
    cert_pem: Option<&str>,
    bundle_pem: Option<&str>,
    expected: &Expected<'_>,
    set: &CaSet,
    now: SystemTime,
    timing: &Timing,
) -> Option<Reissue> {
    let Some(pem) = cert_pem else {
        return Some(Reissue::Missing);
    };
    let Ok(info) = inspect(pem, "certificate") else {
        return Some(Reissue::Unreadable);
    };
    let names_ok = match expected {
        Expected::Client { identity } => info.uris == [identity.to_string()] && info.dns_names.is_empty(),
        Expected::Server { dns_names } => {
            let mut want: Vec<&String> = dns_names.iter().collect();
            let mut have: Vec<&String> = info.dns_names.iter().collect();
            want.sort();
            have.sort();
            want == have && info.uris.is_empty()
        }
    };
    if !names_ok {
        return Some(Reissue::Names);
    }
    if !set.current.signed(&info) {
        return Some(Reissue::Issuer);
    }
    if now + timing.cert_renew_before >= info.not_after {
        return Some(Reissue::Expiring);
    }
    if bundle_pem != Some(set.bundle().as_str()) {
        return Some(Reissue::Bundle);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Duration = Duration::from_secs(3600);

    fn timing() -> Timing {
        Timing {
            ca_validity: 100 * H,
            ca_renew_before: 20 * H,
            cert_validity: 4 * H,
            cert_renew_before: H,
        }
    }

    fn t0() -> SystemTime {
        // Whole seconds: X.509 times have no fractions.
        UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    #[test]
    fn client_certificate_carries_the_identity_and_chains_to_the_ca() {
        let ca = Ca::generate(t0(), 100 * H).expect("ca");
        let id = crate::names::xds_identity("infra", "edge");
        let c = ca.issue_client(&id, t0(), 4 * H).expect("client");
        let info = inspect(&c.cert_pem, "client").expect("inspect");
        assert_eq!(info.uris, vec![id.clone()]);
        assert!(info.dns_names.is_empty());
        assert!(ca.signed(&info));
        assert_eq!(info.not_after, t0() + 4 * H);
        assert!(info.not_before < t0());
        // Another CA did not sign it.
        let other = Ca::generate(t0(), 100 * H).expect("other ca");
        assert!(!other.signed(&info));
        // The key is a usable PEM key.
        assert!(KeyPair::from_pem(&c.key_pem).is_ok());
        // The CA round-trips through PEM (as stored in the Secret).
        let back = Ca::from_pem(&ca.cert_pem, ca.key_pem(), "ca").expect("from pem");
        let c2 = back.issue_client(&id, t0(), H).expect("issue after reload");
        assert!(ca.signed(&inspect(&c2.cert_pem, "c2").expect("inspect")));
    }

    #[test]
    fn certificates_never_outlive_their_ca() {
        let ca = Ca::generate(t0(), 10 * H).expect("ca");
        let c = ca
            .issue_server(&["xds.ns.svc".into()], t0() + 8 * H, 4 * H)
            .expect("server");
        let info = inspect(&c.cert_pem, "server").expect("inspect");
        assert_eq!(info.not_after, ca.info.not_after);
        assert_eq!(info.dns_names, vec!["xds.ns.svc".to_string()]);
    }

    #[test]
    fn a_key_that_is_not_the_cas_is_refused() {
        let a = Ca::generate(t0(), H).expect("a");
        let b = Ca::generate(t0(), H).expect("b");
        let e = Ca::from_pem(&a.cert_pem, b.key_pem(), "Secret ns/ca ca.crt").expect_err("mixed");
        assert_eq!(
            e.to_string(),
            "Secret ns/ca ca.crt key: not a PEM private key: it is not the key of the certificate"
        );
        let e = Ca::from_pem("not pem", a.key_pem(), "Secret ns/ca ca.crt").expect_err("bad pem");
        assert!(
            e.to_string().starts_with("Secret ns/ca ca.crt certificate:"),
            "{e}"
        );
        assert!(Ca::from_pem(&a.cert_pem, a.key_pem(), "ok").is_ok());
    }

    #[test]
    fn reissue_reasons() {
        let t = timing();
        let set = CaSet::new(Ca::generate(t0(), t.ca_validity).expect("ca"));
        let id = crate::names::xds_identity("ns", "gw");
        let expected = Expected::Client { identity: &id };
        let c = set.current.issue_client(&id, t0(), t.cert_validity).expect("c");
        let bundle = set.bundle();
        let check =
            |pem: Option<&str>, bundle: Option<&str>, now| reissue(pem, bundle, &expected, &set, now, &t);
        assert_eq!(check(Some(&c.cert_pem), Some(&bundle), t0()), None);
        assert_eq!(check(None, Some(&bundle), t0()), Some(Reissue::Missing));
        assert_eq!(
            check(Some("garbage"), Some(&bundle), t0()),
            Some(Reissue::Unreadable)
        );
        // Renewed `cert_renew_before` ahead of expiry, not later.
        assert_eq!(check(Some(&c.cert_pem), Some(&bundle), t0() + 2 * H), None);
        assert_eq!(
            check(Some(&c.cert_pem), Some(&bundle), t0() + 3 * H),
            Some(Reissue::Expiring)
        );
        assert_eq!(check(Some(&c.cert_pem), None, t0()), Some(Reissue::Bundle));
        let other_id = crate::names::xds_identity("ns", "other");
        let other = set
            .current
            .issue_client(&other_id, t0(), t.cert_validity)
            .expect("other");
        assert_eq!(
            check(Some(&other.cert_pem), Some(&bundle), t0()),
            Some(Reissue::Names)
        );
        let foreign = Ca::generate(t0(), t.ca_validity).expect("foreign");
        let f = foreign.issue_client(&id, t0(), t.cert_validity).expect("f");
        assert_eq!(
            check(Some(&f.cert_pem), Some(&bundle), t0()),
            Some(Reissue::Issuer)
        );
        // Server: DNS names in any order, no URI.
        let names = vec!["b.svc".to_string(), "a.svc".to_string()];
        let s = set
            .current
            .issue_server(&names, t0(), t.cert_validity)
            .expect("s");
        let reversed = vec!["a.svc".to_string(), "b.svc".to_string()];
        let server = Expected::Server { dns_names: &reversed };
        assert_eq!(
            reissue(Some(&s.cert_pem), Some(&bundle), &server, &set, t0(), &t),
            None
        );
        let fewer = vec!["a.svc".to_string()];
        let server = Expected::Server { dns_names: &fewer };
        assert_eq!(
            reissue(Some(&s.cert_pem), Some(&bundle), &server, &set, t0(), &t),
            Some(Reissue::Names)
        );
    }

    #[test]
    fn ca_rotation_adds_then_promotes_then_drops() {
        let t = timing();
        let first = Ca::generate(t0(), t.ca_validity).expect("ca");
        let mut set = CaSet::new(first.clone());
        let id = crate::names::xds_identity("ns", "gw");
        let old_cert = first.issue_client(&id, t0(), t.cert_validity).expect("c");
        assert_eq!(plan_rotation(&set, t0(), &t), None);
        assert_eq!(plan_rotation(&set, t0() + 79 * H, &t), None);
        // 20 h before expiry: a next CA is added to the bundle, not used.
        let now = t0() + 80 * H;
        assert_eq!(plan_rotation(&set, now, &t), Some(Rotation::AddNext));
        set = rotate(&set, Rotation::AddNext, now, &t).expect("add");
        let next = set.next.clone().expect("next");
        assert!(set.bundle().contains(&first.cert_pem) && set.bundle().contains(&next.cert_pem));
        assert_eq!(set.current.cert_pem, first.cert_pem, "the old CA still signs");
        // Promoted ca_renew_before / 2 later.
        assert_eq!(plan_rotation(&set, now + 9 * H, &t), None);
        let now = now + 10 * H;
        assert_eq!(plan_rotation(&set, now, &t), Some(Rotation::Promote));
        set = rotate(&set, Rotation::Promote, now, &t).expect("promote");
        assert_eq!(set.current.cert_pem, next.cert_pem);
        assert_eq!(set.previous.as_deref(), Some(first.cert_pem.as_str()));
        // Certificates of the old CA are re-issued (still trusted meanwhile).
        assert!(set.bundle().contains(&first.cert_pem));
        assert_eq!(
            reissue(
                Some(&old_cert.cert_pem),
                Some(&set.bundle()),
                &Expected::Client { identity: &id },
                &set,
                now,
                &t
            ),
            Some(Reissue::Issuer)
        );
        // The previous CA leaves the bundle once expired.
        assert_eq!(plan_rotation(&set, t0() + 99 * H, &t), None);
        let now = t0() + 100 * H;
        assert_eq!(plan_rotation(&set, now, &t), Some(Rotation::DropPrevious));
        set = rotate(&set, Rotation::DropPrevious, now, &t).expect("drop");
        assert_eq!(set.bundle(), next.cert_pem);
        // The Secret's data round-trips.
        let back = CaSet::from_data(&set.to_data(), "Secret ns/ca").expect("from data");
        assert_eq!(back.bundle(), set.bundle());
    }

    #[test]
    fn a_next_ca_is_promoted_before_the_current_one_expires() {
        // The spread wait would end after the current CA's expiry: promote
        // early rather than serve an expired chain.
        let t = timing();
        let set = CaSet::new(Ca::generate(t0(), t.ca_validity).expect("ca"));
        let late = t0() + 95 * H;
        let set = rotate(&set, Rotation::AddNext, late, &t).expect("add");
        assert_eq!(plan_rotation(&set, late + H / 2, &t), None);
        // cert_validity (4 h) before the current CA's expiry (100 h).
        assert_eq!(plan_rotation(&set, t0() + 96 * H, &t), Some(Rotation::Promote));
    }

    #[test]
    fn timing_is_checked() {
        assert!(Timing::default().validate().is_ok());
        assert!(timing().validate().is_ok());
        let bad = Timing {
            cert_renew_before: 5 * H,
            ..timing()
        };
        assert!(bad.validate().is_err());
        let bad = Timing {
            cert_validity: 11 * H,
            ..timing()
        };
        assert!(bad.validate().is_err());
    }
}
