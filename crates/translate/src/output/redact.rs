//! Redaction of key material, as Envoy's own `/config_dump` does it.
//!
//! Envoy marks every field that holds a secret with the field option
//! `(udpa.annotations.sensitive) = true` (a TLS certificate's
//! `private_key` and `password`, a generic secret's `secret`, HMAC keys,
//! session-ticket keys, …) and, before dumping its configuration, walks the
//! message by reflection (`MessageUtil::redact`): below a sensitive field
//! every string and bytes value becomes `"[redacted]"` and every other
//! scalar is cleared; `Any` values are unpacked, redacted and packed again.
//! This module does the same walk on the descriptors vendored with
//! envoy-types (see [`super::json`]), so every sensitive field of every
//! resource is covered, including ones portcullis does not generate today,
//! rather than a list of known secret fields.
//!
//! Envoy marks no header value sensitive, but a tenant's route or policy may
//! carry a credential in one: a `RequestHeaderModifier` or TrafficPolicy
//! `headerModifiers`/`transformation` setting `Authorization`, an
//! ext_authz `headers_to_add`, a route matching `Cookie` exactly. So a
//! header whose name reads as a credential ([`is_credential_header`]) has
//! its value redacted wherever it appears as a `HeaderValue` (every header
//! addition and mutation) or a `HeaderMatcher` (route and RBAC matches):
//! the name is kept, every string of the value or matcher becomes
//! [`REDACTED`], other scalars (`invert_match`, append actions) are kept.
//!
//! Only what leaves for humans is redacted (the admin API, `describe`);
//! the xDS served to Envoy and `translate -o json|bootstrap` keep the keys,
//! which Envoy needs.

use std::sync::{Arc, LazyLock};

use prost::Message;
use prost_reflect::ReflectMessage;
use prost_reflect::{DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, Value};

use super::json::descriptor_pool;
use crate::GatewayXds;
use crate::xds::encoded::EncodedRouteConfiguration;

/// What a redacted string or bytes value becomes (Envoy's spelling).
pub const REDACTED: &str = "[redacted]";

static SENSITIVE: LazyLock<Option<ExtensionDescriptor>> =
    LazyLock::new(|| descriptor_pool().get_extension_by_name("udpa.annotations.sensitive"));

/// Nesting bound: Envoy configs nest far less; keeps the walk total.
const MAX_DEPTH: usize = 100;

/// A copy of `gw` with every sensitive field of every resource redacted.
pub fn gateway(gw: &GatewayXds) -> GatewayXds {
    GatewayXds {
        listeners: gw.listeners.iter().map(message).collect(),
        routes: gw
            .routes
            .iter()
            .map(|r| EncodedRouteConfiguration::new(&message(&r.decode())))
            .collect(),
        clusters: gw.clusters.iter().map(|c| Arc::new(message(&**c))).collect(),
        endpoints: gw.endpoints.iter().map(|e| Arc::new(message(&**e))).collect(),
        secrets: gw.secrets.iter().map(message).collect(),
    }
}

/// A copy of a prost message with its sensitive fields redacted. A message
/// whose type is not in the descriptor pool, or that cannot be redacted
/// and decoded back, becomes its default (empty) value: nothing is shown
/// rather than something unredacted.
pub fn message<M: Message + prost::Name + Default>(msg: &M) -> M {
    let Some(desc) = descriptor_pool().get_message_by_name(&M::full_name()) else {
        return M::default();
    };
    let Ok(mut dynamic) = DynamicMessage::decode(desc, msg.encode_to_vec().as_slice()) else {
        return M::default();
    };
    redact(&mut dynamic, false, 0);
    M::decode(dynamic.encode_to_vec().as_slice()).unwrap_or_default()
}

/// Whether a field carries `(udpa.annotations.sensitive) = true`.
fn is_sensitive(field: &FieldDescriptor) -> bool {
    let Some(ext) = SENSITIVE.as_ref() else {
        return false;
    };
    let options = field.options();
    options.has_extension(ext) && matches!(options.get_extension(ext).as_ref(), Value::Bool(true))
}

/// Messages that hold one header's value (or a matcher of it), with the
/// field that names the header.
const HEADER_MESSAGES: [(&str, &str); 2] = [
    ("envoy.config.core.v3.HeaderValue", "key"),
    ("envoy.config.route.v3.HeaderMatcher", "name"),
];

/// Whether a header's value is a credential the admin views must not show:
/// `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and any
/// name with `auth`, `token`, `secret`, `password`/`passwd`, `api-key`/
/// `api_key`/`apikey`, `credential`, `session` or `signature` in it
/// (`X-API-Key`, `X-Auth-Token`, `X-Amz-Security-Token` …). Generous on
/// purpose: a value hidden from a view costs nothing (Envoy still gets it),
/// a credential shown leaves the control plane.
pub fn is_credential_header(name: &str) -> bool {
    const PARTS: [&str; 12] = [
        "auth",
        "cookie",
        "token",
        "secret",
        "password",
        "passwd",
        "api-key",
        "api_key",
        "apikey",
        "credential",
        "session",
        "signature",
    ];
    let name = name.to_ascii_lowercase();
    PARTS.iter().any(|p| name.contains(p))
}

