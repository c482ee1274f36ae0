//! The extension managers' configuration, in Envoy Gateway's shape
//! (`EnvoyGateway.extensionManager` / `extensionManagers`, v1.9) so a user
//! can paste theirs into the portcullis config file.
//!
//! Two layers:
//! - [`ExtensionManagerSpec`] (and its children): what the file says,
//!   deserialized with serde, every field optional, unknown fields refused.
//!   The binary's `ConfigFile` embeds it as `extensionManager` /
//!   `extensionManagers`.
//! - [`ExtensionConfig`] / [`ManagerConfig`]: validated, with Envoy
//!   Gateway's defaults applied; every error names the field
//!   (`extensionManager.service.fqdn.port: …`). [`ExtensionConfig::registration`]
//!   is what the translator needs.
//!
//! Differences from Envoy Gateway, all because portcullis runs from files:
//! - `service.tls.certificateRef` / `clientCertificateRef` name Kubernetes
//!   Secrets, which file mode cannot read: they are refused with an error
//!   that says to use `caFile` / `clientCertificateFile` +
//!   `clientKeyFile` (PEM paths, read at startup) instead.
//! - `serverName` (ours): the name the server certificate is checked
//!   against; default the `fqdn` hostname, the `ip` address, or `localhost`
//!   for a unix socket.
//! - `timeout` (ours): the deadline of one hook call, retries included
//!   (Envoy Gateway has none, envoyproxy/gateway#8806); default 2 s.
//! - `hooks.xdsTranslator.pre` is refused: Envoy Gateway declares it but
//!   calls no pre hook.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use translate::extension::{GroupKind, Hook, Registration, TranslationIncludes};

/// Envoy Gateway's default `maxMessageSize` is gRPC's default receive
/// limit, 4 MiB; we apply it both ways.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;
/// Our per-call deadline when `timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------- the file

/// One `extensionManager` as written in the file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionManagerSpec {
    pub name: Option<String>,
    #[serde(default)]
    pub resources: Vec<GroupVersionKindSpec>,
    #[serde(default)]
    pub policy_resources: Vec<GroupVersionKindSpec>,
    #[serde(default)]
    pub backend_resources: Vec<GroupVersionKindSpec>,
    pub hooks: Option<ExtensionHooksSpec>,
    pub service: Option<ExtensionServiceSpec>,
    pub fail_open: Option<bool>,
    /// A Kubernetes quantity: `4M`, `8Mi`, `1048576`.
    pub max_message_size: Option<QuantitySpec>,
    /// Ours: a Gateway API duration (`2s`, `500ms`, `1m30s`).
    pub timeout: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupVersionKindSpec {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionHooksSpec {
    pub xds_translator: Option<XdsTranslatorHooksSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct XdsTranslatorHooksSpec {
    #[serde(default)]
    pub pre: Vec<String>,
    #[serde(default)]
    pub post: Vec<String>,
    pub translation: Option<TranslationSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranslationSpec {
    pub listener: Option<IncludeAllSpec>,
    pub route: Option<IncludeAllSpec>,
    pub cluster: Option<IncludeAllSpec>,
    pub secret: Option<IncludeAllSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncludeAllSpec {
    pub include_all: Option<bool>,
}

/// `service`: Envoy Gateway's `ExtensionService` (a `BackendEndpoint`
/// inlined, the deprecated `host`/`port`, `tls`, `retry`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionServiceSpec {
    pub fqdn: Option<HostPortSpec>,
    pub ip: Option<IpSpec>,
    pub unix: Option<UnixSpec>,
    /// `BackendEndpoint.hostname`; with `port`, an address as Envoy
    /// Gateway's `GetExtensionServerAddress` makes one.
    pub hostname: Option<String>,
    /// `BackendEndpoint.zone`: accepted (pasted configs carry it), unused.
    pub zone: Option<String>,
    /// Deprecated in Envoy Gateway, still accepted there.
    pub host: Option<String>,
    pub port: Option<i64>,
    pub tls: Option<ExtensionTlsSpec>,
    pub retry: Option<RetrySpec>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostPortSpec {
    pub hostname: Option<String>,
    pub port: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IpSpec {
    pub address: Option<String>,
    pub port: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnixSpec {
    pub path: Option<String>,
}

/// A Gateway API `SecretObjectReference` (only recognised, to refuse it
/// with a useful message in file mode).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRefSpec {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionTlsSpec {
    pub certificate_ref: Option<SecretRefSpec>,
    pub client_certificate_ref: Option<SecretRefSpec>,
    /// Ours: PEM file with the CA certificate(s) that sign the server's.
    pub ca_file: Option<PathBuf>,
    /// Ours: PEM client certificate chain for mTLS (with `clientKeyFile`).
    pub client_certificate_file: Option<PathBuf>,
    /// Ours: PEM private key of `clientCertificateFile`.
    pub client_key_file: Option<PathBuf>,
    /// Ours: the name the server certificate must be valid for.
    pub server_name: Option<String>,
}

/// `service.retry`. Envoy Gateway spells the codes' key
/// `RetryableStatusCodes` (capitalised, its JSON tag); the camelCase
/// spelling is accepted too.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetrySpec {
    pub max_attempts: Option<i64>,
    pub initial_backoff: Option<String>,
    pub max_backoff: Option<String>,
    pub backoff_multiplier: Option<FractionSpec>,
    #[serde(rename = "RetryableStatusCodes", alias = "retryableStatusCodes")]
    pub retryable_status_codes: Option<Vec<String>>,
}

/// A Gateway API `Fraction` (`{numerator, denominator}`, denominator
/// default 100), or a plain number.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum FractionSpec {
    Number(f64),
    Fraction(FractionObject),
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FractionObject {
    pub numerator: i64,
    pub denominator: Option<i64>,
}

/// A Kubernetes quantity as YAML may give it: a string or an integer.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum QuantitySpec {
    Integer(i64),
    Text(String),
}

// ---------------------------------------------------------- validated

/// Where the extension server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceAddress {
    Fqdn { hostname: String, port: u16 },
    Ip { address: IpAddr, port: u16 },
    Unix { path: PathBuf },
}

impl std::fmt::Display for ServiceAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceAddress::Fqdn { hostname, port } => write!(f, "{hostname}:{port}"),
            ServiceAddress::Ip { address, port } => {
                write!(f, "{}", std::net::SocketAddr::new(*address, *port))
            }
            ServiceAddress::Unix { path } => write!(f, "unix://{}", path.display()),
        }
    }
}

