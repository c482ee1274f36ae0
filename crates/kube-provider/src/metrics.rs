//! Metrics of Kubernetes mode, registered under the binary's `portcullis_`
//! prefix next to `serve`'s ([`KubeMetrics::register`]). One value is
//! cloned into the provider, the status writer and the election; the
//! families share their counters.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

impl KindLabels {
    pub fn of(kind: crate::Kind) -> Self {
        Self::named(kind.name())
    }

    /// By the kind's name (an extension server's kind has no [`crate::Kind`]).
    pub fn named(kind: &str) -> Self {
        Self { kind: kind.into() }
    }
}

#[derive(Clone, Debug, Default)]
pub struct KubeMetrics {
    pub watch_events: Family<KindLabels, Counter>,
    pub watch_errors: Family<KindLabels, Counter>,
    pub relists: Family<KindLabels, Counter>,
    pub late_kinds: Family<KindLabels, Counter>,
    pub snapshots: Counter,
    pub secrets_held: Gauge,
    pub status_writes: Family<KindLabels, Counter>,
    pub status_unchanged: Family<KindLabels, Counter>,
    pub status_conflicts: Family<KindLabels, Counter>,
    pub status_failures: Family<KindLabels, Counter>,
    pub status_queue_depth: Gauge,
    pub leader: Gauge,
}

impl KubeMetrics {
    /// Registers every metric (the registry adds the `portcullis_` prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kube_watch_events",
            "Watch events applied to a reflector store, per kind",
            self.watch_events.clone(),
        );
        registry.register(
            "kube_watch_errors",
            "Watch errors (retried with backoff; the store is kept), per kind",
            self.watch_errors.clone(),
        );
        registry.register(
            "kube_relists",
            "Relists completed after the initial list, per kind",
            self.relists.clone(),
        );
        registry.register(
            "kube_late_kinds",
            "Kinds whose CRD was installed after the controller started, now watched",
            self.late_kinds.clone(),
        );
        registry.register(
            "kube_snapshots",
            "Input snapshots published by the Kubernetes provider",
            self.snapshots.clone(),
        );
        registry.register(
            "kube_secrets_held",
            "Secrets whose data the provider holds (only those a listener references)",
            self.secrets_held.clone(),
        );
        registry.register(
            "status_writes",
            "Status server-side applies accepted, per kind",
            self.status_writes.clone(),
        );
        registry.register(
            "status_unchanged",
            "Status writes skipped because the live status already said it, per kind",
            self.status_unchanged.clone(),
        );
        registry.register(
            "status_conflicts",
            "Status writes refused with 409 (retried), per kind",
            self.status_conflicts.clone(),
        );
        registry.register(
            "status_failures",
            "Status writes that failed otherwise (retried), per kind",
            self.status_failures.clone(),
        );
        registry.register(
            "status_queue_depth",
            "Objects whose status waits to be written",
            self.status_queue_depth.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease (writes status)",
            self.leader.clone(),
        );
    }
}
