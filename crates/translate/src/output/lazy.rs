//! The design §5 document as a [`serde::Serialize`] that renders each part
//! when the serializer reaches it: what `portcullis translate -o yaml`
//! streams through serde-saphyr ([`super::stream::write_output_yaml`]).
//!
//! A YAML emitter keeps layout state (indentation, whether a value follows
//! a dash or a key) that a pre-rendered fragment could not be spliced into,
//! so the streamed document is not stitched from text: it is the same tree
//! of `serialize_map(Some(len))` / `serialize_entry` / `serialize_seq(Some
//! (len))` / `serialize_element` calls that serializing the whole
//! [`super::output_to_json`] `Value` makes, with each resource (and inside
//! a route configuration each virtual host's own fields and each route)
//! rendered to a `serde_json::Value` only while it is being serialized.
//! The same calls give the same bytes, whatever the serializer; at most one
//! route (or other resource) is a `Value` at a time.
//!
//! Route configurations are walked on their encoded bytes ([`wire`]): the
//! configuration's own fields and each virtual host's own fields are
//! rendered without their repeated children, and the children are
//! serialized into their place (proto-JSON orders fields by number).

use std::cell::RefCell;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};

use super::OutputError;
use super::json::{Resource, bytes_to_json, render_error};
use crate::xds::encoded::EncodedRouteConfiguration;
use crate::{GatewayXds, Output};

pub(super) const ROUTE_CONFIGURATION: &str = "envoy.config.route.v3.RouteConfiguration";
pub(super) const VIRTUAL_HOST: &str = "envoy.config.route.v3.VirtualHost";
pub(super) const ROUTE: &str = "envoy.config.route.v3.Route";
/// `RouteConfiguration.virtual_hosts` and `VirtualHost.routes`.
pub(super) const RC_VIRTUAL_HOSTS: u32 = 2;
pub(super) const VH_ROUTES: u32 = 3;

/// Walking protobuf wire format one field at a time, without collecting
/// the fields: a route configuration of 10,000 routes is walked in place.
pub(super) mod wire {
    pub use crate::xds::wire::fields;

    /// The message without the fields numbered `child` (re-encoded by
    /// concatenation, which is the same message: fields may come in any
    /// order), and how many `child` fields it has. `None` if malformed or
    /// a `child` field is not length-delimited.
    pub fn split(bytes: &[u8], child: u32) -> Option<(Vec<u8>, usize)> {
        let mut own = Vec::new();
        let mut children = 0;
        for f in fields(bytes) {
            let f = f.ok()?;
            if f.number == child {
                f.payload?;
                children += 1;
            } else {
                own.extend_from_slice(f.whole);
            }
        }
        Some((own, children))
    }

    /// The payloads of the `child` fields, in order (after [`split`] has
    /// checked the bytes).
    pub fn children(bytes: &[u8], child: u32) -> impl Iterator<Item = &[u8]> {
        fields(bytes)
            .map_while(Result::ok)
            .filter(move |f| f.number == child)
            .filter_map(|f| f.payload)
    }

    /// Whether a route configuration's framing is sound down to its routes,
    /// so that a walk that has started writing cannot meet a malformed part.
    pub fn route_configuration_is_well_formed(bytes: &[u8]) -> bool {
        fields(bytes).all(|f| match f {
            Err(()) => false,
            Ok(f) if f.number == super::RC_VIRTUAL_HOSTS => f.payload.is_some_and(|host| {
                fields(host).all(|r| r.is_ok_and(|r| r.number != super::VH_ROUTES || r.payload.is_some()))
            }),
            Ok(_) => true,
        })
    }
}

/// The design §5 document, serialized part by part. Render errors are
/// collected while `gateways` is serialized and appended to `diagnostics`
/// (which comes after it), as [`super::output_to_json`] does.
pub(super) struct Document<'a> {
    out: &'a Output,
    /// (Gateway key, message) of every resource that could not be rendered.
    errors: RefCell<Vec<(String, String)>>,
}

impl<'a> Document<'a> {
    pub(super) fn new(out: &'a Output) -> Self {
        Self {
            out,
            errors: RefCell::new(Vec::new()),
        }
    }
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("gateways", &Gateways(self))?;
        m.serialize_entry("status", &EachAsValue(&self.out.timed_status()))?;
        m.serialize_entry("diagnostics", &Diagnostics(self))?;
        m.end()
    }
}

struct Gateways<'d, 'a>(&'d Document<'a>);

