//! Extension hooks: the seam through which the translator asks an extension
//! server (Envoy Gateway's `envoygateway.extension.EnvoyGatewayExtension`
//! protocol) to modify what it generated (ARCHITECTURE.md §2).
//!
//! The translator stays pure: it never opens a socket. It collects the
//! calls one Gateway needs for one hook (every route, every virtual host …),
//! hands them to [`Hooks`] as one batch, and gets one reply per call back in
//! the same order. The implementation (the gRPC client in the `extension`
//! crate, or an in-process one in tests) decides how to run them — bounded
//! concurrency, deadlines, retries, a reply cache — and the translator
//! decides what a failure means: with `fail_open` false the affected scope
//! is fenced with the 500 (a route, a virtual host, a listener's traffic),
//! never the whole Gateway; with `fail_open` true the unmodified resource is
//! kept and a warning is reported.
//!
//! Data model, as the protocol defines it:
//! - [`ExtensionResource`]: an object of a registered kind, as JSON
//!   (`unstructured_bytes`). Shared (`Arc`), never deep-copied per route.
//! - One `*Call` per hook invocation: the generated Envoy resource and the
//!   hook's context message.
//! - [`Reply`]: `Ok(None)` = "unchanged" (the protocol's unset message),
//!   `Ok(Some(r))` = replace with `r`, `Err` = the hook failed.

pub mod check;
pub(crate) mod gateway;
pub mod pgv;
pub mod resources;
pub mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

/// The hooks of `hooks.xdsTranslator.post`, named as Envoy Gateway's
/// configuration names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    Route,
    VirtualHost,
    HttpListener,
    Cluster,
    Endpoints,
    Translation,
}

impl Hook {
    /// The configuration spelling (`Route`, `VirtualHost`, `HTTPListener`, …).
    pub fn config_name(self) -> &'static str {
        match self {
            Hook::Route => "Route",
            Hook::VirtualHost => "VirtualHost",
            Hook::HttpListener => "HTTPListener",
            Hook::Cluster => "Cluster",
            Hook::Endpoints => "Endpoints",
            Hook::Translation => "Translation",
        }
    }

    /// The rpc this hook calls (`PostRouteModify`, …): metric label and
    /// error text.
    pub fn rpc(self) -> &'static str {
        match self {
            Hook::Route => "PostRouteModify",
            Hook::VirtualHost => "PostVirtualHostModify",
            Hook::HttpListener => "PostHTTPListenerModify",
            Hook::Cluster => "PostClusterModify",
            Hook::Endpoints => "PostEndpointsModify",
            Hook::Translation => "PostTranslateModify",
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rpc())
    }
}

/// A kind registered by the configuration (`resources`, `policyResources`,
/// `backendResources`): group and kind; the version is not part of identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

/// `hooks.xdsTranslator.translation`: which resources `PostTranslateModify`
/// receives. As Envoy Gateway's defaults (listeners and routes only when
/// asked for, clusters always) but secrets never: no TLS private key leaves
/// the control plane (README, "Writing an extension"), so the extension
/// configuration refuses `secret.includeAll: true` and a reply's secrets
/// are not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TranslationIncludes {
    pub listeners: bool,
    pub routes: bool,
    pub clusters: bool,
    pub secrets: bool,
}

impl Default for TranslationIncludes {
    fn default() -> Self {
        Self {
            listeners: false,
            routes: false,
            clusters: true,
            secrets: false,
        }
    }
}

/// What the configuration registers, as the translator needs it: which
/// kinds are extension resources and which hooks run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    pub resources: BTreeSet<GroupKind>,
    pub policy_resources: BTreeSet<GroupKind>,
    pub backend_resources: BTreeSet<GroupKind>,
    /// The version each kind above was registered at (one per kind; the
    /// configuration refuses two): Kubernetes mode watches that version.
    pub versions: BTreeMap<GroupKind, String>,
    pub hooks: BTreeSet<Hook>,
    pub translation: TranslationIncludes,
}

