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

pub struct Metrics {
    pub registry: Mutex<Registry>,
    pub translation_seconds: Histogram,
    pub translations: Counter,
    pub xds_pushes: Family<XdsLabels, Counter>,
    pub xds_acks: Family<XdsLabels, Counter>,
    pub xds_nacks: Family<XdsLabels, Counter>,
    pub connected_envoys: Family<GatewayLabels, Gauge>,
    pub envoy_restarts: Family<GatewayLabels, Counter>,
    pub input_errors: Gauge,
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
        Self {
            registry: Mutex::new(registry),
            translation_seconds,
            translations,
            xds_pushes,
            xds_acks,
            xds_nacks,
            connected_envoys,
            envoy_restarts,
            input_errors,
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