/// Every string and bytes value of `msg` (and below) except the field
/// `keep` becomes [`REDACTED`]; other scalars are kept.
fn redact_strings(msg: &mut DynamicMessage, keep: Option<&str>, depth: usize) {
    if depth > MAX_DEPTH {
        msg.clear();
        return;
    }
    let fields: Vec<FieldDescriptor> = msg
        .fields()
        .map(|(f, _)| f)
        .filter(|f| Some(f.name()) != keep)
        .collect();
    for field in fields {
        match msg.get_field_mut(&field) {
            Value::Message(m) => redact_strings(m, None, depth + 1),
            Value::List(items) => {
                for item in items.iter_mut() {
                    match item {
                        Value::Message(m) => redact_strings(m, None, depth + 1),
                        other => {
                            redact_scalar(other);
                        }
                    }
                }
            }
            Value::Map(entries) => {
                for v in entries.values_mut() {
                    match v {
                        Value::Message(m) => redact_strings(m, None, depth + 1),
                        other => {
                            redact_scalar(other);
                        }
                    }
                }
            }
            other => {
                redact_scalar(other);
            }
        }
    }
}

/// Envoy's `MessageUtil::redact`: below a sensitive field (or when an
/// ancestor is one), strings and bytes become [`REDACTED`], other scalars
/// are cleared; messages are walked, `Any` through its packed message.
fn redact(msg: &mut DynamicMessage, ancestor_sensitive: bool, depth: usize) {
    if depth > MAX_DEPTH {
        // Cannot be walked safely: show nothing of it.
        msg.clear();
        return;
    }
    if msg.descriptor().full_name() == "google.protobuf.Any" {
        redact_any(msg, ancestor_sensitive, depth);
        return;
    }
    let full_name = msg.descriptor().full_name().to_string();
    if let Some((_, name_field)) = HEADER_MESSAGES.iter().find(|(m, _)| *m == full_name)
        && !ancestor_sensitive
    {
        let credential = matches!(
            msg.get_field_by_name(name_field).as_deref(),
            Some(Value::String(name)) if is_credential_header(name)
        );
        if credential {
            redact_strings(msg, Some(name_field), depth + 1);
            return;
        }
    }
    let fields: Vec<FieldDescriptor> = msg.fields().map(|(f, _)| f).collect();
    for field in fields {
        let sensitive = ancestor_sensitive || is_sensitive(&field);
        let is_message = matches!(field.kind(), Kind::Message(_));
        if !is_message && !sensitive {
            continue;
        }
        let mut clear = false;
        {
            let value = msg.get_field_mut(&field);
            match value {
                Value::Message(m) => redact(m, sensitive, depth + 1),
                Value::List(items) => {
                    for item in items.iter_mut() {
                        match item {
                            Value::Message(m) => redact(m, sensitive, depth + 1),
                            other => clear |= !redact_scalar(other),
                        }
                    }
                }
                Value::Map(entries) => {
                    for v in entries.values_mut() {
                        match v {
                            Value::Message(m) => redact(m, sensitive, depth + 1),
                            other if sensitive => clear |= !redact_scalar(other),
                            _ => {}
                        }
                    }
                }
                other => clear = !redact_scalar(other),
            }
        }
        if clear {
            msg.clear_field(&field);
        }
    }
}

/// Replaces a string or bytes value; `false` for any other scalar (which
/// the caller clears).
fn redact_scalar(value: &mut Value) -> bool {
    match value {
        Value::String(s) => {
            *s = REDACTED.to_string();
            true
        }
        Value::Bytes(b) => {
            *b = prost::bytes::Bytes::from_static(REDACTED.as_bytes());
            true
        }
        _ => false,
    }
}