/// An extension resource as the protocol carries it: the object as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExtensionResource {
    pub unstructured_bytes: Arc<[u8]>,
}

/// `PostRouteModify`: one route generated from a rule that uses extension
/// resources (ExtensionRef filters) or is targeted by extension policies.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteCall {
    pub route: Route,
    /// The hostnames of the virtual host the route is generated for.
    pub hostnames: Vec<String>,
    pub extension_resources: Vec<ExtensionResource>,
    pub extension_policies: Vec<ExtensionResource>,
}

/// `PostVirtualHostModify`: every virtual host (its context is empty).
#[derive(Clone, Debug, PartialEq)]
pub struct VirtualHostCall {
    pub virtual_host: VirtualHost,
}

/// `PostHTTPListenerModify`: every HTTP(S) listener, with the extension
/// policies that target it (or its Gateway).
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerCall {
    pub listener: Listener,
    pub extension_resources: Vec<ExtensionResource>,
}

/// `PostClusterModify`: a cluster generated for a `backendResources` kind.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterCall {
    pub cluster: Cluster,
    pub backend_extension_resources: Vec<ExtensionResource>,
}

/// `PostEndpointsModify`: the load assignment of such a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointsCall {
    pub load_assignment: ClusterLoadAssignment,
}

/// `PostTranslateModify`: once per Gateway, with the resources its
/// [`TranslationIncludes`] select.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranslateCall {
    pub extension_resources: Vec<ExtensionResource>,
    pub clusters: Vec<Cluster>,
    pub secrets: Vec<Secret>,
    pub listeners: Vec<Listener>,
    pub routes: Vec<RouteConfiguration>,
}

/// The reply to [`TranslateCall`]: the protocol makes the returned lists
/// the final lists of their kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranslateReply {
    pub clusters: Vec<Cluster>,
    pub secrets: Vec<Secret>,
    pub listeners: Vec<Listener>,
    pub routes: Vec<RouteConfiguration>,
}

/// Why a hook call produced no usable reply. Every variant has class
/// `extension` ([`crate::error::ErrorClass::Extension`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    #[error("{hook} exceeded its deadline of {deadline_ms} ms")]
    Deadline { hook: Hook, deadline_ms: u64 },
    #[error("{hook}: extension server unreachable: {message}")]
    Unreachable { hook: Hook, message: String },
    #[error("{hook} failed: {code}: {message}")]
    Status {
        hook: Hook,
        code: String,
        message: String,
    },
    #[error("{hook} replied with something that cannot be used: {message}")]
    InvalidReply { hook: Hook, message: String },
}

/// A failed call, and whether the extension manager that made it is
/// configured `failOpen` (then the unmodified resource is used and the
/// failure is a warning).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("extension {manager}: {failure}")]
pub struct HookError {
    /// Which configured extension manager (its service address).
    pub manager: String,
    pub failure: HookFailure,
    pub fail_open: bool,
}

/// One call's outcome: `Ok(None)` = unchanged.
pub type Reply<T> = Result<Option<T>, HookError>;

/// The extension hooks, as the translator calls them. Each method takes
/// every call one Gateway needs for that hook and returns one reply per
/// call, in order. Implementations must return exactly `calls.len()`
/// replies; the translator treats a missing reply as a failed call.
pub trait Hooks: Sync {
    fn registration(&self) -> &Registration;

    fn post_route_modify(&self, calls: Vec<RouteCall>) -> Vec<Reply<Route>>;
    fn post_virtual_host_modify(&self, calls: Vec<VirtualHostCall>) -> Vec<Reply<VirtualHost>>;
    fn post_http_listener_modify(&self, calls: Vec<ListenerCall>) -> Vec<Reply<Listener>>;
    fn post_cluster_modify(&self, calls: Vec<ClusterCall>) -> Vec<Reply<Cluster>>;
    fn post_endpoints_modify(&self, calls: Vec<EndpointsCall>) -> Vec<Reply<ClusterLoadAssignment>>;
    fn post_translate_modify(&self, call: TranslateCall) -> Reply<TranslateReply>;
}
