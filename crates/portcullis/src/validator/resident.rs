//! The resident leaf of the validator: long-running Envoys fed over ADS by
//! an in-process xDS server; Envoy's ACK or NACK of a candidate is the
//! verdict. Starting a process per check costs ≥60 ms; a push and its
//! answer cost a few.
//!
//! Each slot is one Envoy (own node id, no admin, no hot restart,
//! concurrency 1). A candidate is served as that node's whole snapshot,
//! with every listener's `bind_to_port` false (the validator must never
//! take the real ports) and only the route configurations its listeners
//! reference (an empty one for a referenced name the candidate lacks, as
//! the static bootstrap does). Answers are remembered per (type, version):
//! a type whose content did not change is not pushed again, and is judged
//! by its earlier answer.
//!
//! Anything short of an answer (Envoy dead, not connected yet, too slow)
//! yields no verdict: the caller falls back to the process leaf, and the
//! slot's Envoy is restarted with backoff.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::ValidatorError;

use envoy_types::pb::envoy::config::core::v3::transport_socket;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, common_tls_context,
};
use envoy_types::pb::google::protobuf::BoolValue;
use prost::Message;
use translate::GatewayXds;
use translate::strict::Verdict;
use translate::xds::encoded::EncodedRouteConfiguration;

/// One node's answers: (type URL, version) → `None` for an ACK, Envoy's
/// message for a NACK.
type NodeAnswers = HashMap<(String, String), Option<String>>;

/// Answers per node.
#[derive(Default)]
struct Answers {
    nodes: Mutex<HashMap<String, NodeAnswers>>,
    changed: Condvar,
}

#[derive(Clone)]
struct Recorder(Arc<Answers>);

impl Recorder {
    fn record(&self, node: &str, type_url: &str, version: &str, answer: Option<String>) {
        if let Ok(mut nodes) = self.0.nodes.lock() {
            nodes
                .entry(node.to_string())
                .or_default()
                .insert((type_url.to_string(), version.to_string()), answer);
        }
        self.0.changed.notify_all();
    }
}

impl xds::Observer for Recorder {
    fn acked(&self, node: &str, type_url: &str, version: &str) {
        self.record(node, type_url, version, None);
    }
    fn nacked(&self, node: &str, type_url: &str, version: &str, message: &str) {
        self.record(node, type_url, version, Some(message.to_string()));
    }
    fn disconnected(&self, _node: &str) {
        // Wakes waiters so that they notice a dead Envoy at once.
        self.0.changed.notify_all();
    }
}

struct Slot {
    node: String,
    child: Option<Child>,
    failures: u32,
    next_start: Instant,
}

