//! Contour's `projectcontour.io/v1` kinds: HTTPProxy and
//! TLSCertificateDelegation, field for field with Contour's
//! `apis/projectcontour/v1` for what portcullis implements.
//!
//! Data model: an HTTPProxy with `spec.virtualhost` is a *root* (one per
//! FQDN); `spec.includes` name child HTTPProxies whose routes are mounted
//! under the include's `conditions`; the tree is resolved by the
//! translator (`translate::httpproxy`).
//!
//! Every spec type denies unknown fields: a Contour field portcullis does
//! not implement (`authorization`, `corsPolicy`, `tcpproxy`, …) would
//! otherwise be dropped silently and the proxy served without it (fail
//! open). Such a proxy, or one whose spec does not parse at all, is still
//! loaded with its metadata and the parse error in
//! [`HttpProxy::load_errors`], so that its status says why it is invalid
//! and the routes its parents give it are fenced.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// Contour's API group and version.
pub const GROUP: &str = "projectcontour.io";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "projectcontour.io/v1";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpProxy {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HttpProxySpec,
    /// `field: reason` for a spec that could not be read; non-empty makes
    /// the proxy invalid (its `spec` is then empty).
    #[serde(skip)]
    pub load_errors: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpProxySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualhost: Option<VirtualHost>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<Include>,
    /// Read for compatibility; portcullis serves every HTTPProxy it is
    /// given (the Gateway it serves them on is configured instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_class_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Include {
    pub name: String,
    /// Defaults to the including proxy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MatchCondition>,
}

/// One condition; Contour expects exactly one of the fields to be set
/// (an empty string counts as unset, as in Go).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub regex: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderMatchCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_parameter: Option<QueryParameterMatchCondition>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderMatchCondition {
    pub name: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub present: bool,
    #[serde(default, rename = "notpresent", skip_serializing_if = "is_false")]
    pub not_present: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub contains: String,
    #[serde(default, rename = "notcontains", skip_serializing_if = "String::is_empty")]
    pub not_contains: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_case: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exact: String,
    #[serde(default, rename = "notexact", skip_serializing_if = "String::is_empty")]
    pub not_exact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub regex: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub treat_missing_as_empty: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryParameterMatchCondition {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub suffix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub regex: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub contains: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_case: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub present: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHost {
    pub fqdn: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tls {
    /// `name` or `namespace/name` (the latter needs a
    /// TLSCertificateDelegation in that namespace).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret_name: String,
    /// `1.2` or `1.3`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub minimum_protocol_version: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Route {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MatchCondition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub enable_websockets: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub permit_insecure: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_policy: Option<TimeoutPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_rewrite_policy: Option<PathRewritePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_policy: Option<HeadersPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers_policy: Option<HeadersPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect_policy: Option<RequestRedirectPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_response_policy: Option<DirectResponsePolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Service {
    pub name: String,
    pub port: i64,
    /// `h2`, `h2c` or `tls`; portcullis implements `h2c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub mirror: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_policy: Option<HeadersPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers_policy: Option<HeadersPolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutPolicy {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub response: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub idle: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub idle_connection: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Contour's `NumRetries`, spelled `count` in YAML.
    #[serde(default)]
    pub count: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub per_try_timeout: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retriable_status_codes: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathRewritePolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace_prefix: Vec<ReplacePrefix>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplacePrefix {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    pub replacement: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeadersPolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<HeaderValue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderValue {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRedirectPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectResponsePolicy {
    pub status_code: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
}

/// Lets HTTPProxies in `targetNamespaces` (`*`: all) use the Secret
/// `secretName` of this object's namespace as `tls.secretName: ns/name`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsCertificateDelegation {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: TlsCertificateDelegationSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsCertificateDelegationSpec {
    #[serde(default)]
    pub delegations: Vec<CertificateDelegation>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateDelegation {
    pub secret_name: String,
    #[serde(default)]
    pub target_namespaces: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}
