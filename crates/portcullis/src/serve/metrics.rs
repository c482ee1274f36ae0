//! Prometheus metrics (`/metrics`), registered under the `portcullis_` prefix.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct XdsLabels {
    pub gateway: String,
    pub type_url: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GatewayLabels {
    pub gateway: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplacementLabels {
    pub gateway: String,
    pub route_namespace: String,
    pub route_name: String,
    pub error_class: String,
}

/// One fenced scope (`translate::ScopeReplacement`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    pub gateway: String,
    /// `route_configuration` or `virtual_host`.
    pub scope: String,
    /// Empty for a Gateway-scope replacement.
    pub listener: String,
    pub error_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy_kind: String,
    pub namespace: String,
    pub name: String,
    pub reason: String,
}

/// One HTTPProxy root (`namespace/name`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RootLabels {
    pub root: String,
}

/// An HTTPProxy `currentStatus` (`valid`, `invalid`, `orphaned`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProxyStatusLabels {
    pub status: String,
}

/// One extension hook call's outcome (`extension::CallResult`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookCallLabels {
    /// The rpc (`PostRouteModify`, …).
    pub hook: String,
    /// `modified`, `unchanged`, `cached`, `deadline`, `unreachable`,
    /// `error`, `invalid_reply`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabels {
    pub hook: String,
}

fn hook_histogram() -> Histogram {
    Histogram::new(extension::stats::DURATION_BUCKETS)
}

pub struct Metrics {
    pub registry: Mutex<Registry>,
    pub translation_seconds: Histogram,
    pub translations: Counter,
    /// Incremental translations that panicked and were made again in full
    /// (`translate::incremental::Full::Recovered`).
    pub incremental_recoveries: Counter,
    pub xds_pushes: Family<XdsLabels, Counter>,
    pub xds_acks: Family<XdsLabels, Counter>,
    pub xds_nacks: Family<XdsLabels, Counter>,
    pub connected_envoys: Family<GatewayLabels, Gauge>,
    pub envoy_restarts: Family<GatewayLabels, Counter>,
    pub input_errors: Gauge,
    /// Rules that became replaced (counted when a translation replaces a
    /// rule that the previous one did not).
    pub replacements: Family<ReplacementLabels, Counter>,
    /// Rules replaced right now.
    pub replaced_now: Family<ReplacementLabels, Gauge>,
    /// Route configurations or virtual hosts fenced by a Gateway or
    /// listener policy (counted when they become fenced).
    pub scope_replacements: Family<ScopeLabels, Counter>,
    /// Scopes fenced right now.
    pub scope_replaced_now: Family<ScopeLabels, Gauge>,
    pub policy_failures: Family<PolicyLabels, Counter>,
    pub validator: crate::validator::ValidatorMetrics,
    /// How long the file provider has been processing its current burst
    /// (0 when idle).
    pub provider_busy_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// 1 while the provider has been busy longer than `PROVIDER_STUCK_AFTER`.
    pub provider_stuck: Gauge,
    pub provider_read_timeouts: Counter,
    /// Duplicate routes (not programmed) per HTTPProxy root, now.
    pub httpproxy_duplicates: Family<RootLabels, Gauge>,
    /// HTTPProxies by `currentStatus`, now.
    pub httpproxies: Family<ProxyStatusLabels, Gauge>,
    /// Extension hook calls by rpc and result (kept equal to the client's
    /// own counts, cache hits included, by `sync_extension_calls`).
    pub extension_hook_calls: Family<HookCallLabels, Counter>,
    /// Duration of extension hook calls that went to a server (fed by the
    /// client's observer).
    pub extension_hook_duration: Family<HookLabels, Histogram, fn() -> Histogram>,
    /// The allocator's own figures (jemalloc, the binary's global
    /// allocator): `allocated` is what live objects hold, `resident` what
    /// the allocator keeps in RAM (RSS minus code and stacks, roughly); the
    /// gap is freed memory not yet returned to the OS.
    pub allocator: Family<AllocatorLabels, Gauge>,
    /// How long jemalloc keeps freed pages before returning them to the
    /// OS (`opt.dirty_decay_ms`, `opt.muzzy_decay_ms`; -1: never), as the
    /// binary was built (`.cargo/config.toml`'s `malloc_conf`).
    pub allocator_decay: Family<AllocatorLabels, Gauge>,
    /// 1 while jemalloc's background threads purge freed pages on time.
    pub allocator_background_threads: Gauge,
}

