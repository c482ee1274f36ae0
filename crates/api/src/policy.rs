//! portcullis's own policy kinds (`gateway.portcullis.dev/v1alpha1`):
//! TrafficPolicy, which attaches per-route behaviour to HTTPRoutes (or one
//! rule of one, by rule name), and GatewayExtension, which describes an
//! external service such as an ext_authz server.
//!
//! A TrafficPolicy whose spec does not parse is still loaded, with its
//! targets and the parse errors in `load_errors`: the translator then fails
//! its targets closed (500) instead of serving them without the policy a
//! security feature may have asked for.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The API group of portcullis's own kinds.
pub const GROUP: &str = "gateway.portcullis.dev";
pub const VERSION: &str = "v1alpha1";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicy {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: TrafficPolicySpec,
    /// `field: reason` for every part of the spec that could not be read;
    /// non-empty makes the policy invalid.
    #[serde(skip)]
    pub load_errors: Vec<String>,
}

/// What a policy attaches to. `kind` is `HTTPRoute` (with an optional rule
/// name as `sectionName`); `Gateway` is accepted by the type for a later
/// issue and reported as not supported yet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
    /// Not part of a local reference: read only so that a target in
    /// another namespace is refused instead of silently meaning the
    /// policy's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
}

/// Targets every object of `kind` in the policy's namespace whose labels
/// contain all of `matchLabels`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetSelector {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficPolicySpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_refs: Vec<TargetRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_selectors: Vec<TargetSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_modifiers: Option<HeaderModifiers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rate_limit: Option<LocalRateLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbac: Option<Rbac>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformation: Option<Transformation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_auth: Option<ExtAuthPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// Literal header edits (values are not format strings).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifiers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderEdits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderEdits>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderEdits {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<Header>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Header>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cors {
    /// Exact origins (`https://a.example`), `*`, or one leading wildcard
    /// label (`https://*.example.com`).
    #[serde(default)]
    pub allow_origins: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// Seconds a preflight may be cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalRateLimit {
    pub token_bucket: TokenBucket,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenBucket {
    pub max_tokens: i64,
    /// Defaults to `maxTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_fill: Option<i64>,
    /// A Gateway API duration (`1s`, `500ms`).
    pub fill_interval: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum RbacAction {
    #[default]
    Allow,
    Deny,
}

/// `Allow`: a request is let through only when one of the expressions
/// matches. `Deny`: a request is refused (403) when one matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rbac {
    #[serde(default)]
    pub action: RbacAction,
    /// CEL over Envoy's request attributes, e.g.
    /// `request.headers['x-user'] == 'admin'`.
    pub match_expressions: Vec<String>,
}

/// Header edits whose values are Envoy substitution format strings
/// (`%REQ(x-user)%`, `%DOWNSTREAM_REMOTE_ADDRESS%`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transformation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderEdits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderEdits>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtAuthPolicy {
    /// A GatewayExtension of type ExtAuth in the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<LocalRef>,
    /// Turns external authorization off for the targets (overriding a
    /// less specific policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalRef {
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    /// The whole request (Envoy route timeout); `0s` disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Stream idle timeout for the route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retry {
    pub attempts: i64,
    /// Envoy `retry_on` conditions (`5xx`, `connect-failure`, …); defaults to
    /// `connect-failure,refused-stream,reset` plus the status codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_codes: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_base_interval: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayExtension {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GatewayExtensionSpec,
    #[serde(skip)]
    pub load_errors: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ExtensionType {
    #[default]
    ExtAuth,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayExtensionSpec {
    #[serde(rename = "type", default)]
    pub type_: ExtensionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_auth: Option<ExtAuthProvider>,
}

/// An ext_authz server: exactly one of `grpcService` / `httpService`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtAuthProvider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_service: Option<AuthService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_service: Option<AuthService>,
    /// Per check; default 200ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Let requests through when the server cannot be reached. Default
    /// false (fail closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_open: Option<bool>,
    /// Request headers sent to an HTTP auth server (besides the defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthService {
    pub backend_ref: ServiceRef,
    /// HTTP only: prefix added to the checked request's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub port: i32,
}
