//! Turns the upstream manifests into what a cluster would hold, for the
//! file provider: the GatewayClass the suite takes as a parameter, the
//! `kubernetes.io/metadata.name` label Kubernetes adds to Namespaces,
//! EndpointSlices a Service controller would write for the echo pods, and
//! the TLS Secrets the suite generates at run time. Deployments and
//! ConfigMaps are dropped (the pods are in [`crate::backends`]).

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::backends::{Backends, labels_of};
use crate::tls::Certs;

pub const GATEWAY_CLASS: &str = "portcullis";
pub const CONTROLLER: &str = "portcullis.dev/gateway-controller";

/// Parses a multi-document YAML file, filling the suite's placeholders.
pub fn read(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = text.replace("{GATEWAY_CLASS_NAME}", GATEWAY_CLASS);
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).with_context(|| format!("{}: invalid YAML", path.display()))?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

fn namespace_of(v: &Value) -> &str {
    v.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

/// What a cluster would hold for `docs`.
pub fn cluster_view(docs: &[Value], backends: &Backends) -> Vec<Value> {
    let mut out = Vec::new();
    for d in docs {
        match d["kind"].as_str().unwrap_or("") {
            "Deployment" | "ConfigMap" => {}
            "Namespace" => {
                let mut ns = d.clone();
                let name = name_of(d).to_string();
                let labels = &mut ns["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels["kubernetes.io/metadata.name"] = Value::String(name);
                out.push(ns);
            }
            "Service" => {
                out.push(d.clone());
                if let Some(slice) = endpoint_slice(d, backends) {
                    out.push(slice);
                }
            }
            _ => out.push(d.clone()),
        }
    }
    out
}

/// Ready endpoints for the pods `selector` picks in `ns`.
fn endpoints(
    backends: &Backends,
    ns: &str,
    selector: &std::collections::BTreeMap<String, String>,
) -> Vec<Value> {
    backends
        .selected(ns, selector)
        .map(|p| {
            json!({
                "addresses": [p.ip.to_string()],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": ns, "name": p.name},
            })
        })
        .collect()
}

/// The EndpointSlice the EndpointSlice controller would write for a Service
/// with a selector: every selected pod, ready, on the numeric target port.
fn endpoint_slice(svc: &Value, backends: &Backends) -> Option<Value> {
    let selector = labels_of(svc.pointer("/spec/selector"));
    if selector.is_empty() {
        return None;
    }
    let ns = namespace_of(svc);
    let name = name_of(svc);
    let endpoints = endpoints(backends, ns, &selector);
    let ports: Vec<Value> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let mut port = json!({
                "port": p.get("targetPort").or_else(|| p.get("port")).and_then(Value::as_u64).unwrap_or(3000),
                "protocol": p.get("protocol").and_then(Value::as_str).unwrap_or("TCP"),
            });
            if let Some(n) = p.get("name").and_then(Value::as_str) {
                port["name"] = Value::String(n.to_string());
            }
            if let Some(a) = p.get("appProtocol").and_then(Value::as_str) {
                port["appProtocol"] = Value::String(a.to_string());
            }
            port
        })
        .collect();
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": ns,
            "name": format!("{name}-echo"),
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }))
}

/// HTTPRouteServiceTypes patches its manual IPv4 EndpointSlices with the
/// infra-backend-v1 pod IPs before sending requests; the IPv6 ones stay
/// empty because our pods have no IPv6 address.
pub fn patch_manual_slices(docs: &mut [Value], backends: &Backends) {
    let infra_v1 = [("app".to_string(), "infra-backend-v1".to_string())]
        .into_iter()
        .collect();
    for d in docs.iter_mut() {
        if d["kind"] != "EndpointSlice" || d["addressType"] != "IPv4" {
            continue;
        }
        let ns = namespace_of(d).to_string();
        d["endpoints"] = Value::Array(endpoints(backends, &ns, &infra_v1));
    }
}

/// The objects the suite creates itself: the GatewayClass under test and
/// the generated TLS Secrets.
pub fn suite_objects(certs: &Certs) -> Vec<Value> {
    let mut out = vec![json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": CONTROLLER},
    })];
    for s in &certs.secrets {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"namespace": s.namespace, "name": s.name},
            "stringData": {"tls.crt": s.cert_pem, "tls.key": s.key_pem},
        }));
    }
    out
}

/// Writes `docs` as one JSON `List` (atomically: the provider must never
/// see a half-written file).
pub fn write(path: &Path, docs: &[Value]) -> anyhow::Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&list)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Removes one object (kind/namespace/name) from `docs`; false if absent.
pub fn remove(docs: &mut Vec<Value>, kind: &str, namespace: &str, name: &str) -> bool {
    let before = docs.len();
    docs.retain(|d| !(d["kind"] == kind && namespace_of(d) == namespace && name_of(d) == name));
    docs.len() != before
}