impl Serialize for Gateways<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let gateways = &self.0.out.gateways;
        let mut m = s.serialize_map(Some(gateways.len()))?;
        for (key, gw) in gateways {
            m.serialize_entry(
                key,
                &Gateway {
                    gw,
                    errors: &RenderErrors {
                        key,
                        errors: &self.0.errors,
                    },
                },
            )?;
        }
        m.end()
    }
}

/// Where a Gateway's render errors go.
struct RenderErrors<'e> {
    key: &'e str,
    errors: &'e RefCell<Vec<(String, String)>>,
}

impl RenderErrors<'_> {
    fn push(&self, message: String) {
        self.errors.borrow_mut().push((self.key.to_string(), message));
    }
}

struct Gateway<'g> {
    gw: &'g GatewayXds,
    errors: &'g RenderErrors<'g>,
}

impl Serialize for Gateway<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (gw, errors) = (self.gw, self.errors);
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry(
            "listeners",
            &List {
                items: &gw.listeners,
                errors,
            },
        )?;
        m.serialize_entry(
            "routes",
            &RouteConfigurations {
                items: &gw.routes,
                errors,
            },
        )?;
        m.serialize_entry(
            "clusters",
            &List {
                items: &gw.clusters,
                errors,
            },
        )?;
        m.serialize_entry(
            "endpoints",
            &List {
                items: &gw.endpoints,
                errors,
            },
        )?;
        m.serialize_entry(
            "secrets",
            &List {
                items: &gw.secrets,
                errors,
            },
        )?;
        m.end()
    }
}

/// A list of resources, each a `Value` only while it is serialized; one
/// that cannot be rendered is `{"name": …, "@error": …}` (as in the
/// whole-document path).
struct List<'g, R> {
    items: &'g [R],
    errors: &'g RenderErrors<'g>,
}

fn rendered_or_error<R: Resource>(r: &R, errors: &RenderErrors<'_>) -> Value {
    r.to_json().unwrap_or_else(|e| {
        errors.push(render_error(r, &e));
        json!({ "name": r.resource_name(), "@error": e.to_string() })
    })
}

impl<R: Resource> Serialize for List<'_, R> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for r in self.items {
            seq.serialize_element(&rendered_or_error(r, self.errors))?;
        }
        seq.end()
    }
}

struct RouteConfigurations<'g> {
    items: &'g [EncodedRouteConfiguration],
    errors: &'g RenderErrors<'g>,
}

impl Serialize for RouteConfigurations<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for rc in self.items {
            seq.serialize_element(&RouteConfiguration {
                rc,
                errors: self.errors,
            })?;
        }
        seq.end()
    }
}

/// One route configuration, a virtual host's own fields and a route at a
/// time. Its own fields are rendered before anything of it is written, so
/// that they fail it whole (`{"name": …, "@error": …}`); a virtual host or
/// route that cannot be rendered (an Any of a type the descriptor pool
/// lacks) is written as `{"@error": …}` in its place, which Envoy rejects,
/// and reported: unlike the whole-document path, the rest of its
/// configuration is already written.
struct RouteConfiguration<'g> {
    rc: &'g EncodedRouteConfiguration,
    errors: &'g RenderErrors<'g>,
}

impl Serialize for RouteConfiguration<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.rc.bytes();
        let split = wire::route_configuration_is_well_formed(bytes)
            .then(|| wire::split(bytes, RC_VIRTUAL_HOSTS))
            .flatten();
        let Some((envelope, hosts)) = split else {
            // Not walkable (never for what the translator encodes): whole.
            return rendered_or_error(self.rc, self.errors).serialize(s);
        };
        let own = match bytes_to_json(ROUTE_CONFIGURATION, &envelope) {
            Ok(v) => v,
            Err(e) => {
                self.errors.push(render_error(self.rc, &e));
                return json!({ "name": self.rc.name, "@error": e.to_string() }).serialize(s);
            }
        };
        drop(envelope);
        let failed = RefCell::new(None);
        let r = WithField {
            type_name: ROUTE_CONFIGURATION,
            own: &own,
            field: "virtual_hosts",
            value: (hosts > 0).then_some(&VirtualHosts {
                bytes,
                failed: &failed,
            }),
        }
        .serialize(s);
        if let Some(e) = failed.into_inner() {
            self.errors.push(render_error(self.rc, &e));
        }
        r
    }
}

/// A message's own fields (`own`, rendered without one repeated field)
/// with that field serialized at its place: before the first key of a
/// higher field number. `value: None` leaves it out (proto-JSON omits an
/// empty list).
pub(super) struct WithField<'v, T> {
    pub type_name: &'static str,
    pub own: &'v Value,
    pub field: &'static str,
    pub value: Option<&'v T>,
}

