//! Status conditions with the Gateway API's exact types and reasons.
//!
//! Every decision the translator makes about an object leaves a [`Condition`]
//! here; `render` turns the collected conditions into the `status` stanza that
//! would be written to the object.

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

/// One `metav1.Condition`, without its `lastTransitionTime`: every
/// condition of one translation carries that call's one time
/// (`Settings::transition_time`), so it is held once, by the output
/// (`Output::transition_time`), and added when a status is serialized
/// ([`Timed`]). A status the incremental translator reuses is therefore the
/// very same value from call to call, shared rather than copied and
/// restamped (ARCHITECTURE.md, "Incremental translation").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: i64,
}

/// Builds conditions stamped with one generation.
#[derive(Clone, Copy, Debug)]
pub struct Stamp {
    pub generation: i64,
}

impl Stamp {
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
        }
    }
}

/// A status value (or part of one) with the transition time its conditions
/// are serialized with. The status types hold no time and do not implement
/// `Serialize` themselves, so a status can only be written through this:
/// no condition ever leaves without its `lastTransitionTime`.
#[derive(Debug)]
pub struct Timed<'a, T: ?Sized> {
    pub value: &'a T,
    pub time: &'a str,
}

// By hand: a derive would require `T: Copy`, and `T` is often a slice.
impl<T: ?Sized> Clone for Timed<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Timed<'_, T> {}

impl<'a, T: ?Sized> Timed<'a, T> {
    pub fn new(value: &'a T, time: &'a str) -> Self {
        Self { value, time }
    }

    fn with<U: ?Sized>(&self, value: &'a U) -> Timed<'a, U> {
        Timed {
            value,
            time: self.time,
        }
    }
}

impl<T: ?Sized> Timed<'_, T>
where
    for<'b> Timed<'b, T>: Serialize,
{
    /// As JSON (what the Kubernetes status writer and the views compare).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|e| serde_json::json!({ "@error": e.to_string() }))
    }
}

impl Serialize for Timed<'_, Condition> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.value;
        let mut m = s.serialize_struct("Condition", 6)?;
        m.serialize_field("type", c.type_)?;
        m.serialize_field("status", c.status)?;
        m.serialize_field("reason", c.reason)?;
        m.serialize_field("message", &c.message)?;
        m.serialize_field("observedGeneration", &c.observed_generation)?;
        m.serialize_field("lastTransitionTime", self.time)?;
        m.end()
    }
}

impl<T> Serialize for Timed<'_, [T]>
where
    for<'b> Timed<'b, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.value.iter().map(|v| self.with(v)))
    }
}

impl<T> Serialize for Timed<'_, Vec<T>>
where
    for<'b> Timed<'b, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with(self.value.as_slice()).serialize(s)
    }
}

impl<T: ?Sized> Serialize for Timed<'_, std::sync::Arc<T>>
where
    for<'b> Timed<'b, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with(&**self.value).serialize(s)
    }
}

impl Serialize for Timed<'_, crate::ObjectStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.value;
        let mut m = s.serialize_struct("ObjectStatus", 4)?;
        m.serialize_field("apiVersion", &o.api_version)?;
        m.serialize_field("kind", &o.kind)?;
        m.serialize_field("metadata", &o.metadata)?;
        m.serialize_field("status", &self.with(&o.status))?;
        m.end()
    }
}

impl Serialize for Timed<'_, StatusBody> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.value {
            StatusBody::Conditions { conditions } => {
                let mut m = s.serialize_struct("StatusBody", 1)?;
                m.serialize_field("conditions", &self.with(conditions))?;
                m.end()
            }
            StatusBody::Gateway(g) => self.with(g).serialize(s),
            StatusBody::ListenerSet(l) => self.with(l).serialize(s),
            StatusBody::Route { parents } => {
                let mut m = s.serialize_struct("StatusBody", 1)?;
                m.serialize_field("parents", &self.with(parents))?;
                m.end()
            }
            StatusBody::Policy { ancestors } => {
                let mut m = s.serialize_struct("StatusBody", 1)?;
                m.serialize_field("ancestors", &self.with(ancestors))?;
                m.end()
            }
            StatusBody::Json(v) => v.serialize(s),
        }
    }
}