/// TLS to the extension server; the PEM files are read at startup.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsConfig {
    pub ca_pem: Vec<u8>,
    /// `(certificate chain PEM, private key PEM)` for mTLS.
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    pub server_name: String,
}

impl std::fmt::Debug for TlsConfig {
    // The client key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("mtls", &self.client_identity.is_some())
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// gRPC status codes that `RetryableStatusCodes` may name (Envoy Gateway's
/// enum, gRPC's spelling).
pub const GRPC_CODE_NAMES: [(&str, tonic::Code); 16] = [
    ("CANCELLED", tonic::Code::Cancelled),
    ("UNKNOWN", tonic::Code::Unknown),
    ("INVALID_ARGUMENT", tonic::Code::InvalidArgument),
    ("DEADLINE_EXCEEDED", tonic::Code::DeadlineExceeded),
    ("NOT_FOUND", tonic::Code::NotFound),
    ("ALREADY_EXISTS", tonic::Code::AlreadyExists),
    ("PERMISSION_DENIED", tonic::Code::PermissionDenied),
    ("RESOURCE_EXHAUSTED", tonic::Code::ResourceExhausted),
    ("FAILED_PRECONDITION", tonic::Code::FailedPrecondition),
    ("ABORTED", tonic::Code::Aborted),
    ("OUT_OF_RANGE", tonic::Code::OutOfRange),
    ("UNIMPLEMENTED", tonic::Code::Unimplemented),
    ("INTERNAL", tonic::Code::Internal),
    ("UNAVAILABLE", tonic::Code::Unavailable),
    ("DATA_LOSS", tonic::Code::DataLoss),
    ("UNAUTHENTICATED", tonic::Code::Unauthenticated),
];

/// gRPC's spelling of a status code (`UNAVAILABLE`), as Envoy Gateway's
/// configuration and error messages use it.
pub fn grpc_code_name(code: tonic::Code) -> &'static str {
    GRPC_CODE_NAMES
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(n, _)| *n)
        .unwrap_or(match code {
            tonic::Code::Ok => "OK",
            _ => "UNKNOWN",
        })
}

