//! The one retry policy of every watch of the provider (the reflectors, the
//! Secret metadata watch, the CRD watch of [`crate::discovery`], the
//! provisioner's watches) and of the discovery retries at start.
//!
//! kube-runtime's `default_backoff()` is client-go's: 800 ms doubling to
//! 30 s, reset only after 120 s without an error. After an apiserver outage
//! of a few seconds the watches have backed off to 6–12 s by the time it is
//! back, so edits made then reach Envoy that much later. A controller is
//! one client of its apiserver, not thousands of kubelets: [`WatchBackoff`]
//! starts at [`INITIAL`], doubles, and is capped at [`CAP`], so a watch is
//! retried at most [`CAP`] after the apiserver returns. Each delay is
//! jittered ("equal jitter": uniform in `[d/2, d]` of its un-jittered
//! value `d`) so that the watches of many kinds (and of several replicas)
//! do not retry in lock-step. The stream wrapper (`StreamBackoff`) resets
//! it on every successful event, so each outage starts again at
//! [`INITIAL`]; it never gives up (a watch that stopped would freeze its
//! store for good).
//!
//! A `410 Gone` is not a failure to back off from but the apiserver saying
//! "relist" (after an outage it is how every watch learns that its
//! resourceVersion is gone): [`retried`] starts the delay after it again at
//! [`INITIAL`], as client-go relists at once, instead of waiting the delay
//! the outage's connection errors have grown to. A relist that fails grows
//! the delay again, so a 410 cannot make a busy loop.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::utils::Backoff;
use kube::runtime::{WatchStreamExt, watcher};

/// The first delay after an error (before jitter).
pub const INITIAL: Duration = Duration::from_millis(250);
/// The longest delay between two attempts.
pub const CAP: Duration = Duration::from_secs(3);

/// The policy; see the module doc.
#[derive(Debug)]
pub struct WatchBackoff {
    /// Errors since the last reset.
    attempt: u32,
    /// Per-instance random state for the jitter.
    seed: std::collections::hash_map::RandomState,
    draws: u64,
    /// Set by [`retried`] when the error about to be backed off from is a
    /// `410 Gone`.
    gone: Arc<AtomicBool>,
}

/// A fresh policy for one watch.
pub fn watch() -> WatchBackoff {
    WatchBackoff {
        attempt: 0,
        seed: std::collections::hash_map::RandomState::new(),
        draws: 0,
        gone: Arc::default(),
    }
}

/// `stream` (a watcher's) retried with the policy: every error is backed
/// off from, a `410 Gone` from [`INITIAL`] (see the module doc).
pub fn retried<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send {
    retried_with(watch(), stream)
}

fn retried_with<K>(
    policy: WatchBackoff,
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send {
    let gone = policy.gone.clone();
    stream
        .inspect(move |item| {
            if let Err(watcher::Error::WatchError(status)) = item
                && status.code == 410
            {
                gone.store(true, Ordering::Relaxed);
            }
        })
        .backoff(policy)
}

impl WatchBackoff {
    /// The un-jittered delay of the `attempt`th consecutive error (from 0):
    /// `INITIAL * 2^attempt`, at most [`CAP`].
    pub fn ceiling(attempt: u32) -> Duration {
        INITIAL
            .checked_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
            .map_or(CAP, |d| d.min(CAP))
    }

    /// A uniform draw in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.draws = self.draws.wrapping_add(1);
        let mut h = self.seed.build_hasher();
        h.write_u64(self.draws);
        (h.finish() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.gone.swap(false, Ordering::Relaxed) {
            self.attempt = 0;
        }
        let ceiling = Self::ceiling(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        let half = ceiling / 2;
        Some(half + half.mul_f64(self.unit()))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_from_initial_to_the_cap_and_stays_there() {
        let ceilings: Vec<Duration> = (0..8).map(WatchBackoff::ceiling).collect();
        assert_eq!(
            ceilings,
            [250, 500, 1000, 2000, 3000, 3000, 3000, 3000].map(Duration::from_millis)
        );
        // Far past any shift width: still the cap, no overflow.
        assert_eq!(WatchBackoff::ceiling(40), CAP);
        assert_eq!(WatchBackoff::ceiling(u32::MAX), CAP);
    }

    #[test]
    fn every_delay_is_jittered_within_half_its_ceiling_and_never_over_the_cap() {
        let mut b = watch();
        for attempt in 0..200 {
            let d = b.next().expect("never gives up");
            let ceiling = WatchBackoff::ceiling(attempt);
            assert!(d <= ceiling && d <= CAP, "attempt {attempt}: {d:?} > {ceiling:?}");
            assert!(d >= ceiling / 2, "attempt {attempt}: {d:?} < half of {ceiling:?}");
        }
        // Jittered: the capped delays are not all one value.
        let capped: std::collections::BTreeSet<Duration> = (0..50).filter_map(|_| b.next()).collect();
        assert!(capped.len() > 10, "{capped:?}");
    }

    #[test]
    fn reset_starts_again_at_the_initial_delay() {
        let mut b = watch();
        for _ in 0..10 {
            b.next();
        }
        assert!(b.next().expect("delay") >= CAP / 2);
        b.reset();
        let first = b.next().expect("delay");
        assert!(first <= INITIAL && first >= INITIAL / 2, "{first:?}");
        let second = b.next().expect("delay");
        assert!(second <= INITIAL * 2, "{second:?}");
    }

    fn gone() -> watcher::Error {
        watcher::Error::WatchError(Box::new(kube::core::Status {
            code: 410,
            reason: "Expired".into(),
            ..Default::default()
        }))
    }

    /// After an outage's errors have grown the delay to the cap, the 410
    /// that ends it is followed by the relist within [`INITIAL`], not the
    /// grown delay; any other error keeps the grown delay.
    #[tokio::test]
    async fn a_410_gone_is_retried_from_the_initial_delay() {
        let after = |error: watcher::Error| async move {
            let mut policy = watch();
            // An outage: enough connection errors to reach the cap.
            for _ in 0..10 {
                policy.next();
            }
            let items: Vec<watcher::Result<watcher::Event<()>>> =
                vec![Err(error), Ok(watcher::Event::InitDone)];
            let mut stream = std::pin::pin!(retried_with(policy, futures::stream::iter(items)));
            assert!(stream.next().await.is_some_and(|e| e.is_err()));
            let started = std::time::Instant::now();
            assert!(stream.next().await.is_some_and(|e| e.is_ok()));
            started.elapsed()
        };
        let waited = after(gone()).await;
        assert!(
            waited <= INITIAL + Duration::from_millis(100),
            "after a 410: {waited:?}"
        );
        let waited = after(watcher::Error::NoResourceVersion).await;
        assert!(waited >= CAP / 2, "after another error: {waited:?}");
    }
}
