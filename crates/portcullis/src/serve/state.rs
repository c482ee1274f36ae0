//! What `serve` knows right now, shared by the translation loop, the xDS
//! observer and the admin API.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

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
    /// Shared so that a slow reader (a config dump of 10,000 routes) takes
    /// it and lets go of the lock: the translation loop is not held up.
    pub output: Option<Arc<translate::Output>>,
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
    /// The file provider's health, once it has started.
    pub provider: OnceLock<provider::Health>,
    /// Signalled when a NACK appears or is cleared, so that a status sink
    /// (Kubernetes mode) republishes the Gateways' `Programmed`.
    pub nacks_changed: tokio::sync::Notify,
    /// The extension managers' client, when the config file has some.
    pub extensions: OnceLock<Arc<extension::Chain>>,
}

/// A provider busy with one burst for longer than this is stuck: edits
/// are not being applied, so `/readyz` says not ready. Each file read has
/// a deadline of `provider::READ_DEADLINE` (5 s), so a healthy provider
/// never comes close.
pub const PROVIDER_STUCK_AFTER: Duration = Duration::from_secs(15);

/// How long the startup probe of each extension manager may take.
pub const EXTENSION_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Why `serve` is not ready.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("the initial configuration is not served yet")]
    Initial,
    #[error(
        "the file provider has been processing one change for {0} s (limit {limit} s): edits are not being applied",
        limit = PROVIDER_STUCK_AFTER.as_secs()
    )]
    ProviderStuck(u64),
}