/// The jemalloc options that decide how fast freed memory goes back to the
/// OS (ARCHITECTURE.md §7, "Memory"). `malloc_conf` is baked in at build
/// time by `.cargo/config.toml` (`JEMALLOC_SYS_WITH_MALLOC_CONF`), so a
/// build without it shows here (and fails `the_build_has_the_decay_settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatorOptions {
    pub dirty_decay_ms: isize,
    pub muzzy_decay_ms: isize,
    /// `opt.background_thread`: asked for at start by `malloc_conf`.
    pub background_thread: bool,
}

/// jemalloc's options in force (those of the jemalloc this code is linked
/// with, whether or not it is the global allocator), `None` if they cannot
/// be read.
pub fn allocator_options() -> Option<AllocatorOptions> {
    use tikv_jemalloc_ctl::{Access, AsName};
    let dirty: isize = b"opt.dirty_decay_ms\0".name().read().ok()?;
    let muzzy: isize = b"opt.muzzy_decay_ms\0".name().read().ok()?;
    let background: bool = b"opt.background_thread\0".name().read().ok()?;
    Some(AllocatorOptions {
        dirty_decay_ms: dirty,
        muzzy_decay_ms: muzzy,
        background_thread: background,
    })
}

/// One of jemalloc's `stats.*` figures.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AllocatorLabels {
    /// `allocated`, `active`, `resident`, `retained`.
    pub kind: String,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("portcullis");
        let translation_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register(
            "translation_duration_seconds",
            "Time to translate one input snapshot",
            translation_seconds.clone(),
        );
        let translations = Counter::default();
        registry.register("translations", "Input snapshots translated", translations.clone());
        let incremental_recoveries = Counter::default();
        registry.register(
            "incremental_recoveries",
            "Incremental translations that failed internally and were made again in full (a bug: please report it)",
            incremental_recoveries.clone(),
        );
        let xds_pushes = Family::<XdsLabels, Counter>::default();
        registry.register(
            "xds_pushes",
            "xDS responses sent, per Gateway and type",
            xds_pushes.clone(),
        );
        let xds_acks = Family::<XdsLabels, Counter>::default();
        registry.register("xds_acks", "xDS responses ACKed by Envoy", xds_acks.clone());
        let xds_nacks = Family::<XdsLabels, Counter>::default();
        registry.register(
            "xds_nacks",
            "xDS responses rejected (NACKed) by Envoy",
            xds_nacks.clone(),
        );
        let connected_envoys = Family::<GatewayLabels, Gauge>::default();
        registry.register(
            "connected_envoys",
            "Envoys connected over ADS, per Gateway",
            connected_envoys.clone(),
        );
        let envoy_restarts = Family::<GatewayLabels, Counter>::default();
        registry.register(
            "envoy_restarts",
            "Managed Envoy processes restarted after exiting",
            envoy_restarts.clone(),
        );
        let input_errors = Gauge::default();
        registry.register(
            "input_errors",
            "Error diagnostics in the current inputs",
            input_errors.clone(),
        );
        let replacements = Family::<ReplacementLabels, Counter>::default();
        registry.register(
            "invalid_route_replacements",
            "Rules replaced by the 500 (or guarded), counted when they become replaced",
            replacements.clone(),
        );
        let replaced_now = Family::<ReplacementLabels, Gauge>::default();
        registry.register(
            "invalid_route_replacements_current",
            "Rules replaced in the configuration served now",
            replaced_now.clone(),
        );
        let scope_replacements = Family::<ScopeLabels, Counter>::default();
        registry.register(
            "scope_replacements",
            "Route configurations or virtual hosts replaced by a catch-all 500 because of a Gateway or listener policy, counted when they become replaced",
            scope_replacements.clone(),
        );
        let scope_replaced_now = Family::<ScopeLabels, Gauge>::default();
        registry.register(
            "scope_replacements_current",
            "Route configurations or virtual hosts replaced in the configuration served now",
            scope_replaced_now.clone(),
        );
        let policy_failures = Family::<PolicyLabels, Counter>::default();
        registry.register(
            "policy_validation_failures",
            "Policy errors and warnings, counted when they appear",
            policy_failures.clone(),
        );
        let validator = crate::validator::ValidatorMetrics::default();
        registry.register(
            "strict_validator_calls",
            "STRICT validations run by Envoy (a resident Envoy over ADS, or envoy --mode validate)",
            validator.calls.clone(),
        );
        registry.register(
            "strict_validator_cache_hits",
            "STRICT validations answered from the cache or a concurrent identical run",
            validator.cache_hits.clone(),
        );
        registry.register(
            "strict_validator_environment_errors",
            "STRICT validations that could not run (timeout, crash, missing binary)",
            validator.environment_errors.clone(),
        );
        registry.register(
            "strict_validator_fallbacks",
            "STRICT validations a resident Envoy could not answer, run as envoy --mode validate instead",
            validator.fallbacks.clone(),
        );
        registry.register(
            "strict_validator_duration_seconds",
            "Duration of one STRICT validation by Envoy",
            validator.duration.clone(),
        );
        let provider_busy_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "provider_busy_seconds",
            "How long the file provider has been processing the current change (0 when idle)",
            provider_busy_seconds.clone(),
        );
        let provider_stuck = Gauge::default();
        registry.register(
            "provider_stuck",
            "1 while the file provider has been processing one change for too long (edits are not applied; /readyz fails)",
            provider_stuck.clone(),
        );
        let provider_read_timeouts = Counter::default();
        registry.register(
            "provider_read_timeouts",
            "Manifest file reads abandoned after their deadline (a hung file system)",
            provider_read_timeouts.clone(),
        );
        let httpproxy_duplicates = Family::<RootLabels, Gauge>::default();
        registry.register(
            "httpproxy_duplicate_routes_current",
            "Routes of an HTTPProxy include tree not programmed because an earlier route has the same full conditions, per root",
            httpproxy_duplicates.clone(),
        );
        let httpproxies = Family::<ProxyStatusLabels, Gauge>::default();
        registry.register(
            "httpproxies",
            "HTTPProxies by currentStatus (valid, invalid, orphaned)",
            httpproxies.clone(),
        );
        let extension_hook_calls = Family::<HookCallLabels, Counter>::default();
        registry.register(
            "extension_hook_calls",
            "Extension hook calls by rpc and result (cached: answered from the reply cache, no call made)",
            extension_hook_calls.clone(),
        );
        let extension_hook_duration =
            Family::<HookLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                hook_histogram as fn() -> Histogram,
            );
        registry.register(
            "extension_hook_duration_seconds",
            "Duration of extension hook calls made to a server (retries included)",
            extension_hook_duration.clone(),
        );
        let allocator = Family::<AllocatorLabels, Gauge>::default();
        registry.register(
            "allocator_bytes",
            "The memory allocator's figures (jemalloc stats: allocated = live objects, resident = kept in RAM)",
            allocator.clone(),
        );
        let allocator_decay = Family::<AllocatorLabels, Gauge>::default();
        registry.register(
            "allocator_decay_milliseconds",
            "How long the memory allocator keeps freed pages before returning them to the OS (jemalloc opt.dirty_decay_ms / opt.muzzy_decay_ms; -1 = never)",
            allocator_decay.clone(),
        );
        if let Some(o) = allocator_options() {
            for (kind, ms) in [("dirty", o.dirty_decay_ms), ("muzzy", o.muzzy_decay_ms)] {
                allocator_decay
                    .get_or_create(&AllocatorLabels { kind: kind.into() })
                    .set(i64::try_from(ms).unwrap_or(i64::MAX));
            }
        }
        let allocator_background_threads = Gauge::default();
        registry.register(
            "allocator_background_threads",
            "1 while the memory allocator's background threads return freed pages to the OS on time",
            allocator_background_threads.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            translation_seconds,
            translations,
            incremental_recoveries,
            xds_pushes,
            xds_acks,
            xds_nacks,
            connected_envoys,
            envoy_restarts,
            input_errors,
            replacements,
            replaced_now,
            scope_replacements,
            scope_replaced_now,
            policy_failures,
            validator,
            provider_busy_seconds,
            provider_stuck,
            provider_read_timeouts,
            httpproxy_duplicates,
            httpproxies,
            extension_hook_calls,
            extension_hook_duration,
            allocator,
            allocator_decay,
            allocator_background_threads,
        }
    }

    /// Brings the allocator gauges up to date (before `/metrics` renders).
    /// Outside a binary whose global allocator is jemalloc the figures are
    /// jemalloc's own (near zero), not the process's.
    pub fn refresh_allocator(&self) {
        // jemalloc's statistics are a snapshot refreshed by advancing the epoch.
        if tikv_jemalloc_ctl::epoch::advance().is_err() {
            return;
        }
        let figures = [
            ("allocated", tikv_jemalloc_ctl::stats::allocated::read()),
            ("active", tikv_jemalloc_ctl::stats::active::read()),
            ("resident", tikv_jemalloc_ctl::stats::resident::read()),
            ("retained", tikv_jemalloc_ctl::stats::retained::read()),
        ];
        for (kind, value) in figures {
            if let Ok(v) = value {
                self.allocator
                    .get_or_create(&AllocatorLabels { kind: kind.into() })
                    .set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        }
        if let Ok(on) = tikv_jemalloc_ctl::background_thread::read() {
            self.allocator_background_threads.set(i64::from(on));
        }
    }

    /// Brings `extension_hook_calls` up to the client's counts.
    pub fn sync_extension_calls(&self, stats: &extension::StatsSnapshot) {
        for ((hook, result), n) in &stats.calls {
            let counter = self.extension_hook_calls.get_or_create(&HookCallLabels {
                hook: hook.rpc().into(),
                result: result.label().into(),
            });
            let counted = counter.get();
            if *n > counted {
                counter.inc_by(n - counted);
            }
        }
    }

    /// Counts what is new in `out` compared with `previous` (the output
    /// served before), and sets the current-replacements gauge.
    pub fn record_output(&self, previous: Option<&translate::Output>, out: &translate::Output) {
        let labels = |r: &translate::Replacement| ReplacementLabels {
            gateway: r.gateway.clone(),
            route_namespace: r.route_namespace.clone(),
            route_name: r.route_name.clone(),
            error_class: r.class.to_string(),
        };
        let before: std::collections::BTreeSet<&translate::Replacement> = previous
            .map(|p| p.replacements.iter().collect())
            .unwrap_or_default();
        for r in &out.replacements {
            if !before.contains(r) {
                self.replacements.get_or_create(&labels(r)).inc();
            }
        }
        self.replaced_now.clear();
        for r in &out.replacements {
            self.replaced_now.get_or_create(&labels(r)).inc();
        }
        let scope_labels = |r: &translate::ScopeReplacement| ScopeLabels {
            gateway: r.gateway.clone(),
            scope: r.scope.clone(),
            listener: r.listener.clone(),
            error_class: r.class.to_string(),
        };
        let before: std::collections::BTreeSet<&translate::ScopeReplacement> = previous
            .map(|p| p.scope_replacements.iter().collect())
            .unwrap_or_default();
        for r in &out.scope_replacements {
            if !before.contains(r) {
                self.scope_replacements.get_or_create(&scope_labels(r)).inc();
            }
        }
        self.scope_replaced_now.clear();
        for r in &out.scope_replacements {
            self.scope_replaced_now.get_or_create(&scope_labels(r)).inc();
        }
        self.httpproxy_duplicates.clear();
        self.httpproxies.clear();
        for status in ["valid", "invalid", "orphaned"] {
            // Present at 0, so that a dashboard sees every status.
            self.httpproxies
                .get_or_create(&ProxyStatusLabels {
                    status: status.into(),
                })
                .set(0);
        }
        for p in &out.http_proxies {
            self.httpproxies
                .get_or_create(&ProxyStatusLabels {
                    status: p.current_status.clone(),
                })
                .inc();
            if p.role == "root" {
                self.httpproxy_duplicates
                    .get_or_create(&RootLabels {
                        root: format!("{}/{}", p.namespace, p.name),
                    })
                    .set(p.duplicate_routes as i64);
            }
        }
        let before: std::collections::BTreeSet<&translate::PolicyFailure> = previous
            .map(|p| p.policy_failures.iter().collect())
            .unwrap_or_default();
        for f in &out.policy_failures {
            if !before.contains(f) {
                self.policy_failures
                    .get_or_create(&PolicyLabels {
                        policy_kind: f.policy_kind.clone(),
                        namespace: f.namespace.clone(),
                        name: f.name.clone(),
                        reason: f.reason.clone(),
                    })
                    .inc();
            }
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.push_str("# encoding failed\n");
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `.cargo/config.toml` bakes `malloc_conf` into jemalloc: dirty pages
    /// go back to the OS after 1 s, by background threads (ARCHITECTURE.md
    /// §7, "Memory"). A build without it (jemalloc's defaults: 10 s, no
    /// background threads) fails here.
    #[test]
    fn the_build_has_the_decay_settings() {
        let options = allocator_options().expect("jemalloc's options are readable");
        assert_eq!(
            options,
            AllocatorOptions {
                dirty_decay_ms: 1000,
                muzzy_decay_ms: 0,
                background_thread: true,
            },
            "jemalloc was built without .cargo/config.toml's JEMALLOC_SYS_WITH_MALLOC_CONF"
        );
        let metrics = Metrics::new().encode();
        assert!(
            metrics.contains("portcullis_allocator_decay_milliseconds{kind=\"dirty\"} 1000"),
            "{metrics}"
        );
    }

    #[test]
    fn incremental_recoveries_are_exported_as_a_counter() {
        let metrics = Metrics::new();
        assert!(
            metrics
                .encode()
                .contains("portcullis_incremental_recoveries_total 0")
        );
        metrics.incremental_recoveries.inc();
        let text = metrics.encode();
        assert!(
            text.contains("portcullis_incremental_recoveries_total 1"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE portcullis_incremental_recoveries counter"),
            "{text}"
        );
    }
}