/// The field number of `key` in `type_name`, for placing a field; keys
/// that are not fields (`@type`) sort last, as no field follows them.
pub(super) fn field_number(type_name: &str, key: &str) -> u32 {
    super::json::descriptor_pool()
        .get_message_by_name(type_name)
        .and_then(|d| d.get_field_by_name(key))
        .map_or(u32::MAX, |f| f.number())
}

impl<T: Serialize> Serialize for WithField<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(own) = self.own else {
            return self.own.serialize(s);
        };
        let mut m = s.serialize_map(Some(own.len() + usize::from(self.value.is_some())))?;
        let at = field_number(self.type_name, self.field);
        let mut pending = self.value;
        for (key, v) in own {
            if let Some(value) = pending
                && field_number(self.type_name, key) > at
            {
                m.serialize_entry(self.field, value)?;
                pending = None;
            }
            m.serialize_entry(key, v)?;
        }
        if let Some(value) = pending {
            m.serialize_entry(self.field, value)?;
        }
        m.end()
    }
}

struct VirtualHosts<'r> {
    bytes: &'r [u8],
    failed: &'r RefCell<Option<OutputError>>,
}

/// `{"@error": …}` in place of a part that cannot be rendered; the first
/// error is kept for the configuration's diagnostic.
fn part_or_error(r: Result<Value, OutputError>, failed: &RefCell<Option<OutputError>>) -> Value {
    r.unwrap_or_else(|e| {
        let v = json!({ "@error": e.to_string() });
        failed.borrow_mut().get_or_insert(e);
        v
    })
}

impl Serialize for VirtualHosts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let count = wire::children(self.bytes, RC_VIRTUAL_HOSTS).count();
        let mut seq = s.serialize_seq(Some(count))?;
        for host in wire::children(self.bytes, RC_VIRTUAL_HOSTS) {
            seq.serialize_element(&VirtualHost {
                bytes: host,
                failed: self.failed,
            })?;
        }
        seq.end()
    }
}

struct VirtualHost<'r> {
    bytes: &'r [u8],
    failed: &'r RefCell<Option<OutputError>>,
}

impl Serialize for VirtualHost<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Checked by `route_configuration_is_well_formed`.
        let (own, routes) = wire::split(self.bytes, VH_ROUTES).unwrap_or_default();
        let own = match bytes_to_json(VIRTUAL_HOST, &own) {
            Ok(v) => v,
            Err(e) => return part_or_error(Err(e), self.failed).serialize(s),
        };
        WithField {
            type_name: VIRTUAL_HOST,
            own: &own,
            field: "routes",
            value: (routes > 0).then_some(&Routes {
                bytes: self.bytes,
                count: routes,
                failed: self.failed,
            }),
        }
        .serialize(s)
    }
}

struct Routes<'r> {
    bytes: &'r [u8],
    count: usize,
    failed: &'r RefCell<Option<OutputError>>,
}

impl Serialize for Routes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.count))?;
        for route in wire::children(self.bytes, VH_ROUTES) {
            seq.serialize_element(&part_or_error(bytes_to_json(ROUTE, route), self.failed))?;
        }
        seq.end()
    }
}

/// Every status, each converted to a `Value` first, as
/// `serde_json::to_value` of the whole list would (a struct serialized
/// directly may lay out differently than its `Value`).
struct EachAsValue<'a, 't>(&'t crate::status::Timed<'a, [std::sync::Arc<crate::ObjectStatus>]>);

impl Serialize for EachAsValue<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let statuses = self.0;
        let mut seq = s.serialize_seq(Some(statuses.value.len()))?;
        for item in statuses.value {
            seq.serialize_element(&crate::status::Timed::new(&**item, statuses.time).to_json())?;
        }
        seq.end()
    }
}

struct Diagnostics<'d, 'a>(&'d Document<'a>);

impl Serialize for Diagnostics<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let diagnostics = &self.0.out.diagnostics;
        let errors = self.0.errors.borrow();
        let mut seq = s.serialize_seq(Some(diagnostics.len() + errors.len()))?;
        for d in diagnostics {
            let v = serde_json::to_value(d).unwrap_or_else(
                |e| json!({ "severity": "error", "message": format!("cannot render diagnostics: {e}") }),
            );
            seq.serialize_element(&v)?;
        }
        for (key, e) in errors.iter() {
            seq.serialize_element(&json!({
                "severity": "error",
                "object": format!("Gateway {key}"),
                "message": e,
            }))?;
        }
        seq.end()
    }
}