/// An `Any`: its packed message is decoded, redacted and packed again. One
/// whose type is unknown cannot be walked: it is kept only when nothing
/// above it is sensitive (Envoy does the same), else emptied.
fn redact_any(any: &mut DynamicMessage, ancestor_sensitive: bool, depth: usize) {
    let type_url = match any.get_field_by_name("type_url").as_deref() {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let bytes = match any.get_field_by_name("value").as_deref() {
        Some(Value::Bytes(b)) => b.clone(),
        _ => prost::bytes::Bytes::new(),
    };
    let name = type_url.rsplit('/').next().unwrap_or_default();
    let inner = descriptor_pool()
        .get_message_by_name(name)
        .and_then(|desc| DynamicMessage::decode(desc, bytes).ok());
    match inner {
        Some(mut inner) => {
            redact(&mut inner, ancestor_sensitive, depth + 1);
            any.set_field_by_name("value", Value::Bytes(inner.encode_to_vec().into()));
        }
        None if ancestor_sensitive => {
            any.set_field_by_name("value", Value::Bytes(prost::bytes::Bytes::new()));
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        GenericSecret, Secret, TlsCertificate, secret,
    };

    use super::*;

    fn inline(s: &str) -> Option<DataSource> {
        Some(DataSource {
            specifier: Some(Specifier::InlineString(s.into())),
            ..Default::default()
        })
    }

    #[test]
    fn the_sensitive_annotation_is_in_the_vendored_descriptors() {
        assert!(SENSITIVE.is_some());
        let tls = descriptor_pool()
            .get_message_by_name("envoy.extensions.transport_sockets.tls.v3.TlsCertificate")
            .expect("TlsCertificate");
        let sensitive = |name: &str| tls.get_field_by_name(name).is_some_and(|f| is_sensitive(&f));
        assert!(sensitive("private_key"));
        assert!(sensitive("password"));
        assert!(!sensitive("certificate_chain"));
    }

    #[test]
    fn private_keys_and_generic_secrets_are_redacted_and_certificates_kept() {
        let tls = Secret {
            name: "app/cert".into(),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: inline("CERT"),
                private_key: inline("-----BEGIN PRIVATE KEY-----\nKEY\n"),
                password: Some(DataSource {
                    specifier: Some(Specifier::InlineBytes(b"hunter2".to_vec())),
                    ..Default::default()
                }),
                ..Default::default()
            })),
        };
        let redacted = message(&tls);
        let Some(secret::Type::TlsCertificate(cert)) = &redacted.r#type else {
            panic!("{redacted:?}");
        };
        assert_eq!(redacted.name, "app/cert");
        assert_eq!(cert.certificate_chain, inline("CERT"));
        assert_eq!(cert.private_key, inline(REDACTED));
        assert_eq!(
            cert.password.as_ref().and_then(|p| p.specifier.clone()),
            Some(Specifier::InlineBytes(REDACTED.as_bytes().to_vec()))
        );
        let generic = Secret {
            name: "g".into(),
            r#type: Some(secret::Type::GenericSecret(GenericSecret {
                secret: inline("token"),
                ..Default::default()
            })),
        };
        let Some(secret::Type::GenericSecret(g)) = message(&generic).r#type else {
            panic!("generic");
        };
        assert_eq!(g.secret, inline(REDACTED));
    }

    #[test]
    fn credential_header_values_are_redacted_names_and_other_headers_kept() {
        use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
        use envoy_types::pb::envoy::config::route::v3::{
            HeaderMatcher, Route, VirtualHost, header_matcher::HeaderMatchSpecifier,
        };
        use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
        let add = |key: &str, value: &str| HeaderValueOption {
            header: Some(HeaderValue {
                key: key.into(),
                value: value.into(),
                raw_value: value.as_bytes().to_vec(),
            }),
            ..Default::default()
        };
        let vhost = VirtualHost {
            name: "vh".into(),
            request_headers_to_add: vec![add("authorization", "Bearer s3cr3t"), add("x-env", "prod")],
            routes: vec![Route {
                request_headers_to_add: vec![add("X-API-Key", "k3y"), add("cookie", "sid=1")],
                r#match: Some(envoy_types::pb::envoy::config::route::v3::RouteMatch {
                    headers: vec![HeaderMatcher {
                        name: "authorization".into(),
                        invert_match: true,
                        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                            match_pattern: Some(MatchPattern::Exact("Bearer m4tch".into())),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let redacted = message(&vhost);
        let shown = format!("{redacted:?}");
        for secret in ["s3cr3t", "k3y", "sid=1", "m4tch"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        let h = redacted.request_headers_to_add[0]
            .header
            .as_ref()
            .expect("header");
        assert_eq!((h.key.as_str(), h.value.as_str()), ("authorization", REDACTED));
        assert_eq!(redacted.request_headers_to_add[1], add("x-env", "prod"));
        let m = &redacted.routes[0].r#match.as_ref().expect("match").headers[0];
        assert_eq!(m.name, "authorization");
        assert!(m.invert_match);
        assert!(is_credential_header("Proxy-Authorization"));
        assert!(is_credential_header("x-auth-token"));
        assert!(!is_credential_header("x-request-id"));
    }

    #[test]
    fn keys_packed_in_an_any_are_redacted() {
        use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket::ConfigType};
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
            CommonTlsContext, UpstreamTlsContext,
        };
        let context = UpstreamTlsContext {
            common_tls_context: Some(CommonTlsContext {
                tls_certificates: vec![TlsCertificate {
                    certificate_chain: inline("CERT"),
                    private_key: inline("KEY"),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let socket = TransportSocket {
            name: "tls".into(),
            config_type: Some(ConfigType::TypedConfig(envoy_types::pb::google::protobuf::Any {
                type_url: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
                    .into(),
                value: context.encode_to_vec(),
            })),
        };
        let Some(ConfigType::TypedConfig(any)) = message(&socket).config_type else {
            panic!("typed config");
        };
        let inner = UpstreamTlsContext::decode(any.value.as_slice()).expect("decode");
        let cert = &inner.common_tls_context.expect("context").tls_certificates[0];
        assert_eq!(cert.private_key, inline(REDACTED));
        assert_eq!(cert.certificate_chain, inline("CERT"));
    }
}
