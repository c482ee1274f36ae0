//! Protobuf ⇄ canonical proto-JSON for the Envoy types, and the design §5
//! document (`portcullis translate -o json|yaml`).
//!
//! envoy-types generates prost structs but does not expose the descriptor
//! set they were generated from, so the crate's own `types.bin` is vendored
//! as `descriptors/envoy-types-0.7.7.bin` (update it together with the
//! `envoy-types` pin). A message is rendered by encoding it with prost,
//! decoding the bytes as a `prost_reflect::DynamicMessage` of the same full
//! name and serializing that with Envoy's canonical field names
//! (`use_proto_field_name`): `google.protobuf.Any` renders as
//! `{"@type": "type.googleapis.com/…", …fields}`, Durations as `"10s"`,
//! enums by name, 64-bit integers as strings, default values omitted.

use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use serde_json::{Map, Value, json};

use super::OutputError;
use crate::{GatewayXds, Output};

/// The descriptor set envoy-types 0.7.7 was generated from (its
/// `src/generated/types.bin`, copied unchanged).
static DESCRIPTOR_SET: &[u8] = include_bytes!("../../descriptors/envoy-types-0.7.7.bin");

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    DescriptorPool::decode(DESCRIPTOR_SET)
        .expect("the vendored descriptors/envoy-types-0.7.7.bin is a valid FileDescriptorSet")
});

/// The descriptor pool of every message envoy-types knows (Envoy, xds, udpa,
/// google.protobuf, …). Decoded once, on first use.
pub fn descriptor_pool() -> &'static DescriptorPool {
    &POOL
}

fn descriptor(type_name: &str) -> Result<MessageDescriptor, OutputError> {
    let name = type_name
        .strip_prefix("type.googleapis.com/")
        .unwrap_or(type_name);
    POOL.get_message_by_name(name)
        .ok_or_else(|| OutputError::UnknownType(name.to_string()))
}

const SERIALIZE: SerializeOptions = SerializeOptions::new().use_proto_field_name(true);

/// The wire bytes of a message of type `type_name` (a full name such as
/// `envoy.config.listener.v3.Listener`, or a type URL) as canonical
/// proto-JSON.
pub fn bytes_to_json(type_name: &str, bytes: &[u8]) -> Result<Value, OutputError> {
    let desc = descriptor(type_name)?;
    let dynamic = DynamicMessage::decode(desc.clone(), bytes).map_err(|source| OutputError::Decode {
        type_name: type_name.to_string(),
        source,
    })?;
    let mut value = dynamic
        .serialize_with_options(serde_json::value::Serializer, &SERIALIZE)
        .map_err(|e| OutputError::Json {
            type_name: type_name.to_string(),
            message: e.to_string(),
        })?;
    sort_map_fields(&mut value, &desc, 0);
    Ok(value)
}

/// Protobuf maps decode into hash maps, whose order changes from run to
/// run: sort the keys of every map field (recursively, through `Any`) so
/// the same message always prints the same.
fn sort_map_fields(value: &mut Value, desc: &MessageDescriptor, depth: usize) {
    // Envoy configs nest far less deeply; a bound keeps this total.
    if depth > 64 {
        return;
    }
    let Value::Object(obj) = value else { return };
    if desc.full_name() == "google.protobuf.Any" {
        let inner = obj
            .get("@type")
            .and_then(Value::as_str)
            .and_then(|t| descriptor(t).ok());
        if let Some(inner) = inner {
            for (k, v) in obj.iter_mut() {
                if let Some(f) = inner.get_field_by_name(k) {
                    sort_field(v, &f, depth);
                }
            }
        }
        return;
    }
    for (k, v) in obj.iter_mut() {
        if let Some(f) = desc.get_field_by_name(k) {
            sort_field(v, &f, depth);
        }
    }
}

fn sort_field(v: &mut Value, f: &prost_reflect::FieldDescriptor, depth: usize) {
    use prost_reflect::Kind;
    if f.is_map() {
        let Kind::Message(entry) = f.kind() else { return };
        let value_desc = match entry.map_entry_value_field().kind() {
            Kind::Message(m) => Some(m),
            _ => None,
        };
        if let Value::Object(m) = v {
            m.sort_keys();
            if let Some(vd) = value_desc {
                for (_, x) in m.iter_mut() {
                    sort_map_fields(x, &vd, depth + 1);
                }
            }
        }
        return;
    }
    if let Kind::Message(m) = f.kind() {
        match v {
            Value::Array(items) => items.iter_mut().for_each(|x| sort_map_fields(x, &m, depth + 1)),
            other => sort_map_fields(other, &m, depth + 1),
        }
    }
}

