//! The gRPC client of the extension managers, and [`Chain`], which
//! implements [`translate::extension::Hooks`] for the translator.
//!
//! Threading: the translator calls [`Hooks`] synchronously from its own
//! threads. A [`Chain`] owns a small multi-threaded tokio runtime (threads
//! named `portcullis-extension`); every batch is spawned onto it and the
//! calling thread waits on a channel for the replies. When the caller is
//! itself a worker of another multi-threaded tokio runtime the wait is
//! wrapped in `block_in_place`, so that runtime keeps running its other
//! tasks; a call from one of the chain's own threads is refused (it would
//! deadlock) and every reply is an `Unreachable` failure. The channels are
//! lazy: a server that is down at start is dialled again on the next call.
//!
//! One call to one manager: the request is encoded, looked up in the reply
//! cache, else sent with a deadline of `timeout` that covers every retry;
//! retries follow `service.retry` (gRPC's A6 policy as Envoy Gateway
//! configures it: only the retryable codes, exponential backoff with
//! jitter, never past the deadline). A batch runs its calls concurrently,
//! at most [`ChainOptions::concurrency`] in flight.
//!
//! Chaining (`extensionManagers`), as Envoy Gateway's composite client:
//! managers are called in order, each one's output is the next one's input;
//! a manager that does not list the hook is skipped; with more than one
//! manager each receives only the extension resources of its own kinds. A
//! failure of a `failOpen: false` manager fails the call; a failure of a
//! `failOpen: true` manager is skipped (its input passes on unchanged) and,
//! when no manager changed anything, returned as a fail-open [`HookError`]
//! so the translator reports the warning; when others did change it, the
//! failure is kept for [`Chain::take_skipped_failures`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{Route, VirtualHost};
use prost::Message;
use tokio::sync::Semaphore;
use tonic::transport::{Channel, Endpoint};
use translate::extension::{
    ClusterCall, EndpointsCall, ExtensionResource, GroupKind, Hook, HookError, HookFailure, Hooks,
    ListenerCall, Registration, Reply, RouteCall, TranslateCall, TranslateReply, VirtualHostCall,
};

use crate::cache::{self, ReplyCache};
use crate::config::{ExtensionConfig, ManagerConfig, ServiceAddress, grpc_code_name};
use crate::proto;
use crate::proto::envoy_gateway_extension_client::EnvoyGatewayExtensionClient;
use crate::stats::{CallResult, Reachability, Stats, StatsSnapshot};

type Client = EnvoyGatewayExtensionClient<Channel>;

/// Tuning of a [`Chain`] beyond the configuration file.
#[derive(Clone, Debug)]
pub struct ChainOptions {
    /// Calls of one batch in flight at once (all managers together).
    pub concurrency: usize,
    /// Entries of the reply cache; 0 disables it.
    pub cache_capacity: usize,
    /// Bytes of replies the cache may hold.
    pub cache_bytes: usize,
    /// Worker threads of the chain's runtime.
    pub worker_threads: usize,
    /// After this many consecutive calls to one manager ended at the
    /// deadline or unreachable (no success in between), further calls fail
    /// at once for one `timeout`, then the server is tried again — so a
    /// hung or dead server costs one deadline per batch, not one per call
    /// (10k routes × 2 s would stall translation for hours).
    pub breaker_after: u32,
}

impl Default for ChainOptions {
    fn default() -> Self {
        Self {
            concurrency: 16,
            cache_capacity: 16 * 1024,
            cache_bytes: 64 * 1024 * 1024,
            worker_threads: 2,
            breaker_after: 8,
        }
    }
}

/// Why a [`Chain`] could not be built (a startup error naming the field).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{field}: {message}")]
    Endpoint { field: String, message: String },
    #[error("cannot start the extension client runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Called once per call that reached a server: `(manager, hook, result,
/// duration)`. The binary can feed its Prometheus histogram from it.
pub type Observer = Arc<dyn Fn(&str, Hook, CallResult, Duration) + Send + Sync>;