impl Serialize for Timed<'_, GatewayStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let g = self.value;
        let mut m = s.serialize_struct("GatewayStatus", 4)?;
        m.serialize_field("addresses", &g.addresses)?;
        m.serialize_field("conditions", &self.with(&g.conditions))?;
        m.serialize_field("listeners", &self.with(&g.listeners))?;
        if let Some(n) = g.attached_listener_sets {
            m.serialize_field("attachedListenerSets", &n)?;
        }
        m.end()
    }
}

impl Serialize for Timed<'_, ListenerSetStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let l = self.value;
        let mut m = s.serialize_struct("ListenerSetStatus", 2)?;
        m.serialize_field("conditions", &self.with(&l.conditions))?;
        m.serialize_field("listeners", &self.with(&l.listeners))?;
        m.end()
    }
}

impl Serialize for Timed<'_, ListenerStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let l = self.value;
        let mut m = s.serialize_struct("ListenerStatus", 4)?;
        m.serialize_field("name", &l.name)?;
        m.serialize_field("supportedKinds", &l.supported_kinds)?;
        m.serialize_field("attachedRoutes", &l.attached_routes)?;
        m.serialize_field("conditions", &self.with(&l.conditions))?;
        m.end()
    }
}

impl Serialize for Timed<'_, PolicyAncestorStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.value;
        let mut m = s.serialize_struct("PolicyAncestorStatus", 3)?;
        m.serialize_field("ancestorRef", &a.ancestor_ref)?;
        m.serialize_field("controllerName", &a.controller_name)?;
        m.serialize_field("conditions", &self.with(&a.conditions))?;
        m.end()
    }
}

impl Serialize for Timed<'_, RouteParentStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.value;
        let mut m = s.serialize_struct("RouteParentStatus", 3)?;
        m.serialize_field("parentRef", &p.parent_ref)?;
        m.serialize_field("controllerName", &p.controller_name)?;
        m.serialize_field("conditions", &self.with(&p.conditions))?;
        m.end()
    }
}

/// The `status` stanza of one object, typed; rendered to JSON only when
/// output is written.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusBody {
    Conditions {
        conditions: Vec<Condition>,
    },
    Gateway(GatewayStatus),
    ListenerSet(ListenerSetStatus),
    Route {
        parents: Vec<RouteParentStatus>,
    },
    /// A policy's (GEP-713): one entry per ancestor.
    Policy {
        ancestors: Vec<PolicyAncestorStatus>,
    },
    Json(serde_json::Value),
}

impl StatusBody {
    /// The object's own conditions (not its listeners' or parents'); none
    /// for a route or a status held as JSON.
    pub fn conditions(&self) -> &[Condition] {
        match self {
            StatusBody::Conditions { conditions } => conditions,
            StatusBody::Gateway(g) => &g.conditions,
            StatusBody::ListenerSet(l) => &l.conditions,
            StatusBody::Route { .. } | StatusBody::Policy { .. } | StatusBody::Json(_) => &[],
        }
    }
}

impl From<serde_json::Value> for StatusBody {
    fn from(v: serde_json::Value) -> Self {
        StatusBody::Json(v)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GatewayStatus {
    pub addresses: Vec<GatewayAddress>,
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
    /// Only for Gateways that allow ListenerSets (absent reads as 0).
    pub attached_listener_sets: Option<i32>,
}

/// A ListenerSet's status: its own conditions and its listeners' (which
/// never appear in the parent Gateway's `status.listeners`).
#[derive(Clone, Debug, PartialEq)]
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

#[derive(Clone, Debug, PartialEq)]
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

#[derive(Clone, Debug, PartialEq)]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    pub conditions: Vec<Condition>,
}

/// One `status.ancestors` entry of a policy (GEP-713).
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyAncestorStatus {
    /// Group, kind, namespace and name only.
    pub ancestor_ref: ParentReference,
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
