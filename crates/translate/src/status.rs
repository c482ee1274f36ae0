//! Status conditions with the Gateway API's exact types and reasons.
//!
//! Every decision the translator makes about an object leaves a [`Condition`]
//! here; `render` turns the collected conditions into the `status` stanza that
//! would be written to the object.

use serde::Serialize;

/// One `metav1.Condition`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: i64,
    pub last_transition_time: String,
}

/// Builds conditions stamped with one generation and time.
#[derive(Clone, Copy, Debug)]
pub struct Stamp<'a> {
    pub generation: i64,
    pub time: &'a str,
}

impl Stamp<'_> {
    pub fn condition(
        &self,
        type_: &'static str,
        ok: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Condition {
        Condition {
            type_,
            status: if ok { "True" } else { "False" },
            reason,
            message: message.into(),
            observed_generation: self.generation,
            last_transition_time: self.time.into(),
        }
    }
}

/// The `status` stanza of one object, typed; rendered to JSON only when
/// output is written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StatusBody {
    Conditions { conditions: Vec<Condition> },
    Gateway(GatewayStatus),
    ListenerSet(ListenerSetStatus),
    Route { parents: Vec<RouteParentStatus> },
    Json(serde_json::Value),
}

impl From<serde_json::Value> for StatusBody {
    fn from(v: serde_json::Value) -> Self {
        StatusBody::Json(v)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    pub addresses: Vec<GatewayAddress>,
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
    /// Only for Gateways that allow ListenerSets (absent reads as 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attached_listener_sets: Option<i32>,
}

/// A ListenerSet's status: its own conditions and its listeners' (which
/// never appear in the parent Gateway's `status.listeners`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListenerSetStatus {
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GatewayAddress {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteGroupKind {
    pub group: &'static str,
    pub kind: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// Condition types and reasons, spelled as upstream (gateway-api v1.5
/// `apis/v1/{gateway,gatewayclass,shared}_types.go`).
pub mod reason {
    // Shared
    pub const ACCEPTED: &str = "Accepted";
    pub const PROGRAMMED: &str = "Programmed";
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    pub const INVALID: &str = "Invalid";
    // GatewayClass
    pub const SUPPORTED_VERSION: &str = "SupportedVersion";
    pub const INVALID_PARAMETERS: &str = "InvalidParameters";
    pub const ADDRESS_NOT_ASSIGNED: &str = "AddressNotAssigned";
    // Gateway
    pub const LISTENERS_NOT_VALID: &str = "ListenersNotValid";
    // ListenerSet
    pub const NOT_ALLOWED: &str = "NotAllowed";
    // Listener
    pub const CONFLICTED: &str = "Conflicted";
    pub const NO_CONFLICTS: &str = "NoConflicts";
    pub const HOSTNAME_CONFLICT: &str = "HostnameConflict";
    pub const PROTOCOL_CONFLICT: &str = "ProtocolConflict";
    pub const PORT_UNAVAILABLE: &str = "PortUnavailable";
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    pub const INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
    pub const INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    // Route
    pub const NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
    pub const NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
    pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";
    pub const UNSUPPORTED_VALUE: &str = "UnsupportedValue";
    pub const INVALID_KIND: &str = "InvalidKind";
    pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
    pub const PARTIALLY_INVALID: &str = "PartiallyInvalid";
    pub const UNSUPPORTED_PROTOCOL_ROUTE: &str = "UnsupportedProtocol";
}