struct Manager {
    index: usize,
    config: ManagerConfig,
    client: Client,
    /// Group/kinds of `resources` + `backendResources`, and of
    /// `policyResources`: the per-manager filters of a chain.
    resource_gks: Vec<GroupKind>,
    policy_gks: Vec<GroupKind>,
    reach: std::sync::Mutex<Reachability>,
    breaker: std::sync::Mutex<Breaker>,
}

/// Consecutive deadline/unreachable failures of one manager, and until
/// when calls fail without being made.
#[derive(Debug, Default)]
struct Breaker {
    consecutive: u32,
    open_until: Option<Instant>,
    last: Option<HookFailure>,
}

struct Inner {
    managers: Vec<Manager>,
    /// More than one manager: filter the extension resources per manager.
    filter: bool,
    cache: ReplyCache,
    stats: Stats,
    permits: Arc<Semaphore>,
    breaker_after: u32,
    observer: std::sync::RwLock<Option<Observer>>,
    /// Fail-open failures skipped in a chain whose other managers changed
    /// the resource (see `take_skipped_failures`).
    skipped: std::sync::Mutex<Vec<HookError>>,
}

/// Owns the runtime; dropping it from anywhere (even inside another
/// runtime) is allowed because the shutdown does not wait.
struct RuntimeHolder(Option<tokio::runtime::Runtime>);

