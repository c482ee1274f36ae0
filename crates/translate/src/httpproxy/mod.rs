//! Contour's HTTPProxy (`projectcontour.io/v1`): the include tree, its
//! tree-wide duplicate detection and its status. Pure, like the rest of the
//! translator.
//!
//! Data model:
//! - [`ProxyId`] names one HTTPProxy (`namespace/name`).
//! - [`tree::resolve`] walks every valid root (a proxy with
//!   `spec.virtualhost` in a root namespace, with an FQDN no other root
//!   claims) depth-first in include order, merging conditions root to leaf
//!   ([`conditions`]), and yields one [`tree::VirtualHostPlan`] per root:
//!   every route of the tree with its merged conditions, in processing
//!   order, plus what stands in for what cannot be served (502 for a
//!   missing include, a fence for an invalid child or route).
//! - [`duplicates`] decides, on the full merged conditions, which of those
//!   routes is programmed (the first) and which are duplicates.
//! - Every finding is a [`ProxyError`] recorded on one proxy in
//!   [`status::Statuses`], which renders Contour's status shape.
//!
//! - [`strict`] records STRICT's verdicts on HTTPProxy routes as errors of
//!   the proxies holding them.
//! - [`mod@report`] puts status, diagnostics and per-proxy reports into the
//!   output.
//!
//! Where each decision lives: ARCHITECTURE.md §3 (rows `httpproxy/*`).

pub mod conditions;
pub mod duplicates;
pub mod report;
pub mod routes;
pub mod serve;
pub mod stage;
pub mod status;
pub mod strict;
pub mod tree;

use std::fmt;

use crate::error::ErrorClass;

/// One HTTPProxy: `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProxyId {
    pub namespace: String,
    pub name: String,
}

impl ProxyId {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub fn of(proxy: &api::httpproxy::HttpProxy) -> Self {
        Self::new(
            proxy
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            proxy.metadata.name.clone().unwrap_or_default(),
        )
    }
}

impl fmt::Display for ProxyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One error (or warning) found on an HTTPProxy: Contour's sub-condition
/// `type` and `reason`, its message, the field it concerns and the class
/// portcullis reports it with.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ProxyError {
    /// Sub-condition type (`RouteError`, `IncludeError`, …).
    pub type_: &'static str,
    pub reason: &'static str,
    /// Where, from the object root (`spec.routes[1].conditions`).
    pub field: String,
    /// As Contour words it (this is the sub-condition's message).
    pub message: String,
    pub class: ErrorClass,
}

impl ProxyError {
    fn new(
        class: ErrorClass,
        type_: &'static str,
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            reason,
            field: field.into(),
            message: message.into(),
            class,
        }
    }

    pub fn structural(
        type_: &'static str,
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(ErrorClass::Structural, type_, reason, field, message)
    }

    pub fn semantic(
        type_: &'static str,
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(ErrorClass::Semantic, type_, reason, field, message)
    }

    pub fn referential(
        type_: &'static str,
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(ErrorClass::Referential, type_, reason, field, message)
    }
}

/// Sub-condition types, spelled as Contour's `apis/projectcontour/v1`.
pub mod type_ {
    pub const INCLUDE_ERROR: &str = "IncludeError";
    pub const ORPHANED: &str = "Orphaned";
    pub const PREFIX_REPLACE_ERROR: &str = "PrefixReplaceError";
    pub const ROOT_NAMESPACE_ERROR: &str = "RootNamespaceError";
    pub const SERVICE_ERROR: &str = "ServiceError";
    pub const ROUTE_ERROR: &str = "RouteError";
    pub const SPEC_ERROR: &str = "SpecError";
    pub const TLS_ERROR: &str = "TLSError";
    pub const VIRTUAL_HOST_ERROR: &str = "VirtualHostError";
}