/// `service.retry` with Envoy Gateway's defaults (gRPC A6 retry policy):
/// 4 attempts in all, backoff 100 ms doubling up to 1 s, on UNAVAILABLE.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (gRPC's `maxAttempts`).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub backoff_multiplier: f64,
    pub retryable: Vec<tonic::Code>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            backoff_multiplier: 2.0,
            retryable: vec![tonic::Code::Unavailable],
        }
    }
}

/// One validated extension manager.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagerConfig {
    /// `name`, or the service address when unnamed (single manager):
    /// error messages and metrics name the manager by it.
    pub name: String,
    pub resources: BTreeSet<GroupKind>,
    pub policy_resources: BTreeSet<GroupKind>,
    pub backend_resources: BTreeSet<GroupKind>,
    /// The version each registered kind was registered at.
    pub versions: BTreeMap<GroupKind, String>,
    pub hooks: BTreeSet<Hook>,
    pub translation: TranslationIncludes,
    pub address: ServiceAddress,
    pub tls: Option<TlsConfig>,
    pub retry: RetryPolicy,
    pub fail_open: bool,
    pub max_message_size: usize,
    pub timeout: Duration,
}

impl ManagerConfig {
    /// A manager with Envoy Gateway's defaults (tests, examples).
    pub fn new(
        name: impl Into<String>,
        address: ServiceAddress,
        hooks: impl IntoIterator<Item = Hook>,
    ) -> Self {
        Self {
            name: name.into(),
            resources: BTreeSet::new(),
            policy_resources: BTreeSet::new(),
            backend_resources: BTreeSet::new(),
            versions: BTreeMap::new(),
            hooks: hooks.into_iter().collect(),
            translation: TranslationIncludes::default(),
            address,
            tls: None,
            retry: RetryPolicy::default(),
            fail_open: false,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// This manager alone, as the translator sees it.
    pub fn registration(&self) -> Registration {
        Registration {
            resources: self.resources.clone(),
            policy_resources: self.policy_resources.clone(),
            backend_resources: self.backend_resources.clone(),
            versions: self.versions.clone(),
            hooks: self.hooks.clone(),
            translation: self.translation,
        }
    }
}

/// Every configured manager, in chain order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtensionConfig {
    pub managers: Vec<ManagerConfig>,
}

impl ExtensionConfig {
    /// Validates `extensionManager` / `extensionManagers` (mutually
    /// exclusive, as in Envoy Gateway). Reads the TLS files.
    pub fn from_spec(
        single: Option<&ExtensionManagerSpec>,
        plural: Option<&[ExtensionManagerSpec]>,
    ) -> Result<Self, ConfigError> {
        match (single, plural) {
            (Some(_), Some(_)) => Err(ConfigError::Exclusive {
                field: "extensionManagers".into(),
                other: "extensionManager".into(),
            }),
            (None, None) => Ok(Self::default()),
            (Some(one), None) => Ok(Self {
                managers: vec![validate_manager("extensionManager", one, false)?],
            }),
            (None, Some(list)) => {
                if list.is_empty() {
                    return Err(ConfigError::Invalid {
                        field: "extensionManagers".into(),
                        reason: "must contain at least one entry when specified".into(),
                    });
                }
                let mut names = BTreeSet::new();
                let mut managers = Vec::with_capacity(list.len());
                let mut versions = BTreeMap::new();
                for (i, spec) in list.iter().enumerate() {
                    let field = format!("extensionManagers[{i}]");
                    let m = validate_manager(&field, spec, true)?;
                    for (gk, version) in &m.versions {
                        one_version(&mut versions, gk, version, || field.clone())?;
                    }
                    if !names.insert(m.name.clone()) {
                        return Err(ConfigError::Invalid {
                            field: format!("{field}.name"),
                            reason: format!("duplicate name {:?}", m.name),
                        });
                    }
                    managers.push(m);
                }
                Ok(Self { managers })
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.managers.is_empty()
    }

    /// What the translator needs from the whole chain: the union of every
    /// manager's kinds and hooks, and of the resources `PostTranslateModify`
    /// must receive (each manager is then given only what it asked for, as
    /// Envoy Gateway's composite client does).
    pub fn registration(&self) -> Registration {
        let mut r = Registration {
            translation: TranslationIncludes {
                listeners: false,
                routes: false,
                clusters: false,
                secrets: false,
            },
            ..Registration::default()
        };
        if self.managers.is_empty() {
            r.translation = TranslationIncludes::default();
        }
        for m in &self.managers {
            r.resources.extend(m.resources.iter().cloned());
            r.policy_resources.extend(m.policy_resources.iter().cloned());
            r.backend_resources.extend(m.backend_resources.iter().cloned());
            r.versions
                .extend(m.versions.iter().map(|(k, v)| (k.clone(), v.clone())));
            r.hooks.extend(m.hooks.iter().copied());
            if m.hooks.contains(&Hook::Translation) {
                r.translation.listeners |= m.translation.listeners;
                r.translation.routes |= m.translation.routes;
                r.translation.clusters |= m.translation.clusters;
                r.translation.secrets |= m.translation.secrets;
            }
        }
        if !r.hooks.contains(&Hook::Translation) {
            r.translation = TranslationIncludes::default();
        }
        r
    }
}

/// An invalid extension manager configuration: always names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: required")]
    Missing { field: String },
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("{field}: cannot be set together with {other}")]
    Exclusive { field: String, other: String },
    #[error("{field}: not supported: {reason}")]
    Unsupported { field: String, reason: String },
    #[error("{field}: cannot read {path}: {message}")]
    File {
        field: String,
        path: PathBuf,
        message: String,
    },
}

impl ConfigError {
    /// The field the error is about (`extensionManager.service.fqdn.port`).
    pub fn field(&self) -> &str {
        match self {
            ConfigError::Missing { field }
            | ConfigError::Invalid { field, .. }
            | ConfigError::Exclusive { field, .. }
            | ConfigError::Unsupported { field, .. }
            | ConfigError::File { field, .. } => field,
        }
    }
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

fn validate_manager(
    at: &str,
    spec: &ExtensionManagerSpec,
    named: bool,
) -> Result<ManagerConfig, ConfigError> {
    let name = spec.name.clone().filter(|n| !n.is_empty());
    if named && name.is_none() {
        return Err(ConfigError::Missing {
            field: format!("{at}.name"),
        });
    }
    let mut versions = BTreeMap::new();
    let mut gks = |list: &[GroupVersionKindSpec], key: &str| -> Result<BTreeSet<GroupKind>, ConfigError> {
        let mut out = BTreeSet::new();
        for (i, g) in list.iter().enumerate() {
            let f = format!("{at}.{key}[{i}]");
            if g.kind.is_empty() {
                return Err(ConfigError::Missing {
                    field: format!("{f}.kind"),
                });
            }
            if g.version.is_empty() {
                return Err(ConfigError::Missing {
                    field: format!("{f}.version"),
                });
            }
            let gk = GroupKind {
                group: g.group.clone(),
                kind: g.kind.clone(),
            };
            one_version(&mut versions, &gk, &g.version, || format!("{f}.version"))?;
            out.insert(gk);
        }
        Ok(out)
    };
    let resources = gks(&spec.resources, "resources")?;
    let policy_resources = gks(&spec.policy_resources, "policyResources")?;
    let backend_resources = gks(&spec.backend_resources, "backendResources")?;

    let xds = spec
        .hooks
        .as_ref()
        .and_then(|h| h.xds_translator.as_ref())
        .ok_or_else(|| ConfigError::Missing {
            field: format!("{at}.hooks.xdsTranslator"),
        })?;
    if !xds.pre.is_empty() {
        return Err(ConfigError::Unsupported {
            field: format!("{at}.hooks.xdsTranslator.pre"),
            reason: "Envoy Gateway calls no pre xDS hook; list the hooks under post".into(),
        });
    }
    if xds.post.is_empty() {
        return Err(invalid(
            format!("{at}.hooks.xdsTranslator.post"),
            "registered extension has no hooks specified",
        ));
    }
    let mut hooks = BTreeSet::new();
    for (i, h) in xds.post.iter().enumerate() {
        let hook = [
            Hook::Route,
            Hook::VirtualHost,
            Hook::HttpListener,
            Hook::Cluster,
            Hook::Endpoints,
            Hook::Translation,
        ]
        .into_iter()
        .find(|k| k.config_name() == h)
        .ok_or_else(|| {
            invalid(
                format!("{at}.hooks.xdsTranslator.post[{i}]"),
                format!(
                    "unknown hook {h:?}: allowed values are Route, VirtualHost, HTTPListener, Cluster, Endpoints, Translation"
                ),
            )
        })?;
        hooks.insert(hook);
    }
    let mut translation = TranslationIncludes::default();
    if let Some(t) = &xds.translation {
        let pick = |s: &Option<IncludeAllSpec>, default: bool| {
            s.as_ref().and_then(|s| s.include_all).unwrap_or(default)
        };
        translation.listeners = pick(&t.listener, translation.listeners);
        translation.routes = pick(&t.route, translation.routes);
        translation.clusters = pick(&t.cluster, translation.clusters);
        if pick(&t.secret, false) {
            return Err(ConfigError::Unsupported {
                field: format!("{at}.hooks.xdsTranslator.translation.secret.includeAll"),
                reason: "portcullis never sends TLS Secrets (private keys) to an extension server: \
                         no secret leaves the control plane; remove it or set it to false"
                    .into(),
            });
        }
    }

    let service = spec.service.as_ref().ok_or_else(|| ConfigError::Missing {
        field: format!("{at}.service"),
    })?;
    let sat = format!("{at}.service");
    let address = validate_address(&sat, service)?;
    let tls = service
        .tls
        .as_ref()
        .map(|t| validate_tls(&format!("{sat}.tls"), t, &address))
        .transpose()?;
    let retry = service
        .retry
        .as_ref()
        .map(|r| validate_retry(&format!("{sat}.retry"), r))
        .transpose()?
        .unwrap_or_default();

    let max_message_size = match &spec.max_message_size {
        None => DEFAULT_MAX_MESSAGE_SIZE,
        Some(q) => parse_quantity(q).map_err(|e| invalid(format!("{at}.maxMessageSize"), e.to_string()))?,
    };
    let timeout = match &spec.timeout {
        None => DEFAULT_TIMEOUT,
        Some(t) => {
            let d =
                translate::duration::parse(t).map_err(|e| invalid(format!("{at}.timeout"), e.to_string()))?;
            if d.is_zero() {
                return Err(invalid(format!("{at}.timeout"), "must be greater than zero"));
            }
            d
        }
    };

    Ok(ManagerConfig {
        name: name.unwrap_or_else(|| address.to_string()),
        resources,
        policy_resources,
        backend_resources,
        versions,
        hooks,
        translation,
        address,
        tls,
        retry,
        fail_open: spec.fail_open.unwrap_or(false),
        max_message_size,
        timeout,
    })
}

/// Records the version `gk` is registered at; a second, different version
/// of one kind is refused: Kubernetes mode watches one version per kind
/// (the objects would otherwise arrive twice, in two shapes).
fn one_version(
    versions: &mut BTreeMap<GroupKind, String>,
    gk: &GroupKind,
    version: &str,
    field: impl FnOnce() -> String,
) -> Result<(), ConfigError> {
    match versions.get(gk) {
        Some(seen) if seen != version => Err(invalid(
            field(),
            format!(
                "{}/{} is registered at version {seen} already; a kind is registered at one version",
                gk.group, gk.kind
            ),
        )),
        Some(_) => Ok(()),
        None => {
            versions.insert(gk.clone(), version.to_string());
            Ok(())
        }
    }
}

fn port(field: String, p: Option<i64>) -> Result<u16, ConfigError> {
    let p = p.ok_or_else(|| ConfigError::Missing { field: field.clone() })?;
    match u16::try_from(p) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(invalid(field, format!("{p} is not a port (1-65535)"))),
    }
}

fn hostname(field: String, h: Option<&str>) -> Result<String, ConfigError> {
    let h = h
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ConfigError::Missing { field: field.clone() })?;
    // Envoy Gateway's pattern: lower-case DNS labels, optional final dot.
    let ok = h.len() <= 253
        && h.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !ok {
        return Err(invalid(field, format!("{h:?} is not a lower-case DNS name")));
    }
    Ok(h.to_string())
}