impl Drop for RuntimeHolder {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

const THREAD_NAME: &str = "portcullis-extension";

/// The configured extension managers, called in order.
pub struct Chain {
    inner: Arc<Inner>,
    registration: Registration,
    handle: tokio::runtime::Handle,
    _runtime: RuntimeHolder,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field(
                "managers",
                &self
                    .inner
                    .managers
                    .iter()
                    .map(|m| &m.config.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Chain {
    /// Builds the channels (lazily connected) and the runtime.
    pub fn new(config: &ExtensionConfig, options: ChainOptions) -> Result<Self, ClientError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.worker_threads.max(1))
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let handle = runtime.handle().clone();
        let managers = {
            // Channels spawn their connection task on the current runtime.
            let _guard = runtime.enter();
            config
                .managers
                .iter()
                .enumerate()
                .map(|(index, m)| {
                    let field = if config.managers.len() == 1 {
                        "extensionManager.service".to_string()
                    } else {
                        format!("extensionManagers[{index}].service")
                    };
                    Ok(Manager {
                        index,
                        client: client_for(m, &field)?,
                        resource_gks: m.resources.iter().chain(&m.backend_resources).cloned().collect(),
                        policy_gks: m.policy_resources.iter().cloned().collect(),
                        reach: std::sync::Mutex::new(Reachability {
                            manager: m.name.clone(),
                            address: m.address.to_string(),
                            ..Reachability::default()
                        }),
                        breaker: std::sync::Mutex::default(),
                        config: m.clone(),
                    })
                })
                .collect::<Result<Vec<_>, ClientError>>()?
        };
        Ok(Self {
            inner: Arc::new(Inner {
                filter: managers.len() > 1,
                managers,
                cache: ReplyCache::new(options.cache_capacity, options.cache_bytes),
                stats: Stats::default(),
                permits: Arc::new(Semaphore::new(options.concurrency.max(1))),
                breaker_after: options.breaker_after.max(1),
                observer: std::sync::RwLock::new(None),
                skipped: std::sync::Mutex::new(Vec::new()),
            }),
            registration: config.registration(),
            handle,
            _runtime: RuntimeHolder(Some(runtime)),
        })
    }

    /// Counters, durations, reachability and cache statistics.
    pub fn stats(&self) -> StatsSnapshot {
        let (calls, durations) = self.inner.stats.snapshot();
        StatsSnapshot {
            calls,
            durations,
            managers: self
                .inner
                .managers
                .iter()
                .map(|m| m.reach.lock().unwrap_or_else(|p| p.into_inner()).clone())
                .collect(),
            cache: self.inner.cache.stats(),
        }
    }

    /// Reachability of every manager, for `/api/status`.
    pub fn reachability(&self) -> Vec<Reachability> {
        self.stats().managers
    }

    /// Dials every manager's address (TCP or unix socket; no TLS, no rpc)
    /// within `timeout` and records whether it accepts connections; for
    /// `/api/status` before any hook has run.
    pub fn probe(&self, timeout: Duration) -> Vec<Reachability> {
        let inner = self.inner.clone();
        let _ = self.run(async move {
            for m in &inner.managers {
                let ok = tokio::time::timeout(timeout, dial(&m.config.address)).await;
                let outcome = match ok {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(ReachFailure::Dial(e)),
                    Err(_) => Err(ReachFailure::DialTimeout {
                        ms: timeout.as_millis(),
                    }),
                };
                m.note(outcome);
            }
        });
        self.reachability()
    }

    /// Drops every cached reply (e.g. after the extension server was
    /// redeployed with new behaviour).
    /// The `failOpen` failures that did not come back as a reply's error:
    /// in a chain, a failing `failOpen: true` manager is skipped (as Envoy
    /// Gateway does) and, when another manager changed the resource, the
    /// reply is that change — the translator's `Reply` cannot carry the
    /// warning too. Drained by the caller after a translation (at most
    /// 256 are kept between drains).
    pub fn take_skipped_failures(&self) -> Vec<HookError> {
        std::mem::take(&mut *self.inner.skipped.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn clear_cache(&self) {
        self.inner.cache.clear();
    }

    /// Registers a callback for every call that reached a server.
    pub fn set_observer(&self, observer: Observer) {
        *self.inner.observer.write().unwrap_or_else(|p| p.into_inner()) = Some(observer);
    }

    /// Runs `fut` on the chain's runtime and waits for it (see the module
    /// docs for the threading).
    fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> Result<T, RunError> {
        if std::thread::current().name() == Some(THREAD_NAME) {
            return Err(RunError::OwnThread);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let wait = move || rx.recv().map_err(|_| RunError::TaskEnded);
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }

    /// One batch: every call concurrently (bounded), replies in order.
    fn batch<C, T, F, Fut>(&self, hook: Hook, calls: Vec<C>, one: F) -> Vec<Reply<T>>
    where
        C: Send + 'static,
        T: Send + 'static,
        F: Fn(Arc<Inner>, C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply<T>> + Send + 'static,
    {
        let n = calls.len();
        if n == 0 {
            return Vec::new();
        }
        let inner = self.inner.clone();
        let out = self.run(async move {
            let mut set = tokio::task::JoinSet::new();
            let one = Arc::new(one);
            for (i, call) in calls.into_iter().enumerate() {
                let inner = inner.clone();
                let one = one.clone();
                set.spawn(async move {
                    // The semaphore is never closed; a failure to acquire
                    // would only mean running unbounded.
                    let _permit = inner.permits.clone().acquire_owned().await.ok();
                    (i, one(inner, call).await)
                });
            }
            let mut replies: Vec<Option<Reply<T>>> = (0..n).map(|_| None).collect();
            while let Some(joined) = set.join_next().await {
                if let Ok((i, r)) = joined
                    && let Some(slot) = replies.get_mut(i)
                {
                    *slot = Some(r);
                }
            }
            replies
        });
        let lost = |what: &str| HookError {
            manager: self.names(),
            failure: HookFailure::Unreachable {
                hook,
                message: what.to_string(),
            },
            fail_open: false,
        };
        match out {
            Ok(replies) => replies
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err(lost("the call's task ended without a reply"))))
                .collect(),
            Err(why) => (0..n).map(|_| Err(lost(&why.to_string()))).collect(),
        }
    }

    fn names(&self) -> String {
        self.inner
            .managers
            .iter()
            .map(|m| m.config.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn client_for(m: &ManagerConfig, field: &str) -> Result<Client, ClientError> {
    let err = |f: &str, e: &dyn std::fmt::Display| ClientError::Endpoint {
        field: format!("{field}{f}"),
        message: e.to_string(),
    };
    let scheme = if m.tls.is_some() { "https" } else { "http" };
    let authority = match &m.address {
        ServiceAddress::Fqdn { .. } | ServiceAddress::Ip { .. } => m.address.to_string(),
        // The :authority of calls over a unix socket.
        ServiceAddress::Unix { .. } => "localhost".to_string(),
    };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
        .map_err(|e| err("", &e))?
        .connect_timeout(m.timeout)
        .tcp_nodelay(true);
    if let Some(tls) = &m.tls {
        let mut cfg = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&tls.ca_pem))
            .domain_name(tls.server_name.clone());
        if let Some((cert, key)) = &tls.client_identity {
            cfg = cfg.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(cfg).map_err(|e| err(".tls", &e))?;
    }
    let channel = match &m.address {
        ServiceAddress::Unix { path } => {
            let path = path.clone();
            endpoint.connect_with_connector_lazy(tower::service_fn(move |_: tonic::transport::Uri| {
                let path = path.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                }
            }))
        }
        _ => endpoint.connect_lazy(),
    };
    Ok(EnvoyGatewayExtensionClient::new(channel)
        .max_decoding_message_size(m.max_message_size)
        .max_encoding_message_size(m.max_message_size))
}

async fn dial(address: &ServiceAddress) -> std::io::Result<()> {
    match address {
        ServiceAddress::Fqdn { hostname, port } => tokio::net::TcpStream::connect((hostname.as_str(), *port))
            .await
            .map(drop),
        ServiceAddress::Ip { address, port } => {
            tokio::net::TcpStream::connect((*address, *port)).await.map(drop)
        }
        ServiceAddress::Unix { path } => tokio::net::UnixStream::connect(path).await.map(drop),
    }
}

/// Why a batch of calls did not run on the chain's runtime (every call of
/// it fails `Unreachable` with this text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
enum RunError {
    #[error("called from the extension client's own runtime thread")]
    OwnThread,
    #[error("the extension client's task ended without a reply")]
    TaskEnded,
}

/// Why a manager counts as unreachable; its text is the manager's
/// `lastError` in `/api/status`.
#[derive(Debug, thiserror::Error)]
enum ReachFailure {
    /// The probe's dial failed.
    #[error(transparent)]
    Dial(std::io::Error),
    #[error("no connection within {ms} ms")]
    DialTimeout { ms: u128 },
    /// A hook call failed for want of the server (not a status or an
    /// unusable reply: those come from a reachable server).
    #[error(transparent)]
    Hook(HookFailure),
}

impl Manager {
    fn note(&self, outcome: Result<(), ReachFailure>) {
        let mut r = self.reach.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(()) => {
                r.reachable = Some(true);
                r.last_success = Some(SystemTime::now());
            }
            Err(e) => {
                r.reachable = Some(false);
                r.last_error = Some(e.to_string());
            }
        }
    }

    fn error(&self, failure: HookFailure) -> HookError {
        HookError {
            manager: self.config.name.clone(),
            failure,
            fail_open: self.config.fail_open,
        }
    }

    /// Keeps the resources whose group/kind is in `gks` (an empty list
    /// keeps all, as Envoy Gateway does).
    fn filter(gks: &[GroupKind], on: bool, resources: &[ExtensionResource]) -> Vec<proto::ExtensionResource> {
        resources
            .iter()
            .filter(|r| {
                !on || gks.is_empty() || group_kind(&r.unstructured_bytes).is_some_and(|gk| gks.contains(&gk))
            })
            .map(|r| proto::ExtensionResource {
                unstructured_bytes: r.unstructured_bytes.to_vec(),
            })
            .collect()
    }

    /// One rpc with cache, deadline and retries.
    /// `modified` tells whether a reply replaces the input (for the
    /// `result` label).
    async fn unary<Req, Resp, F, Fut>(
        &self,
        inner: &Inner,
        hook: Hook,
        request: Req,
        modified: fn(&Resp) -> bool,
        rpc: F,
    ) -> Result<Resp, HookFailure>
    where
        Req: Message + Clone + 'static,
        Resp: Message + Default,
        F: Fn(Client, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let encoded = request.encode_to_vec();
        // Refused before it leaves, as gRPC-Go does (RESOURCE_EXHAUSTED):
        // tonic would only fail the stream midway.
        if encoded.len() > self.config.max_message_size {
            let f = HookFailure::Status {
                hook,
                code: grpc_code_name(tonic::Code::ResourceExhausted).to_string(),
                message: format!(
                    "request of {} bytes exceeds maxMessageSize ({} bytes)",
                    encoded.len(),
                    self.config.max_message_size
                ),
            };
            self.record(inner, hook, CallResult::of_failure(&f), Duration::ZERO);
            return Err(f);
        }
        let key = cache::key(self.index, hook.rpc(), &encoded);
        if let Some(bytes) = inner.cache.get(&key)
            && let Ok(resp) = Resp::decode(&*bytes)
        {
            inner.stats.record(hook, CallResult::Cached, None);
            return Ok(resp);
        }
        if let Some(f) = self.open_circuit(hook) {
            self.record(inner, hook, CallResult::of_failure(&f), Duration::ZERO);
            return Err(f);
        }
        let start = Instant::now();
        let outcome = self.attempts(hook, start, request, rpc).await;
        self.trip(inner.breaker_after, &outcome);
        let elapsed = start.elapsed();
        let result = match &outcome {
            Ok(r) if modified(r) => CallResult::Modified,
            Ok(_) => CallResult::Unchanged,
            Err(f) => CallResult::of_failure(f),
        };
        self.record(inner, hook, result, elapsed);
        match &outcome {
            Ok(resp) => {
                inner.cache.put(key, Arc::from(resp.encode_to_vec()));
                self.note(Ok(()));
            }
            // A status from the server proves it is reachable.
            Err(HookFailure::Status { .. } | HookFailure::InvalidReply { .. }) => self.note(Ok(())),
            Err(f) => self.note(Err(ReachFailure::Hook(f.clone()))),
        }
        outcome
    }

    /// The failure to return without calling while the breaker is open.
    fn open_circuit(&self, hook: Hook) -> Option<HookFailure> {
        let b = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
        let until = b.open_until?;
        let left = until.checked_duration_since(Instant::now())?;
        let last = b.last.as_ref().map(|f| f.to_string()).unwrap_or_default();
        Some(HookFailure::Unreachable {
            hook,
            message: format!(
                "not called: the last {} calls failed (next try in {} ms); last failure: {last}",
                b.consecutive,
                left.as_millis()
            ),
        })
    }

    fn trip<T>(&self, after: u32, outcome: &Result<T, HookFailure>) {
        let mut b = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Err(f @ (HookFailure::Deadline { .. } | HookFailure::Unreachable { .. })) => {
                b.consecutive = b.consecutive.saturating_add(1);
                b.last = Some(f.clone());
                if b.consecutive >= after {
                    b.open_until = Some(Instant::now() + self.config.timeout);
                }
            }
            _ => {
                b.consecutive = 0;
                b.open_until = None;
            }
        }
    }

    fn record(&self, inner: &Inner, hook: Hook, result: CallResult, elapsed: Duration) {
        inner.stats.record(hook, result, Some(elapsed));
        let observer = inner.observer.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(o) = observer {
            o(&self.config.name, hook, result, elapsed);
        }
    }

    async fn attempts<Req, Resp, F, Fut>(
        &self,
        hook: Hook,
        start: Instant,
        request: Req,
        rpc: F,
    ) -> Result<Resp, HookFailure>
    where
        Req: Message + Clone,
        F: Fn(Client, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let timeout = self.config.timeout;
        let deadline = start + timeout;
        let retry = &self.config.retry;
        let deadline_failure = || HookFailure::Deadline {
            hook,
            deadline_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let mut backoff = retry.initial_backoff;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(deadline_failure());
            }
            let mut req = tonic::Request::new(request.clone());
            // Tells the server the deadline too (`grpc-timeout`), with a
            // little grace so our own timer decides: a server that gives up
            // first answers CANCELLED (tonic) or DEADLINE_EXCEEDED (Go).
            req.set_timeout(remaining + DEADLINE_GRACE);
            let status = match tokio::time::timeout(remaining, rpc(self.client.clone(), req)).await {
                Err(_) => return Err(deadline_failure()),
                Ok(Ok(resp)) => return Ok(resp.into_inner()),
                Ok(Err(status)) => status,
            };
            let near_deadline = Instant::now() + DEADLINE_GRACE >= deadline;
            if status.code() == tonic::Code::DeadlineExceeded
                || (status.code() == tonic::Code::Cancelled && near_deadline)
            {
                return Err(deadline_failure());
            }
            let code = effective_code(&status);
            if attempt < retry.max_attempts && retry.retryable.contains(&code) {
                // gRPC A6: a random delay in [0, current backoff).
                let pause = backoff.mul_f64(jitter());
                if Instant::now() + pause >= deadline {
                    return Err(deadline_failure());
                }
                tokio::time::sleep(pause).await;
                backoff = backoff.mul_f64(retry.backoff_multiplier).min(retry.max_backoff);
                continue;
            }
            return Err(failure_of(hook, &status));
        }
    }
}

/// Skipped fail-open failures kept between two drains.
const MAX_SKIPPED: usize = 256;

/// How much later than our deadline the server is told to give up.
const DEADLINE_GRACE: Duration = Duration::from_millis(50);

/// A uniform number in [0, 1) without a random crate: the low bits of the
/// clock mixed by a splitmix step. Only spreads retries; not security.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut z = u64::from(nanos).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The code as gRPC-Go would report it: a failure of the connection
/// itself is UNAVAILABLE, so the retry policy and the failure class treat a
/// dropped connection like a refused one. tonic reports those as statuses
/// it made locally: with the transport/HTTP/2 error as their source, or —
/// when the status was found deeper in the error chain, which drops the
/// source — as CANCELLED (hyper's "operation was canceled") or its own
/// "transport error" / "h2 protocol error" messages. A server-sent
/// CANCELLED (rare, never a verdict on the input) is treated the same.
fn effective_code(status: &tonic::Status) -> tonic::Code {
    use std::error::Error;
    let local = status.source().is_some()
        || status.code() == tonic::Code::Cancelled
        || status.message() == "transport error"
        || status.message().starts_with("h2 protocol error");
    if local {
        tonic::Code::Unavailable
    } else {
        status.code()
    }
}

/// Longest server-supplied message kept in a failure: it ends up in
/// status conditions and logs, which a server must not flood.
const MAX_MESSAGE_CHARS: usize = 512;

fn failure_of(hook: Hook, status: &tonic::Status) -> HookFailure {
    let mut message: String = status.message().chars().take(MAX_MESSAGE_CHARS).collect();
    if message.len() < status.message().len() {
        message.push('…');
    }
    match effective_code(status) {
        // Connection failures surface as UNAVAILABLE from the channel.
        tonic::Code::Unavailable => HookFailure::Unreachable { hook, message },
        // Our own decoder refusing the reply: not a status the server sent.
        tonic::Code::Internal if message.starts_with("failed to decode Protobuf message") => {
            HookFailure::InvalidReply { hook, message }
        }
        tonic::Code::OutOfRange if message.starts_with("Error, decoded message length too large") => {
            HookFailure::InvalidReply { hook, message }
        }
        code => HookFailure::Status {
            hook,
            code: grpc_code_name(code).to_string(),
            message,
        },
    }
}

/// The group and kind of an extension resource's JSON (`apiVersion`,
/// `kind`), for the per-manager filter.
fn group_kind(json: &[u8]) -> Option<GroupKind> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypeMeta {
        api_version: Option<String>,
        kind: Option<String>,
    }
    let t: TypeMeta = serde_json::from_slice(json).ok()?;
    let api = t.api_version?;
    let group = api
        .rsplit_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default();
    Some(GroupKind { group, kind: t.kind? })
}

/// Runs one call through every manager that has `hook`, in order.
/// `step` sends `current` to one manager and returns its reply (`None` =
/// unchanged).
async fn chain_call<'a, T, S, Fut>(inner: &'a Inner, hook: Hook, input: T, step: S) -> Reply<T>
where
    T: Clone,
    S: Fn(&'a Manager, T) -> Fut,
    Fut: Future<Output = Result<Option<T>, HookFailure>>,
{
    let mut current = input;
    let mut changed = false;
    let mut skipped: Option<HookError> = None;
    for m in inner.managers.iter().filter(|m| m.config.hooks.contains(&hook)) {
        match step(m, current.clone()).await {
            Ok(reply) => {
                if let Some(r) = reply {
                    current = r;
                    changed = true;
                }
            }
            Err(f) if m.config.fail_open => {
                skipped.get_or_insert(m.error(f));
            }
            Err(f) => return Err(m.error(f)),
        }
    }
    match (changed, skipped) {
        (true, Some(e)) => {
            // The reply carries the other managers' changes, so the
            // skipped manager's failure cannot ride on it: keep it for
            // `take_skipped_failures`.
            let mut w = inner.skipped.lock().unwrap_or_else(|p| p.into_inner());
            if w.len() < MAX_SKIPPED {
                w.push(e);
            }
            Ok(Some(current))
        }
        (true, None) => Ok(Some(current)),
        (false, Some(e)) => Err(e),
        (false, None) => Ok(None),
    }
}

impl Hooks for Chain {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    fn post_route_modify(&self, calls: Vec<RouteCall>) -> Vec<Reply<Route>> {
        self.batch(Hook::Route, calls, |inner, call: RouteCall| async move {
            let RouteCall {
                route,
                hostnames,
                extension_resources,
                extension_policies,
            } = call;
            let i = &*inner;
            chain_call(i, Hook::Route, route, |m, route| {
                let req = proto::PostRouteModifyRequest {
                    route: Some(route),
                    post_route_context: Some(proto::PostRouteExtensionContext {
                        extension_resources: Manager::filter(&m.resource_gks, i.filter, &extension_resources),
                        hostnames: hostnames.clone(),
                        extension_policies: Manager::filter(&m.policy_gks, i.filter, &extension_policies),
                    }),
                };
                async move {
                    m.unary(
                        i,
                        Hook::Route,
                        req,
                        |r: &proto::PostRouteModifyResponse| r.route.is_some(),
                        |mut c, r| async move { c.post_route_modify(r).await },
                    )
                    .await
                    .map(|r| r.route)
                }
            })
            .await
        })
    }

    fn post_virtual_host_modify(&self, calls: Vec<VirtualHostCall>) -> Vec<Reply<VirtualHost>> {
        self.batch(
            Hook::VirtualHost,
            calls,
            |inner, call: VirtualHostCall| async move {
                let i = &*inner;
                chain_call(i, Hook::VirtualHost, call.virtual_host, |m, vh| {
                    let req = proto::PostVirtualHostModifyRequest {
                        virtual_host: Some(vh),
                        post_virtual_host_context: Some(proto::PostVirtualHostExtensionContext {}),
                    };
                    async move {
                        m.unary(
                            i,
                            Hook::VirtualHost,
                            req,
                            |r: &proto::PostVirtualHostModifyResponse| r.virtual_host.is_some(),
                            |mut c, r| async move { c.post_virtual_host_modify(r).await },
                        )
                        .await
                        .map(|r| r.virtual_host)
                    }
                })
                .await
            },
        )
    }

    fn post_http_listener_modify(&self, calls: Vec<ListenerCall>) -> Vec<Reply<Listener>> {
        self.batch(
            Hook::HttpListener,
            calls,
            |inner, call: ListenerCall| async move {
                let i = &*inner;
                let resources = call.extension_resources;
                chain_call(i, Hook::HttpListener, call.listener, |m, listener| {
                    let req = proto::PostHttpListenerModifyRequest {
                        listener: Some(listener),
                        post_listener_context: Some(proto::PostHttpListenerExtensionContext {
                            extension_resources: Manager::filter(&m.policy_gks, i.filter, &resources),
                        }),
                    };
                    async move {
                        m.unary(
                            i,
                            Hook::HttpListener,
                            req,
                            |r: &proto::PostHttpListenerModifyResponse| r.listener.is_some(),
                            |mut c, r| async move { c.post_http_listener_modify(r).await },
                        )
                        .await
                        .map(|r| r.listener)
                    }
                })
                .await
            },
        )
    }

    fn post_cluster_modify(&self, calls: Vec<ClusterCall>) -> Vec<Reply<Cluster>> {
        self.batch(Hook::Cluster, calls, |inner, call: ClusterCall| async move {
            let i = &*inner;
            let resources = call.backend_extension_resources;
            chain_call(i, Hook::Cluster, call.cluster, |m, cluster| {
                let req = proto::PostClusterModifyRequest {
                    cluster: Some(cluster),
                    post_cluster_context: Some(proto::PostClusterExtensionContext {
                        backend_extension_resources: Manager::filter(&m.resource_gks, i.filter, &resources),
                    }),
                };
                async move {
                    m.unary(
                        i,
                        Hook::Cluster,
                        req,
                        |r: &proto::PostClusterModifyResponse| r.cluster.is_some(),
                        |mut c, r| async move { c.post_cluster_modify(r).await },
                    )
                    .await
                    .map(|r| r.cluster)
                }
            })
            .await
        })
    }

    fn post_endpoints_modify(&self, calls: Vec<EndpointsCall>) -> Vec<Reply<ClusterLoadAssignment>> {
        self.batch(Hook::Endpoints, calls, |inner, call: EndpointsCall| async move {
            let i = &*inner;
            chain_call(i, Hook::Endpoints, call.load_assignment, |m, la| {
                let req = proto::PostEndpointsModifyRequest {
                    load_assignment: Some(la),
                    post_endpoints_context: Some(proto::PostEndpointsExtensionContext {}),
                };
                async move {
                    m.unary(
                        i,
                        Hook::Endpoints,
                        req,
                        |r: &proto::PostEndpointsModifyResponse| r.load_assignment.is_some(),
                        |mut c, r| async move { c.post_endpoints_modify(r).await },
                    )
                    .await
                    .map(|r| r.load_assignment)
                }
            })
            .await
        })
    }

    fn post_translate_modify(&self, call: TranslateCall) -> Reply<TranslateReply> {
        let mut replies = self.batch(
            Hook::Translation,
            vec![call],
            |inner, call: TranslateCall| async move {
                let i = &*inner;
                let policies = call.extension_resources;
                let input = TranslateReply {
                    clusters: call.clusters,
                    secrets: call.secrets,
                    listeners: call.listeners,
                    routes: call.routes,
                };
                chain_call(i, Hook::Translation, input, |m, current: TranslateReply| {
                    // Each manager gets, and gives back, only the kinds its
                    // `translation` settings include (Envoy Gateway's
                    // composite client does the same).
                    let inc = m.config.translation;
                    let req = proto::PostTranslateModifyRequest {
                        post_translate_context: Some(proto::PostTranslateExtensionContext {
                            extension_resources: Manager::filter(&m.policy_gks, i.filter, &policies),
                        }),
                        clusters: if inc.clusters {
                            current.clusters.clone()
                        } else {
                            Vec::new()
                        },
                        secrets: if inc.secrets {
                            current.secrets.clone()
                        } else {
                            Vec::new()
                        },
                        listeners: if inc.listeners {
                            current.listeners.clone()
                        } else {
                            Vec::new()
                        },
                        routes: if inc.routes {
                            current.routes.clone()
                        } else {
                            Vec::new()
                        },
                    };
                    async move {
                        let r = m
                            .unary(
                                i,
                                Hook::Translation,
                                req,
                                |_: &proto::PostTranslateModifyResponse| true,
                                |mut c, r| async move { c.post_translate_modify(r).await },
                            )
                            .await?;
                        // The protocol has no "unset" reply here: the lists
                        // returned are the final lists of the included kinds.
                        let mut next = current;
                        if inc.clusters {
                            next.clusters = r.clusters;
                        }
                        if inc.secrets {
                            next.secrets = r.secrets;
                        }
                        if inc.listeners {
                            next.listeners = r.listeners;
                        }
                        if inc.routes {
                            next.routes = r.routes;
                        }
                        Ok(Some(next))
                    }
                })
                .await
            },
        );
        replies.pop().unwrap_or_else(|| {
            Err(HookError {
                manager: self.names(),
                failure: HookFailure::Unreachable {
                    hook: Hook::Translation,
                    message: "no reply".into(),
                },
                fail_open: false,
            })
        })
    }
}

#[cfg(test)]
mod unreachable_tests {
    use super::*;

    #[test]
    fn an_unreachable_manager_says_why() {
        assert_eq!(
            ReachFailure::DialTimeout { ms: 250 }.to_string(),
            "no connection within 250 ms"
        );
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(ReachFailure::Dial(refused).to_string(), "connection refused");
        assert_eq!(
            RunError::OwnThread.to_string(),
            "called from the extension client's own runtime thread"
        );
        assert_eq!(
            RunError::TaskEnded.to_string(),
            "the extension client's task ended without a reply"
        );
    }
}
