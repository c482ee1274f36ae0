//! What `serve` knows right now, shared by the translation loop, the xDS
//! observer and the admin API.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use translate::status::StatusBody;

use super::metrics::{GatewayLabels, Metrics, XdsLabels};

/// The last NACK of one Gateway, shown as `Programmed=False` until Envoy
/// ACKs a later version of that type.
#[derive(Clone, Debug)]
pub struct Nack {
    pub type_url: String,
    pub version: String,
    pub message: String,
}

#[derive(Default)]
pub struct Current {
    pub output: Option<translate::Output>,
    /// The input snapshot `output` was translated from.
    pub inputs: Option<Arc<provider::Snapshot>>,
    pub generation: u64,
    /// Gateway → type URL → NACK.
    pub nacks: BTreeMap<String, BTreeMap<String, Nack>>,
    pub ready: bool,
}

pub struct State {
    pub current: RwLock<Current>,
    pub metrics: Metrics,
}

impl State {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Current::default()),
            metrics: Metrics::new(),
        })
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, Current> {
        self.current.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The status document (design §5), with NACKs overlaid on Gateways.
    pub fn status_document(&self) -> serde_json::Value {
        let cur = self.read();
        let Some(out) = &cur.output else {
            return serde_json::json!({ "status": [], "diagnostics": [] });
        };
        let mut status = out.status.clone();
        for s in &mut status {
            if s.kind != "Gateway" {
                continue;
            }
            let key = format!(
                "{}/{}",
                s.metadata.namespace.as_deref().unwrap_or(""),
                s.metadata.name
            );
            let Some(nacks) = cur.nacks.get(&key).filter(|n| !n.is_empty()) else {
                continue;
            };
            if let StatusBody::Gateway(g) = &mut s.status {
                let msg = nacks
                    .values()
                    .map(|n| {
                        format!(
                            "Envoy rejected {} version {}: {}",
                            xds::types::short(&n.type_url),
                            n.version,
                            n.message
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                for c in &mut g.conditions {
                    if c.type_ == "Programmed" {
                        c.status = "False";
                        c.reason = "Invalid";
                        c.message = msg.clone();
                    }
                }
            }
        }
        serde_json::json!({ "status": status, "diagnostics": out.diagnostics })
    }
}

/// Feeds xDS events into metrics and the NACK overlay.
pub struct Observer(pub Arc<State>);

impl xds::Observer for Observer {
    fn connected(&self, node: &str) {
        self.0
            .metrics
            .connected_envoys
            .get_or_create(&GatewayLabels { gateway: node.into() })
            .inc();
        tracing::info!(gateway = node, "Envoy connected");
    }

    fn disconnected(&self, node: &str) {
        self.0
            .metrics
            .connected_envoys
            .get_or_create(&GatewayLabels { gateway: node.into() })
            .dec();
        tracing::info!(gateway = node, "Envoy disconnected");
    }

    fn pushed(&self, node: &str, type_url: &str, _version: &str) {
        self.0
            .metrics
            .xds_pushes
            .get_or_create(&labels(node, type_url))
            .inc();
    }

    fn acked(&self, node: &str, type_url: &str, version: &str) {
        self.0
            .metrics
            .xds_acks
            .get_or_create(&labels(node, type_url))
            .inc();
        let mut cur = self.0.write();
        if let Some(n) = cur.nacks.get_mut(node)
            && n.get(type_url).is_some_and(|n| n.version != version)
        {
            n.remove(type_url);
        }
    }

    fn nacked(&self, node: &str, type_url: &str, version: &str, message: &str) {
        self.0
            .metrics
            .xds_nacks
            .get_or_create(&labels(node, type_url))
            .inc();
        tracing::error!(
            gateway = node,
            type_url,
            version,
            message,
            "Envoy rejected configuration (NACK)"
        );
        self.0.write().nacks.entry(node.to_string()).or_default().insert(
            type_url.to_string(),
            Nack {
                type_url: type_url.into(),
                version: version.into(),
                // Without the proto dump Envoy appends.
                message: translate::strict::envoy_reason(message),
            },
        );
    }
}

fn labels(node: &str, type_url: &str) -> XdsLabels {
    XdsLabels {
        gateway: node.into(),
        type_url: xds::types::short(type_url).into(),
    }
}