fn validate_address(at: &str, s: &ExtensionServiceSpec) -> Result<ServiceAddress, ConfigError> {
    let mut set: Vec<&str> = Vec::new();
    if s.fqdn.is_some() {
        set.push("fqdn");
    }
    if s.ip.is_some() {
        set.push("ip");
    }
    if s.unix.is_some() {
        set.push("unix");
    }
    if s.host.is_some() {
        set.push("host");
    }
    if set.len() > 1 {
        return Err(ConfigError::Exclusive {
            field: format!("{at}.{}", set[1]),
            other: format!("{at}.{}", set[0]),
        });
    }
    if let Some(f) = &s.fqdn {
        return Ok(ServiceAddress::Fqdn {
            hostname: hostname(format!("{at}.fqdn.hostname"), f.hostname.as_deref())?,
            port: port(format!("{at}.fqdn.port"), f.port)?,
        });
    }
    if let Some(ip) = &s.ip {
        let field = format!("{at}.ip.address");
        let raw = ip
            .address
            .as_deref()
            .ok_or_else(|| ConfigError::Missing { field: field.clone() })?;
        let address: IpAddr = raw
            .parse()
            .map_err(|_| invalid(field, format!("{raw:?} is not an IPv4 or IPv6 address")))?;
        return Ok(ServiceAddress::Ip {
            address,
            port: port(format!("{at}.ip.port"), ip.port)?,
        });
    }
    if let Some(u) = &s.unix {
        let field = format!("{at}.unix.path");
        let path = u
            .path
            .as_deref()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| ConfigError::Missing { field: field.clone() })?;
        // The kernel's sun_path limit, as Envoy Gateway validates it.
        if path.len() > 108 {
            return Err(invalid(
                field,
                "unix domain socket path must not exceed 108 characters",
            ));
        }
        return Ok(ServiceAddress::Unix {
            path: PathBuf::from(path),
        });
    }
    // The deprecated `host`/`port`, or `hostname`/`port`: Envoy Gateway
    // dials host:port (port default 80).
    let (key, h) = match (&s.host, &s.hostname) {
        (Some(h), _) => ("host", h),
        (None, Some(h)) => ("hostname", h),
        (None, None) => {
            return Err(invalid(
                at.to_string(),
                "extension service must contain a configured target (fqdn, ip or unix)",
            ));
        }
    };
    let host = hostname(format!("{at}.{key}"), Some(h))?;
    Ok(ServiceAddress::Fqdn {
        hostname: host,
        port: port(format!("{at}.port"), Some(s.port.unwrap_or(80)))?,
    })
}