impl State {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Current::default()),
            metrics: Metrics::new(),
            provider: OnceLock::new(),
            nacks_changed: tokio::sync::Notify::new(),
            extensions: OnceLock::new(),
        })
    }

    /// Shows `chain` in metrics and `/api/status`: its calls feed the
    /// duration histogram, and its managers are dialled once so their
    /// reachability is known before any hook runs.
    pub fn attach_extensions(self: &Arc<Self>, chain: Arc<extension::Chain>) {
        let durations = self.metrics.extension_hook_duration.clone();
        chain.set_observer(Arc::new(move |_manager, hook, _result, elapsed| {
            durations
                .get_or_create(&super::metrics::HookLabels {
                    hook: hook.rpc().into(),
                })
                .observe(elapsed.as_secs_f64());
        }));
        chain.probe(EXTENSION_PROBE_TIMEOUT);
        let _ = self.extensions.set(chain);
    }

    /// Brings the extension call counters up to date (before `/metrics`
    /// renders).
    pub fn refresh_extension_metrics(&self) {
        if let Some(chain) = self.extensions.get() {
            self.metrics.sync_extension_calls(&chain.stats());
        }
    }

    /// Each extension manager's reachability, for `/api/status`.
    fn extension_managers(&self) -> Option<serde_json::Value> {
        let chain = self.extensions.get()?;
        let managers: Vec<serde_json::Value> = chain
            .reachability()
            .into_iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.manager,
                    "address": r.address,
                    // null until a call or the startup probe was made.
                    "reachable": r.reachable,
                    "lastSuccess": r.last_success.map(super::rfc3339),
                    "lastError": r.last_error,
                })
            })
            .collect();
        Some(serde_json::Value::Array(managers))
    }

    /// Ready once the first snapshot is served, and while the file
    /// provider keeps up.
    pub fn readiness(&self) -> Result<(), NotReady> {
        let busy = self.provider.get().and_then(provider::Health::busy_for);
        readiness(self.read().ready, busy)
    }

    /// Brings the provider gauges up to date (before `/metrics` renders).
    pub fn refresh_provider_metrics(&self) {
        let Some(health) = self.provider.get() else { return };
        let busy = health.busy_for().unwrap_or_default();
        self.metrics.provider_busy_seconds.set(busy.as_secs_f64());
        let stuck = i64::from(busy >= PROVIDER_STUCK_AFTER);
        self.metrics.provider_stuck.set(stuck);
        let timeouts = health.read_timeouts();
        let counted = self.metrics.provider_read_timeouts.get();
        if timeouts > counted {
            self.metrics.provider_read_timeouts.inc_by(timeouts - counted);
        }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, Current> {
        self.current.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The status document (design §5), with NACKs overlaid on Gateways.
    pub fn status_document(&self) -> serde_json::Value {
        let mut doc = self.status_and_diagnostics();
        if let Some(m) = self.extension_managers()
            && let Some(o) = doc.as_object_mut()
        {
            o.insert("extensionManagers".into(), m);
        }
        doc
    }

    fn status_and_diagnostics(&self) -> serde_json::Value {
        // One read: the status and the diagnostics of the same translation.
        let cur = self.read();
        let Some(out) = &cur.output else {
            return serde_json::json!({ "status": [], "diagnostics": [] });
        };
        let status = with_nacks(&cur, out);
        serde_json::json!({
            "status": translate::status::Timed::new(&status, &out.transition_time).to_json(),
            "diagnostics": out.diagnostics,
        })
    }

    /// The translation's status with NACKs overlaid on Gateways
    /// (`Programmed=False`), and its transition time: what the admin API
    /// shows and Kubernetes mode writes.
    pub fn status_with_nacks(&self) -> (Vec<Arc<translate::ObjectStatus>>, String) {
        let cur = self.read();
        let Some(out) = &cur.output else {
            return (Vec::new(), String::new());
        };
        (with_nacks(&cur, out), out.transition_time.clone())
    }
}

/// `out`'s statuses, shared, but for the Gateways with NACKs: those are
/// copied and get `Programmed=False`.
fn with_nacks(cur: &Current, out: &translate::Output) -> Vec<Arc<translate::ObjectStatus>> {
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
        if let StatusBody::Gateway(g) = &mut Arc::make_mut(s).status {
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
    status
}

/// Ready once the first snapshot is served (`served`), and while the
/// provider has not been busy with one change for [`PROVIDER_STUCK_AFTER`].
fn readiness(served: bool, provider_busy: Option<Duration>) -> Result<(), NotReady> {
    if !served {
        return Err(NotReady::Initial);
    }
    match provider_busy {
        Some(busy) if busy >= PROVIDER_STUCK_AFTER => Err(NotReady::ProviderStuck(busy.as_secs())),
        _ => Ok(()),
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
            self.0.nacks_changed.notify_one();
        }
    }

    fn nacked(&self, node: &str, type_url: &str, version: &str, message: &str) {
        self.0
            .metrics
            .xds_nacks
            .get_or_create(&labels(node, type_url))
            .inc();
        // Without the proto dump Envoy may append: it can hold a rejected
        // Secret's key, and logs must not.
        let reason = translate::strict::envoy_reason(message);
        tracing::error!(
            gateway = node,
            type_url,
            version,
            message = reason.as_str(),
            "Envoy rejected configuration (NACK)"
        );
        self.0.write().nacks.entry(node.to_string()).or_default().insert(
            type_url.to_string(),
            Nack {
                type_url: type_url.into(),
                version: version.into(),
                message: reason,
            },
        );
        self.0.nacks_changed.notify_one();
    }
}

fn labels(node: &str, type_url: &str) -> XdsLabels {
    XdsLabels {
        gateway: node.into(),
        type_url: xds::types::short(type_url).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stuck_provider_makes_serve_not_ready() {
        assert_eq!(readiness(false, None), Err(NotReady::Initial));
        assert_eq!(readiness(true, None), Ok(()));
        assert_eq!(readiness(true, Some(Duration::from_secs(2))), Ok(()));
        let stuck = readiness(true, Some(PROVIDER_STUCK_AFTER + Duration::from_secs(1)));
        assert_eq!(
            stuck,
            Err(NotReady::ProviderStuck(PROVIDER_STUCK_AFTER.as_secs() + 1))
        );
        assert_eq!(
            stuck.err().map(|e| e.to_string()),
            Some(
                "the file provider has been processing one change for 16 s (limit 15 s): edits are not being applied"
                    .to_string()
            )
        );
    }
}