/// Any envoy-types message as canonical proto-JSON.
pub fn message_to_json<M: Message + Name>(msg: &M) -> Result<Value, OutputError> {
    bytes_to_json(&M::full_name(), &msg.encode_to_vec())
}

/// A `google.protobuf.Any` (envoy-types' own) as proto-JSON: the packed
/// message's fields plus `"@type"`.
pub fn any_to_json(any: &envoy_types::pb::google::protobuf::Any) -> Result<Value, OutputError> {
    message_to_json(any)
}

/// Canonical proto-JSON (proto field names or lowerCamelCase, `@type` for
/// Any) back into a prost message of type `type_name` (full name or type
/// URL). Unknown fields are errors.
pub fn json_to_message<M: Message + Default>(type_name: &str, value: &Value) -> Result<M, OutputError> {
    let desc = descriptor(type_name)?;
    let dynamic =
        DynamicMessage::deserialize_with_options(desc, value, &DeserializeOptions::new()).map_err(|e| {
            OutputError::Json {
                type_name: type_name.to_string(),
                message: e.to_string(),
            }
        })?;
    M::decode(dynamic.encode_to_vec().as_slice()).map_err(|source| OutputError::Decode {
        type_name: type_name.to_string(),
        source,
    })
}

/// [`json_to_message`] with the type name taken from `M`.
pub fn message_from_json<M: Message + Name + Default>(value: &Value) -> Result<M, OutputError> {
    json_to_message(&M::full_name(), value)
}

/// The resource name used to identify a resource that cannot be rendered.
pub(super) trait Resource {
    /// The protobuf type's short name, for messages.
    const NAME: &'static str;
    /// The protobuf type's full name.
    fn type_name() -> String;
    fn resource_name(&self) -> &str;
    fn to_json(&self) -> Result<Value, OutputError>;
    /// The message's wire bytes.
    fn encoded(&self) -> std::borrow::Cow<'_, [u8]>;
}

macro_rules! resource {
    ($t:ty, $field:ident) => {
        impl Resource for $t {
            const NAME: &'static str = <$t as Name>::NAME;
            fn type_name() -> String {
                <$t as Name>::full_name()
            }
            fn resource_name(&self) -> &str {
                &self.$field
            }
            fn to_json(&self) -> Result<Value, OutputError> {
                message_to_json(self)
            }
            fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
                std::borrow::Cow::Owned(self.encode_to_vec())
            }
        }
    };
}

// Shared resources (`GatewayXds::clusters`) render as what they share.
impl<T: Resource> Resource for std::sync::Arc<T> {
    const NAME: &'static str = T::NAME;
    fn type_name() -> String {
        T::type_name()
    }
    fn resource_name(&self) -> &str {
        T::resource_name(self)
    }
    fn to_json(&self) -> Result<Value, OutputError> {
        T::to_json(self)
    }
    fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
        T::encoded(self)
    }
}

// Rendered from its bytes: no decode into the prost message on the way.
impl Resource for crate::xds::encoded::EncodedRouteConfiguration {
    const NAME: &'static str = <envoy_types::pb::envoy::config::route::v3::RouteConfiguration as Name>::NAME;
    fn type_name() -> String {
        <envoy_types::pb::envoy::config::route::v3::RouteConfiguration as Name>::full_name()
    }
    fn resource_name(&self) -> &str {
        &self.name
    }
    fn to_json(&self) -> Result<Value, OutputError> {
        bytes_to_json(&Self::type_name(), self.bytes())
    }
    fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(self.bytes())
    }
}
resource!(envoy_types::pb::envoy::config::listener::v3::Listener, name);
resource!(envoy_types::pb::envoy::config::cluster::v3::Cluster, name);
resource!(
    envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment,
    cluster_name
);
resource!(
    envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret,
    name
);

/// What `diagnostics` says of a resource that cannot be rendered.
pub(super) fn render_error<R: Resource>(r: &R, e: &OutputError) -> String {
    format!("{} {:?} cannot be rendered: {e}", R::NAME, r.resource_name())
}

