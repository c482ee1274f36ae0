//! The time from a push to its answer, per stream and type, logged at
//! debug: Envoy acknowledges a response after applying it, so this is the
//! data plane's share of a propagation (README "Benchmarks";
//! `PORTCULLIS_PROPAGATION_LOG` reads these lines).

use std::time::Instant;

/// When the response awaiting an answer was handed to the stream.
#[derive(Debug, Default)]
pub(crate) struct PushClock(Option<Instant>);

impl PushClock {
    pub(crate) fn pushed(&mut self) {
        self.0 = Some(Instant::now());
    }

    /// Logs the answer to the last push, once.
    pub(crate) fn answered(&mut self, node: &str, type_url: &str, nacked: bool, protocol: &'static str) {
        if let Some(at) = self.0.take() {
            tracing::debug!(
                node,
                type_url = crate::types::short(type_url),
                nacked,
                protocol,
                push_to_ack_ms = at.elapsed().as_secs_f64() * 1e3,
                "xds acknowledged"
            );
        }
    }
}