/// Sub-condition reasons, spelled as Contour's `internal/dag`.
pub mod reason {
    pub const DUPLICATE_MATCH_CONDITIONS: &str = "DuplicateMatchConditions";
    pub const DUPLICATE_VHOST: &str = "DuplicateVhost";
    pub const FQDN_NOT_SPECIFIED: &str = "FQDNNotSpecified";
    pub const HEADER_MATCH_CONDITIONS_NOT_VALID: &str = "HeaderMatchConditionsNotValid";
    pub const INCLUDE_CREATES_CYCLE: &str = "IncludeCreatesCycle";
    pub const INCLUDE_NOT_FOUND: &str = "IncludeNotFound";
    pub const NOTHING_DEFINED: &str = "NothingDefined";
    pub const ORPHANED: &str = "Orphaned";
    pub const PATH_MATCH_CONDITIONS_NOT_VALID: &str = "PathMatchConditionsNotValid";
    pub const QUERY_PARAMETER_MATCH_CONDITIONS_NOT_VALID: &str = "QueryParameterMatchConditionsNotValid";
    pub const ROOT_INCLUDES_ROOT: &str = "RootIncludesRoot";
    pub const ROOT_PROXY_NOT_ALLOWED_IN_NAMESPACE: &str = "RootProxyNotAllowedInNamespace";
    pub const ROUTE_ACTION_COUNT_NOT_VALID: &str = "RouteActionCountNotValid";
    pub const DELEGATION_NOT_PERMITTED: &str = "DelegationNotPermitted";
    pub const SECRET_NOT_VALID: &str = "SecretNotValid";
    pub const TLS_CONFIG_NOT_VALID: &str = "TLSConfigNotValid";
    /// portcullis's own: the spec did not parse (Contour's API server would
    /// have refused the object).
    pub const SPEC_NOT_VALID: &str = "SpecNotValid";
    pub const REQUEST_HEADERS_POLICY_INVALID: &str = "RequestHeadersPolicyInvalid";
    pub const RESPONSE_HEADER_POLICY_INVALID: &str = "ResponseHeaderPolicyInvalid";
    pub const RESPONSE_HEADERS_POLICY_INVALID: &str = "ResponseHeadersPolicyInvalid";
    pub const TIMEOUT_POLICY_NOT_VALID: &str = "TimeoutPolicyNotValid";
    pub const REQUEST_REDIRECT_POLICY: &str = "RequestRedirectPolicy";
    pub const MUST_HAVE_PREFIX: &str = "MustHavePrefix";
    pub const SERVICE_UNRESOLVED_REFERENCE: &str = "ServiceUnresolvedReference";
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    pub const ONLY_ONE_MIRROR: &str = "OnlyOneMirror";
    /// portcullis's own reasons (Contour has no equivalent check).
    pub const ROUTE_NOT_PROGRAMMABLE: &str = "RouteNotProgrammable";
    pub const DIRECT_RESPONSE_POLICY_INVALID: &str = "DirectResponsePolicyInvalid";
    pub const SERVICE_WEIGHT_INVALID: &str = "ServiceWeightInvalid";
    pub const RETRY_POLICY_NOT_VALID: &str = "RetryPolicyNotValid";
    pub const PREFIX_REPLACEMENT_NOT_VALID: &str = "PrefixReplacementNotValid";
    pub const FQDN_CONFLICT: &str = "FQDNConflict";
    pub const NO_MATCHING_LISTENER: &str = "NoMatchingListener";
}

/// Everything the HTTPProxy stage produces for one translation.
#[derive(Debug, Default)]
pub struct Analysis<'a> {
    /// One per valid root, in `namespace/name` order.
    pub virtual_hosts: Vec<tree::VirtualHostPlan<'a>>,
    pub statuses: status::Statuses,
}

/// Resolves every HTTPProxy of `inputs`: trees, duplicates, status.
pub fn analyze<'a>(
    inputs: &'a api::Inputs,
    index: &crate::index::Index<'a>,
    settings: &HttpProxySettings,
) -> Analysis<'a> {
    let mut statuses = status::Statuses::default();
    let mut virtual_hosts = tree::resolve(inputs, index, settings, &mut statuses);
    for vh in &mut virtual_hosts {
        let mut found = status::Events::default();
        duplicates::detect(vh, &mut found);
        statuses.replay(&found);
    }
    Analysis {
        virtual_hosts,
        statuses,
    }
}

/// HTTPProxy settings (config `httpProxy`, flags `--root-namespaces`,
/// `--httpproxy-gateway`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpProxySettings {
    /// Namespaces root HTTPProxies may live in; empty: all (as Contour).
    pub root_namespaces: Vec<String>,
    /// `(namespace, name)` of the Gateway whose listeners serve them.
    pub gateway: Option<(String, String)>,
}

pub use report::{ProxyReport, RouteLine, report};
