//! Shared helpers for the translate integration tests.
#![allow(dead_code)]

use serde_json::Value;

pub const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
";

pub fn run(yaml: &str) -> translate::Output {
    let loaded = api::loader::load_str("test.yaml", yaml);
    let mut out = translate::translate(&loaded.inputs, &translate::Settings::default());
    let mut d = loaded.diagnostics;
    d.append(&mut out.diagnostics);
    out.diagnostics = d;
    out
}

/// The status stanza of one object, as the JSON that would be written.
pub fn status(out: &translate::Output, kind: &str, ns: Option<&str>, name: &str) -> Option<Value> {
    out.status
        .iter()
        .find(|s| s.kind == kind && s.metadata.name == name && s.metadata.namespace.as_deref() == ns)
        .map(|s| translate::status::Timed::new(&s.status, &out.transition_time).to_json())
}

/// The condition `type_` of a route's parent entry for Gateway `gw`.
pub fn parent_condition(
    out: &translate::Output,
    route: (&str, &str),
    gw: &str,
    type_: &str,
) -> Option<Value> {
    let st = status(out, "HTTPRoute", Some(route.0), route.1)?;
    st["parents"]
        .as_array()?
        .iter()
        .filter(|p| p["parentRef"]["name"] == gw)
        .flat_map(|p| p["conditions"].as_array().into_iter().flatten())
        .find(|c| c["type"] == type_)
        .cloned()
}

pub fn listener_status(out: &translate::Output, gw: (&str, &str), listener: &str) -> Option<Value> {
    status(out, "Gateway", Some(gw.0), gw.1)?["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == listener)
        .cloned()
}

pub fn condition<'a>(conds: &'a Value, type_: &str) -> Option<&'a Value> {
    conds.as_array()?.iter().find(|c| c["type"] == type_)
}

/// (status, reason) of a condition, for compact assertions.
pub fn sr(c: Option<impl std::borrow::Borrow<Value>>) -> (String, String) {
    let c = c.as_ref().map(|c| c.borrow());
    match c {
        Some(c) => (
            c["status"].as_str().unwrap_or("").into(),
            c["reason"].as_str().unwrap_or("").into(),
        ),
        None => ("<missing>".into(), "<missing>".into()),
    }
}
