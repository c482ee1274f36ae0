//! Echo "pods" for the base manifests' Deployments, on loopback.
//!
//! Each pod gets its own address (127.0.2.K) and listens on the numeric
//! target ports of the Services that select it, so the EndpointSlices we
//! synthesise look exactly like a cluster's: pod IP + targetPort, several
//! pods per slice.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde_json::Value;

/// One running echo pod.
pub struct Pod {
    pub name: String,
    pub namespace: String,
    pub deployment: String,
    pub labels: BTreeMap<String, String>,
    pub ip: Ipv4Addr,
    pub requests: echo::RequestLog,
}

pub struct Backends {
    pub pods: Vec<Pod>,
}

/// Deployments whose pods we can stand in for: echo-basic in HTTP or gRPC
/// mode. TLS, TCP and UDP backends are only used by tests this runner does
/// not have (BackendTLSPolicy, TLSRoute, TCPRoute, UDPRoute).
fn echo_mode_supported(deployment: &Value) -> bool {
    let env_names: Vec<&str> = deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| c.get("env").and_then(Value::as_array).into_iter().flatten())
        .filter_map(|e| e.get("name").and_then(Value::as_str))
        .collect();
    let image_ok = deployment
        .pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .is_some_and(|i| i.contains("echo-basic"));
    image_ok && !env_names.contains(&"TLS_SERVER_CERT")
}

pub fn labels_of(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Numeric target ports of every Service in `docs` that selects a pod with
/// `labels` in `namespace` (named target ports fall back to echo-basic's
/// 3000).
fn target_ports(docs: &[Value], namespace: &str, labels: &BTreeMap<String, String>) -> BTreeSet<u16> {
    let mut ports = BTreeSet::new();
    for svc in docs.iter().filter(|d| d["kind"] == "Service") {
        if svc.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
            continue;
        }
        if !selects(&labels_of(svc.pointer("/spec/selector")), labels) {
            continue;
        }
        for p in svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let port = p
                .get("targetPort")
                .or_else(|| p.get("port"))
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
                .unwrap_or(3000);
            ports.insert(port);
        }
    }
    ports
}

/// Deterministic pod-name suffix in the shape Kubernetes uses
/// (`<deployment>-<10 chars>-<5 chars>`): the weight test strips the last two
/// parts to find the Deployment.
fn pod_name(deployment: &str, replica: usize) -> String {
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in deployment.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut pick = |n: usize, salt: u64| -> String {
        (0..n)
            .map(|i| {
                h = (h ^ (salt + i as u64)).wrapping_mul(0x0100_0000_01b3);
                alphabet[(h >> 33) as usize % alphabet.len()] as char
            })
            .collect()
    };
    let rs = pick(10, 0);
    let pod = pick(5, 100 + replica as u64);
    format!("{deployment}-{rs}-{pod}")
}

/// Starts `replicas` echo servers per supported Deployment in `docs`.
pub async fn start(docs: &[Value]) -> anyhow::Result<Backends> {
    let mut pods = Vec::new();
    let mut next_ip: u8 = 1;
    for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
        if !echo_mode_supported(d) {
            continue;
        }
        let namespace = d
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let name = d.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let labels = labels_of(d.pointer("/spec/template/metadata/labels"));
        let replicas = d.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as usize;
        let mut ports = target_ports(docs, namespace, &labels);
        ports.insert(3000);
        for r in 0..replicas {
            let ip = Ipv4Addr::new(127, 0, 2, next_ip);
            next_ip = next_ip.checked_add(1).context("more than 254 echo pods")?;
            let pod = pod_name(name, r);
            let requests: echo::RequestLog = Arc::new(Mutex::new(Vec::new()));
            for port in &ports {
                let listener = tokio::net::TcpListener::bind((ip, *port))
                    .await
                    .with_context(|| format!("echo pod {namespace}/{pod}: cannot bind {ip}:{port}"))?;
                let config = echo::Config {
                    namespace: namespace.to_string(),
                    pod: pod.clone(),
                };
                let options = echo::Options {
                    requests: Some(requests.clone()),
                    ..echo::Options::default()
                };
                tokio::spawn(echo::serve_with(
                    listener,
                    config,
                    options,
                    std::future::pending(),
                ));
            }
            pods.push(Pod {
                name: pod,
                namespace: namespace.to_string(),
                deployment: name.to_string(),
                labels: labels.clone(),
                ip,
                requests,
            });
        }
    }
    Ok(Backends { pods })
}

impl Backends {
    pub fn selected<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods
            .iter()
            .filter(move |p| p.namespace == namespace && selects(selector, &p.labels))
    }

    /// Has any pod of `deployment` in `namespace` logged a request for `uri`?
    pub fn received(&self, namespace: &str, deployment: &str, uri: &str) -> bool {
        self.pods
            .iter()
            .filter(|p| p.namespace == namespace && p.deployment == deployment)
            .any(|p| p.requests.lock().is_ok_and(|log| log.iter().any(|u| u == uri)))
    }
}