fn read_pem(field: String, path: &std::path::Path, what: &str) -> Result<Vec<u8>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError::File {
        field: field.clone(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(invalid(field, format!("{} holds no PEM {what}", path.display())));
    }
    Ok(bytes)
}

fn validate_tls(at: &str, t: &ExtensionTlsSpec, address: &ServiceAddress) -> Result<TlsConfig, ConfigError> {
    const FILE_MODE: &str = "Kubernetes Secret references cannot be read in file mode; give PEM file paths (caFile, clientCertificateFile, clientKeyFile)";
    if t.certificate_ref.is_some() {
        return Err(ConfigError::Unsupported {
            field: format!("{at}.certificateRef"),
            reason: FILE_MODE.into(),
        });
    }
    if t.client_certificate_ref.is_some() {
        return Err(ConfigError::Unsupported {
            field: format!("{at}.clientCertificateRef"),
            reason: FILE_MODE.into(),
        });
    }
    let ca = t.ca_file.as_ref().ok_or_else(|| ConfigError::Missing {
        field: format!("{at}.caFile"),
    })?;
    let ca_pem = read_pem(format!("{at}.caFile"), ca, "certificate")?;
    let client_identity = match (&t.client_certificate_file, &t.client_key_file) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(ConfigError::Missing {
                field: format!("{at}.clientKeyFile"),
            });
        }
        (None, Some(_)) => {
            return Err(ConfigError::Missing {
                field: format!("{at}.clientCertificateFile"),
            });
        }
        (Some(c), Some(k)) => Some((
            read_pem(format!("{at}.clientCertificateFile"), c, "certificate")?,
            read_pem(format!("{at}.clientKeyFile"), k, "private key")?,
        )),
    };
    let server_name = match (&t.server_name, address) {
        (Some(n), _) if !n.is_empty() => n.clone(),
        (Some(_), _) => return Err(invalid(format!("{at}.serverName"), "must not be empty")),
        (None, ServiceAddress::Fqdn { hostname, .. }) => hostname.trim_end_matches('.').to_string(),
        (None, ServiceAddress::Ip { address, .. }) => address.to_string(),
        (None, ServiceAddress::Unix { .. }) => "localhost".to_string(),
    };
    Ok(TlsConfig {
        ca_pem,
        client_identity,
        server_name,
    })
}

