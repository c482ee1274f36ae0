//! Unary gRPC answers, hand-encoded (no codegen):
//!
//! * `grpc.health.v1.Health/Check` (and `/Watch`, one message): SERVING.
//! * every other method: an `EchoResponse` of echo-basic's
//!   `gateway_api_conformance.echo_basic.grpcecho` proto (fully qualified
//!   method, request metadata, `:authority`, pod context), `grpc-status: 0`,
//!   except `GrpcEcho/EchoThree`, which upstream leaves unimplemented
//!   (`grpc-status: 12`).
//!
//! Every answer carries `x-echo-grpc-path: /service/method`, so routing by
//! gRPC method can be asserted from response headers alone.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, http::request::Parts};

use crate::{Body, Config};

pub(crate) const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";
pub(crate) const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";
pub(crate) const ECHO_THREE: &str = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/EchoThree";

/// `application/grpc`, `application/grpc+proto`, `application/grpc;…`
/// (gRPC-Web is not gRPC framing and is answered as plain HTTP).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let ct = ct.to_ascii_lowercase();
    ct == "application/grpc" || ct.starts_with("application/grpc+") || ct.starts_with("application/grpc;")
}

pub(crate) fn respond(parts: &Parts, config: &Config) -> Response<Body> {
    let path = parts.uri.path();
    let builder = Response::builder()
        .status(200)
        .header(CONTENT_TYPE, "application/grpc");
    let builder = match HeaderValue::from_str(path) {
        Ok(v) => builder.header("x-echo-grpc-path", v),
        Err(_) => builder,
    };
    if path == ECHO_THREE {
        // Trailers-only response, as grpc-go sends for unimplemented methods.
        return builder
            .header("grpc-status", "12")
            .header("grpc-message", "method EchoThree not implemented")
            .body(crate::full(Bytes::new()))
            .unwrap_or_default();
    }
    let message = if path == HEALTH_CHECK || path == HEALTH_WATCH {
        vec![0x08, 0x01] // HealthCheckResponse { status: SERVING }
    } else {
        echo_response(parts, config)
    };
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0); // not compressed
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    framed.extend_from_slice(&message);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let body = Full::new(Bytes::from(framed))
        .with_trailers(async move { Some(Ok(trailers)) })
        .boxed();
    builder.body(body).unwrap_or_default()
}

/// Metadata grpc-go hides from handlers.
const RESERVED: &[&str] = &[
    "te",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-message-type",
    "grpc-message",
    "grpc-status",
    "grpc-status-details-bin",
    "host",
];

/// `EchoResponse { assertions: Assertions { fully_qualified_method = 1,
/// headers = 2 (Header { key = 1, value = 2 }), authority = 3,
/// context = 4 (Context { namespace = 1, ingress = 2, service_name = 3,
/// pod = 4 }) } }`
fn echo_response(parts: &Parts, config: &Config) -> Vec<u8> {
    let authority = parts
        .uri
        .authority()
        .map(|a| a.to_string())
        .or_else(|| {
            parts
                .headers
                .get("host")
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_default();
    let mut assertions = Vec::new();
    put_str(&mut assertions, 1, parts.uri.path().as_bytes());
    let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
    if !authority.is_empty() {
        headers.push((b":authority", authority.as_bytes()));
    }
    for (k, v) in &parts.headers {
        if !RESERVED.contains(&k.as_str()) {
            headers.push((k.as_str().as_bytes(), v.as_bytes()));
        }
    }
    for (k, v) in headers {
        let mut h = Vec::new();
        put_str(&mut h, 1, k);
        put_str(&mut h, 2, &String::from_utf8_lossy(v).into_owned().into_bytes());
        put_message(&mut assertions, 2, &h);
    }
    put_str(&mut assertions, 3, authority.as_bytes());
    let mut context = Vec::new();
    put_str(&mut context, 1, config.namespace.as_bytes());
    put_str(&mut context, 4, config.pod.as_bytes());
    put_message(&mut assertions, 4, &context);
    let mut response = Vec::new();
    put_message(&mut response, 1, &assertions);
    response
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A length-delimited field, always written (sub-messages).
fn put_message(buf: &mut Vec<u8>, field: u32, data: &[u8]) {
    put_varint(buf, u64::from(field) << 3 | 2);
    put_varint(buf, data.len() as u64);
    buf.extend_from_slice(data);
}

/// A proto3 string field: omitted when empty.
fn put_str(buf: &mut Vec<u8>, field: u32, data: &[u8]) {
    if !data.is_empty() {
        put_message(buf, field, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut b = Vec::new();
        put_varint(&mut b, 1);
        put_varint(&mut b, 300);
        assert_eq!(b, [0x01, 0xac, 0x02]);
    }

    #[test]
    fn grpc_content_types() {
        let mut h = HeaderMap::new();
        for (ct, want) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC", true),
            ("application/grpc-web", false),
            ("application/json", false),
        ] {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            assert_eq!(is_grpc(&h), want, "{ct}");
        }
    }
}