/// Kills an Envoy and reaps it.
fn stop(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

pub(super) struct Resident {
    bin: PathBuf,
    bootstrap_dir: PathBuf,
    port: u16,
    cache: xds::SnapshotCache,
    answers: Arc<Answers>,
    slots: Vec<Mutex<Slot>>,
    free: Mutex<Vec<usize>>,
    timeout: Duration,
    // Last: dropped after the Envoys are killed (see `Drop`).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Resident {
    /// The port of its xDS server on 127.0.0.1 (reserved: tenants'
    /// endpoints must not reach it).
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// Starts the xDS server; Envoys start on first use.
    pub(super) fn new(
        bin: &Path,
        dir: &Path,
        slots: usize,
        timeout: Duration,
    ) -> Result<Self, ValidatorError> {
        let server = |what| move |source| ValidatorError::Server { what, source };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("strict-xds")
            .enable_all()
            .build()
            .map_err(server("start its runtime"))?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(server("bind 127.0.0.1"))?;
        let port = std_listener
            .local_addr()
            .map_err(server("read its address"))?
            .port();
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(server("listen"))?
        };
        let cache = xds::SnapshotCache::new();
        let answers = Arc::new(Answers::default());
        let server = xds::AdsServer::new(cache.clone(), Arc::new(Recorder(answers.clone())));
        runtime.spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(server.into_service())
                // TCP_NODELAY, as tonic sets on listeners it binds itself.
                .serve_with_incoming(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                )
                .await;
            if let Err(e) = served {
                tracing::warn!("STRICT validator xDS server stopped: {e}");
            }
        });
        let now = Instant::now();
        let tag = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("strict")
            .to_string();
        Ok(Self {
            bin: bin.to_path_buf(),
            bootstrap_dir: dir.to_path_buf(),
            port,
            cache,
            answers,
            slots: (0..slots.max(1))
                .map(|i| {
                    Mutex::new(Slot {
                        node: format!("{tag}-{i}"),
                        child: None,
                        failures: 0,
                        next_start: now,
                    })
                })
                .collect(),
            free: Mutex::new((0..slots.max(1)).collect()),
            timeout,
            runtime: Some(runtime),
        })
    }

    /// Envoy's answer for `gw`, or `None` when the resident Envoy could
    /// not give one (the caller falls back to a process).
    pub(super) fn validate(&self, gw: &GatewayXds) -> Option<Verdict> {
        let index = self.free.lock().ok()?.pop()?;
        let verdict = self.slots.get(index).and_then(|s| {
            let mut slot = s.lock().ok()?;
            self.validate_on(&mut slot, gw)
        });
        if let Ok(mut free) = self.free.lock() {
            free.push(index);
        }
        verdict
    }

    fn ensure_running(&self, slot: &mut Slot) -> bool {
        if let Some(c) = &mut slot.child
            && matches!(c.try_wait(), Ok(None))
        {
            return true;
        }
        stop(&mut slot.child);
        if Instant::now() < slot.next_start {
            return false;
        }
        // A new Envoy knows nothing of earlier answers' configuration.
        if let Ok(mut nodes) = self.answers.nodes.lock() {
            nodes.remove(&slot.node);
        }
        self.cache.set(&slot.node, xds::Snapshot::default());
        match self.spawn(&slot.node) {
            Ok(c) => {
                slot.child = Some(c);
                true
            }
            Err(e) => {
                tracing::warn!("STRICT validator: cannot start a resident Envoy: {e}");
                self.back_off(slot);
                false
            }
        }
    }

    fn back_off(&self, slot: &mut Slot) {
        stop(&mut slot.child);
        slot.failures = slot.failures.saturating_add(1);
        let delay = Duration::from_millis(100u64 << slot.failures.min(8));
        slot.next_start = Instant::now() + delay;
    }

    fn spawn(&self, node: &str) -> Result<Child, ValidatorError> {
        let bootstrap =
            translate::output::ads_bootstrap(node, "portcullis-strict", "127.0.0.1", self.port, None);
        let path = self.bootstrap_dir.join(format!("{node}.json"));
        std::fs::write(&path, bootstrap.to_string()).map_err(|source| ValidatorError::File {
            what: "write",
            path: path.clone(),
            source,
        })?;
        crate::orphan_guard::spawn(&self.bin, move |cmd: &mut Command| {
            cmd.arg("-c")
                .arg(&path)
                .args([
                    "--disable-hot-restart",
                    "--concurrency",
                    "1",
                    // A replaced listener's RDS subscription lives while it
                    // drains; the next candidate's route version is predicted
                    // over its own listeners only.
                    "--drain-time-s",
                    "0",
                    "--log-level",
                    "critical",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        })
        .map_err(|source| ValidatorError::File {
            what: "run",
            path: self.bin.clone(),
            source,
        })
    }

    fn validate_on(&self, slot: &mut Slot, gw: &GatewayXds) -> Option<Verdict> {
        if !self.ensure_running(slot) {
            return None;
        }
        let snapshot = xds::Snapshot::from_gateway(&served(gw));
        let mut expected = vec![(xds::types::LISTENER, snapshot.version(xds::types::LISTENER, None))];
        for t in [xds::types::ROUTE, xds::types::SECRET] {
            if snapshot.types.get(t).is_some_and(|m| !m.is_empty()) {
                expected.push((t, snapshot.version(t, None)));
            }
        }
        self.cache.set(&slot.node, snapshot);
        let deadline = Instant::now() + self.timeout;
        let mut nodes = self.answers.nodes.lock().ok()?;
        loop {
            let answers = nodes.get(&slot.node);
            let found: Vec<Option<&Option<String>>> = expected
                .iter()
                .map(|(t, v)| answers.and_then(|a| a.get(&(t.to_string(), v.clone()))))
                .collect();
            // Any NACK decides; Envoy does not subscribe to the routes of a
            // listener it rejected, so a listener NACK decides alone.
            if let Some(Some(message)) = found.iter().flatten().find(|a| a.is_some()) {
                slot.failures = 0;
                return Some(Verdict::Rejected(message.clone()));
            }
            if found.iter().all(Option::is_some) {
                slot.failures = 0;
                return Some(Verdict::Accepted);
            }
            let now = Instant::now();
            let dead = slot
                .child
                .as_mut()
                .is_none_or(|c| !matches!(c.try_wait(), Ok(None)));
            if dead || now >= deadline {
                drop(nodes);
                tracing::warn!(
                    "STRICT validator: resident Envoy {} gave no answer ({}); falling back to a process",
                    slot.node,
                    if dead { "exited" } else { "timed out" }
                );
                self.back_off(slot);
                return None;
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            nodes = self.answers.changed.wait_timeout(nodes, wait).ok()?.0;
        }
    }
}

impl Drop for Resident {
    fn drop(&mut self) {
        for s in &self.slots {
            let mut slot = s.lock().unwrap_or_else(|p| p.into_inner());
            stop(&mut slot.child);
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// What a resident Envoy is served for `gw`: listeners that do not bind,
/// and exactly the route configurations they reference.
fn served(gw: &GatewayXds) -> GatewayXds {
    let listeners: Vec<Listener> = gw
        .listeners
        .iter()
        .map(|l| Listener {
            name: format!("{}@{}", l.name, address_key(l)),
            bind_to_port: Some(BoolValue { value: false }),
            ..l.clone()
        })
        .collect();
    let referenced: BTreeSet<String> = listeners.iter().flat_map(route_config_names).collect();
    let referenced_secrets: BTreeSet<String> = listeners.iter().flat_map(sds_secret_names).collect();
    let routes = referenced
        .iter()
        .map(|name| {
            gw.routes
                .iter()
                .find(|r| &r.name == name)
                .cloned()
                .unwrap_or_else(|| {
                    EncodedRouteConfiguration::new(&RouteConfiguration {
                        name: name.clone(),
                        ..Default::default()
                    })
                })
        })
        .collect();
    GatewayXds {
        listeners,
        routes,
        clusters: Vec::new(),
        endpoints: Vec::new(),
        // Only what the listeners ask for over SDS, as when serving: Envoy
        // never requests another secret, so waiting for its ACK would only
        // time out (and a serving Envoy never sees it either).
        secrets: gw
            .secrets
            .iter()
            .filter(|s| referenced_secrets.contains(&s.name))
            .cloned()
            .collect(),
    }
}

/// A hash of a listener's addresses. Envoy refuses to change the address
/// of a listener in place, which a static bootstrap never meets: naming
/// each served listener after its addresses makes a move a new listener.
fn address_key(l: &Listener) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    l.address.as_ref().map(Message::encode_to_vec).hash(&mut h);
    for a in &l.additional_addresses {
        a.encode_to_vec().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// Every filter chain of a listener, the default one included.
fn filter_chains(l: &Listener) -> impl Iterator<Item = &FilterChain> {
    l.filter_chains.iter().chain(l.default_filter_chain.iter())
}

/// The SDS secrets a listener's TLS transport sockets name.
fn sds_secret_names(l: &Listener) -> Vec<String> {
    filter_chains(l)
        .filter_map(|fc| fc.transport_socket.as_ref())
        .filter_map(|ts| match &ts.config_type {
            Some(transport_socket::ConfigType::TypedConfig(any))
                if any.type_url.ends_with(".DownstreamTlsContext") =>
            {
                DownstreamTlsContext::decode(any.value.as_slice()).ok()
            }
            _ => None,
        })
        .filter_map(|tls| tls.common_tls_context)
        .flat_map(|c| {
            c.tls_certificate_sds_secret_configs
                .into_iter()
                .map(|s| s.name)
                .chain(c.validation_context_type.and_then(|v| match v {
                    common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(s) => {
                        Some(s.name)
                    }
                    _ => None,
                }))
        })
        .collect()
}

/// RDS names a listener's HTTP connection managers subscribe to.
fn route_config_names(l: &Listener) -> Vec<String> {
    filter_chains(l)
        .flat_map(|fc| fc.filters.iter())
        .filter_map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(any))
                if any.type_url.ends_with(".HttpConnectionManager") =>
            {
                HttpConnectionManager::decode(any.value.as_slice()).ok()
            }
            _ => None,
        })
        .filter_map(|hcm| match hcm.route_specifier {
            Some(http_connection_manager::RouteSpecifier::Rds(rds)) => Some(rds.route_config_name),
            _ => None,
        })
        .collect()
}