fn validate_retry(at: &str, r: &RetrySpec) -> Result<RetryPolicy, ConfigError> {
    let mut p = RetryPolicy::default();
    if let Some(n) = r.max_attempts {
        // gRPC clamps maxAttempts to 5; a value below 2 means "no retry"
        // there, which we honour as 1.
        if n < 1 {
            return Err(invalid(
                format!("{at}.maxAttempts"),
                format!("{n} must be at least 1"),
            ));
        }
        p.max_attempts = u32::try_from(n.min(5)).unwrap_or(5);
    }
    if let Some(d) = &r.initial_backoff {
        p.initial_backoff = translate::duration::parse(d)
            .map_err(|e| invalid(format!("{at}.initialBackoff"), e.to_string()))?;
    }
    if let Some(d) = &r.max_backoff {
        p.max_backoff =
            translate::duration::parse(d).map_err(|e| invalid(format!("{at}.maxBackoff"), e.to_string()))?;
    }
    if let Some(m) = &r.backoff_multiplier {
        let field = format!("{at}.backoffMultiplier");
        let v = match m {
            FractionSpec::Number(v) => *v,
            FractionSpec::Fraction(f) => {
                let d = f.denominator.unwrap_or(100);
                if d <= 0 {
                    return Err(invalid(
                        format!("{field}.denominator"),
                        "must be greater than zero",
                    ));
                }
                f.numerator as f64 / d as f64
            }
        };
        if !(v.is_finite() && v > 0.0) {
            return Err(invalid(field, format!("{v} must be a positive number")));
        }
        p.backoff_multiplier = v;
    }
    if let Some(codes) = &r.retryable_status_codes
        && !codes.is_empty()
    {
        let mut out = Vec::new();
        for (i, c) in codes.iter().enumerate() {
            let code = GRPC_CODE_NAMES.iter().find(|(n, _)| n == c).map(|(_, k)| *k).ok_or_else(|| {
                invalid(
                    format!("{at}.RetryableStatusCodes[{i}]"),
                    format!("invalid gRPC status code {c:?} (CANCELLED, UNKNOWN, …, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED)"),
                )
            })?;
            out.push(code);
        }
        p.retryable = out;
    }
    Ok(p)
}

