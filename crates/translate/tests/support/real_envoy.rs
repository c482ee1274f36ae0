//! The STRICT validator for tests: the real Envoy (`envoy --mode validate`
//! through testkit), one process per candidate, counting calls.

use std::sync::atomic::{AtomicUsize, Ordering};

use translate::strict::{Candidate, Validator, Verdict};

#[derive(Default)]
pub struct RealEnvoy {
    calls: AtomicUsize,
}

impl RealEnvoy {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Validator for RealEnvoy {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        batch
            .iter()
            .map(|c| {
                self.calls.fetch_add(1, Ordering::Relaxed);
                match testkit::envoy::validate(&c.bootstrap) {
                    Ok(()) => Verdict::Accepted,
                    Err(m) => Verdict::Rejected(m),
                }
            })
            .collect()
    }
}