/// Renders a list of resources; those that cannot be rendered (an Any whose
/// type is not in the descriptor pool, e.g. from an extension hook) become
/// `{"name": …, "@error": …}` and are reported through `errors`.
fn render_list<R: Resource>(items: &[R], errors: &mut Vec<String>) -> Value {
    Value::Array(
        items
            .iter()
            .map(|r| match r.to_json() {
                Ok(v) => v,
                Err(e) => {
                    errors.push(render_error(r, &e));
                    json!({ "name": r.resource_name(), "@error": e.to_string() })
                }
            })
            .collect(),
    )
}

fn render_gateway(gw: &GatewayXds, errors: &mut Vec<String>) -> Value {
    let mut m = Map::new();
    m.insert("listeners".into(), render_list(&gw.listeners, errors));
    m.insert("routes".into(), render_list(&gw.routes, errors));
    m.insert("clusters".into(), render_list(&gw.clusters, errors));
    m.insert("endpoints".into(), render_list(&gw.endpoints, errors));
    m.insert("secrets".into(), render_list(&gw.secrets, errors));
    Value::Object(m)
}

/// `{"listeners": […], "routes": […], "clusters": […], "endpoints": […],
/// "secrets": […]}`, each resource as canonical proto-JSON. Fails on the
/// first resource that cannot be rendered.
pub fn try_gateway_xds_to_json(gw: &GatewayXds) -> Result<Value, OutputError> {
    let mut errors = Vec::new();
    let v = render_gateway(gw, &mut errors);
    match errors.into_iter().next() {
        None => Ok(v),
        Some(e) => Err(OutputError::Render(e)),
    }
}

/// [`try_gateway_xds_to_json`] that never fails: a resource that cannot be
/// rendered appears as `{"name": …, "@error": …}` (which Envoy would reject,
/// so nothing fails open).
pub fn gateway_xds_to_json(gw: &GatewayXds) -> Value {
    render_gateway(gw, &mut Vec::new())
}

/// The design §5 document: `{"gateways": {"ns/name": {…}}, "status": […],
/// "diagnostics": […]}`. A resource that cannot be rendered appears as
/// `{"name": …, "@error": …}` and adds an error to `diagnostics`.
pub fn output_to_json(out: &Output) -> Value {
    let mut errors = Vec::new();
    let mut gateways = Map::new();
    for (key, gw) in &out.gateways {
        let mut errs = Vec::new();
        gateways.insert(key.clone(), render_gateway(gw, &mut errs));
        errors.extend(errs.into_iter().map(|e| (key.clone(), e)));
    }
    let status =
        serde_json::to_value(out.timed_status()).unwrap_or_else(|e| json!([{ "@error": e.to_string() }]));
    let mut diagnostics = match serde_json::to_value(&out.diagnostics) {
        Ok(Value::Array(a)) => a,
        Ok(other) => vec![other],
        Err(e) => vec![json!({ "severity": "error", "message": format!("cannot render diagnostics: {e}") })],
    };
    for (key, e) in errors {
        diagnostics.push(json!({
            "severity": "error",
            "object": format!("Gateway {key}"),
            "message": e,
        }));
    }
    let mut m = Map::new();
    m.insert("gateways".into(), Value::Object(gateways));
    m.insert("status".into(), status);
    m.insert("diagnostics".into(), Value::Array(diagnostics));
    Value::Object(m)
}

/// Any JSON value as YAML (key order kept). Multi-line strings (PEM) are
/// literal blocks (`|`); long single-line strings (type URLs, messages) stay
/// on one line instead of being folded.
pub fn json_to_yaml(value: &Value) -> Result<String, OutputError> {
    serde_saphyr::to_string_with_options(value, yaml_options()).map_err(|e| OutputError::Yaml(e.to_string()))
}

/// How every YAML document is written (the streamed one too).
pub(super) fn yaml_options() -> serde_saphyr::SerializerOptions {
    serde_saphyr::ser_options! { folded_wrap_chars: usize::MAX }
}

/// [`output_to_json`] as YAML, key order kept.
pub fn output_to_yaml(out: &Output) -> String {
    let v = output_to_json(out);
    // serde-saphyr serializes every serde_json::Value; should it ever fail,
    // JSON is valid YAML too.
    json_to_yaml(&v).unwrap_or_else(|_| serde_json::to_string_pretty(&v).unwrap_or_default() + "\n")
}