/// Why a `maxMessageSize` quantity is refused (the caller names the field:
/// `ConfigError::Invalid`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("{quantity:?} is not a positive size like 4M, 8Mi or 1048576")]
    NotASize { quantity: String },
    #[error("{quantity:?} is larger than gRPC's 4 GiB message limit")]
    TooLarge { quantity: String },
}

/// A Kubernetes quantity as Envoy Gateway's pattern allows for
/// `maxMessageSize`: `^[1-9]+[0-9]*([EPTGMK]i|[EPTGMk])?$`.
pub fn parse_quantity(q: &QuantitySpec) -> Result<usize, QuantityError> {
    let s = match q {
        QuantitySpec::Integer(n) => n.to_string(),
        QuantitySpec::Text(s) => s.clone(),
    };
    let bad = || QuantityError::NotASize { quantity: s.clone() };
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, suffix) = s.split_at(digits_end);
    if num.is_empty() || num.starts_with('0') {
        return Err(bad());
    }
    let mult: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return Err(bad()),
    };
    let n: u128 = num.parse().map_err(|_| bad())?;
    let v = n.checked_mul(mult).ok_or_else(bad)?;
    // tonic's limits are usize; gRPC's wire length prefix is 32 bits.
    if v > u128::from(u32::MAX) {
        return Err(QuantityError::TooLarge { quantity: s });
    }
    usize::try_from(v).map_err(|_| bad())
}
